package auth

import "testing"

// TestIdentityString: the text of an identity names it alone: no two
// identities share one.
func TestIdentityString(t *testing.T) {
	for _, tc := range []struct {
		id   Identity
		want string
	}{
		{Identity{Subject: "alice"}, "alice"},
		{Identity{Issuer: "https://a.example", Subject: "alice"}, "https://a.example#alice"},
		{Identity{Subject: "https://a.example#alice"}, "#https://a.example#alice"},
		{Identity{Issuer: "https://a.example", Subject: "x#y"}, "https://a.example#x#y"},
	} {
		if got := tc.id.String(); got != tc.want {
			t.Errorf("%+v: got %q, want %q", tc.id, got, tc.want)
		}
	}
	seen := map[string]Identity{}
	for _, iss := range []string{"", "a", "https://a.example"} {
		for _, sub := range []string{"b", "a#b", "#b", "https://a.example#b", "a", ""} {
			id := Identity{iss, sub}
			if other, dup := seen[id.String()]; dup {
				t.Errorf("%+v and %+v both read %q", id, other, id.String())
			}
			seen[id.String()] = id
		}
	}
}
