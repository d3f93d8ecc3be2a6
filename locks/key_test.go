package locks_test

import (
	"regexp"
	"strings"
	"testing"

	"github.com/lockgate/lockgate/locks"
)

// FuzzKeyPatterns holds ValidNamespace and ValidName to the regexps of the
// public API: the same strings pass.
func FuzzKeyPatterns(f *testing.F) {
	ns := regexp.MustCompile(locks.NamespacePattern)
	name := regexp.MustCompile(locks.NamePattern)
	for _, s := range []string{"", "a", "A", "0", "-", "_a", "a-b_c", "a.b:c-d_e", "a/b", "a{b}", "é", "a\n", "a\x00",
		strings.Repeat("a", 63), strings.Repeat("a", 64), strings.Repeat("Z", 200), strings.Repeat("Z", 201), "a\xff"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if got, want := locks.ValidNamespace(s), ns.MatchString(s); got != want {
			t.Errorf("ValidNamespace(%q) = %v, want %v (the regexp)", s, got, want)
		}
		if got, want := locks.ValidName(s), name.MatchString(s); got != want {
			t.Errorf("ValidName(%q) = %v, want %v (the regexp)", s, got, want)
		}
	})
}
