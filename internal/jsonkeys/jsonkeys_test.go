package jsonkeys

import "testing"

func TestDuplicate(t *testing.T) {
	for name, tc := range map[string]struct {
		in      string
		wantKey string
		wantDup bool
	}{
		"none":                {in: `{"ttl_ms":1,"wait_ms":2}`},
		"top level":           {in: `{"ttl_ms":1,"ttl_ms":2}`, wantKey: "ttl_ms", wantDup: true},
		"after nested object": {in: `{"a":{"b":1},"a":2}`, wantKey: "a", wantDup: true},
		"nested":              {in: `{"a":{"b":1,"b":2}}`, wantKey: "b", wantDup: true},
		"in an array":         {in: `[{"x":1},{"x":1,"x":2}]`, wantKey: "x", wantDup: true},
		"same key, siblings":  {in: `[{"x":1},{"x":2}]`},
		"strings as values":   {in: `{"a":"a","b":"a"}`},
		"array of strings":    {in: `{"a":["a","a"],"b":1}`},
		"escaped equal keys":  {in: `{"ttl_ms":1,"ttl\u005fms":2}`, wantKey: "ttl_ms", wantDup: true},
		"case differs":        {in: `{"ns":1,"NS":2}`},
		"empty":               {in: ``},
		"malformed":           {in: `{"a":`},
		"scalar":              {in: `5`},
	} {
		t.Run(name, func(t *testing.T) {
			key, dup := Duplicate([]byte(tc.in))
			if key != tc.wantKey || dup != tc.wantDup {
				t.Fatalf("Duplicate(%s): got %q, %v; want %q, %v", tc.in, key, dup, tc.wantKey, tc.wantDup)
			}
		})
	}
}

func TestTrailing(t *testing.T) {
	for in, want := range map[string]bool{
		`{"ttl_ms":1}`:             false,
		"{\"ttl_ms\":1} \n\t":      false,
		`{"ttl_ms":1}{"ttl_ms":2}`: true,
		`{"ttl_ms":1} x`:           true,
		`{"ttl_ms":1} 5`:           true,
		`{"ttl_ms":1}]`:            true,
		`{"ttl_ms":`:               false,
		``:                         false,
	} {
		if got := Trailing([]byte(in)); got != want {
			t.Errorf("Trailing(%q): got %v, want %v", in, got, want)
		}
	}
}
