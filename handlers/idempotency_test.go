package handlers

import (
	"regexp"
	"strings"
	"testing"

	"github.com/lockgate/lockgate/locks"
)

func TestIdempotencyKeyForms(t *testing.T) {
	for name, tc := range map[string]struct{ header, key string }{
		"bare":              {"8e03978e-40d5-43e8-bc93-6894a57f9324", "8e03978e-40d5-43e8-bc93-6894a57f9324"},
		"quoted":            {`"abc"`, "abc"},
		"escapes":           {`"a\"b\\c"`, `a"b\c`},
		"bare with quote":   {`a"b`, `a"b`},
		"bare with slash":   {`a\b`, `a\b`},
		"longest bare":      {strings.Repeat("~", 255), strings.Repeat("~", 255)},
		"longest quoted":    {`"` + strings.Repeat(`\\`, 255) + `"`, strings.Repeat(`\`, 255)},
		"empty":             {"", ""},
		"too long":          {strings.Repeat("k", 256), ""},
		"quoted too long":   {`"` + strings.Repeat("k", 256) + `"`, ""},
		"empty quoted":      {`""`, ""},
		"lone quote":        {`"`, ""},
		"unterminated":      {`"abc`, ""},
		"bad escape":        {`"a\nb"`, ""},
		"trailing escape":   {`"a\"`, ""},
		"quote inside":      {`"a"b"`, ""},
		"space":             {"a b", ""},
		"quoted with space": {`"a b"`, ""},
		"control":           {"a\tb", ""},
		"non-ASCII":         {"clé", ""},
	} {
		t.Run(name, func(t *testing.T) {
			got, err := idempotencyKey(tc.header)
			if got != tc.key || (err == nil) != (tc.key != "") {
				t.Fatalf("got %q, %v; want %q", got, err, tc.key)
			}
		})
	}
}

// FuzzIdempotencyKeyPattern: the spec's pattern (which the gate checks)
// lets through exactly the headers idempotencyKey reads.
func FuzzIdempotencyKeyPattern(f *testing.F) {
	spec, err := GetSpec()
	if err != nil {
		f.Fatal(err)
	}
	p := spec.Components.Parameters["IdempotencyKey"].Value.Schema.Value
	re := regexp.MustCompile(p.Pattern)
	for _, s := range []string{"abc", `"abc"`, `"a\"b"`, `"a\\"`, `"`, `""`, "a b", `"a\nb"`, strings.Repeat("k", 255), strings.Repeat("k", 256)} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, h string) {
		k, err := idempotencyKey(h)
		if re.MatchString(h) != (err == nil) {
			t.Fatalf("%q: pattern says %t, idempotencyKey says %v", h, re.MatchString(h), err)
		}
		if err == nil && !locks.ValidIdempotencyKey(k) {
			t.Fatalf("%q: read the invalid key %q", h, k)
		}
	})
}
