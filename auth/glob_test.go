package auth

import (
	"strings"
	"testing"
)

func TestMatchNamespace(t *testing.T) {
	for _, tc := range []struct {
		glob, ns string
		want     bool
	}{
		{"billing", "billing", true},
		{"a", "ab", false},
		{"ab", "a", false},
		{"b", "ab", false},
		{"*", "anything", true},
		{"*", "", true},
		{"", "", true},
		{"", "a", false},
		{"etl-*", "etl-daily", true},
		{"etl-*", "etl-", true},
		{"etl-*", "etl", false},
		{"etl-*", "xetl-daily", false},
		{"*-prod", "billing-prod", true},
		{"*-prod", "billing-prod2", false},
		{"a*b*c", "aXbYc", true},
		{"a*b*c", "abc", true},
		{"a*b*c", "acb", false},
		{"*a*", "bab", true},
		{"**", "x", true},
		{"a?c", "abc", false},
		{"a?c", "a?c", true},
		{"[a]", "a", false},
	} {
		if got := matchNamespace(tc.glob, tc.ns); got != tc.want {
			t.Errorf("matchNamespace(%q, %q): got %v, want %v", tc.glob, tc.ns, got, tc.want)
		}
	}
}

// TestMatchNamespaceManyStars: a glob of many stars that cannot match stays
// cheap (a backtracking matcher takes exponential time here).
func TestMatchNamespaceManyStars(t *testing.T) {
	glob := strings.Repeat("*a", 2000) + "*b"
	ns := strings.Repeat("a", 63)
	if matchNamespace(glob, ns) {
		t.Fatal("matched, want no match")
	}
}

func TestClaimsAllows(t *testing.T) {
	c := Claims{Namespaces: []string{"billing", "etl-*"}}
	for ns, want := range map[string]bool{"billing": true, "etl-x": true, "bill": false, "etl": false} {
		if got := c.Allows(ns); got != want {
			t.Errorf("Allows(%q): got %v, want %v", ns, got, want)
		}
	}
	if (Claims{}).Allows("a") {
		t.Error("no globs allowed a namespace")
	}
}
