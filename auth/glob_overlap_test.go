package auth

import "testing"

func TestGlobsOverlap(t *testing.T) {
	for _, tc := range []struct {
		a, b string
		want bool
	}{
		{"team-a", "team-a", true},
		{"team-a", "team-b", false},
		{"etl-*", "etl-x*", true},
		{"*-prod", "etl-*", true},
		{"a*", "b*", false},
		{"*", "anything", true},
		{"a*c", "ab*", true},
		{"a*c", "*b", false},
		{"ab", "a*b*", true},
		{"", "*", true},
		{"x", "", false},
	} {
		if got := globsOverlap(tc.a, tc.b); got != tc.want {
			t.Errorf("globsOverlap(%q, %q): got %v, want %v", tc.a, tc.b, got, tc.want)
		}
		if got := globsOverlap(tc.b, tc.a); got != tc.want {
			t.Errorf("globsOverlap(%q, %q): got %v, want %v", tc.b, tc.a, got, tc.want)
		}
	}
}
