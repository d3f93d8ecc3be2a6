package middleware

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestRequestID(t *testing.T) {
	for name, tc := range map[string]struct {
		in       string
		keep     bool
		wantSafe bool
	}{
		"caller's id":   {in: "abc-123_x.y", keep: true},
		"none":          {in: ""},
		"too long":      {in: strings.Repeat("a", 65)},
		"unsafe chars":  {in: "a b"},
		"header inject": {in: "a\r\nSet-Cookie: x"},
	} {
		t.Run(name, func(t *testing.T) {
			var seen string
			h := RequestID(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				seen = RequestIDFromContext(r.Context())
			}))
			req := httptest.NewRequest("GET", "/", nil)
			if tc.in != "" {
				req.Header[RequestIDHeader] = []string{tc.in}
			}
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			got := rec.Header().Get(RequestIDHeader)
			if got == "" || got != seen {
				t.Fatalf("header %q, context %q: want the same non-empty id", got, seen)
			}
			if tc.keep != (got == tc.in) {
				t.Fatalf("got %q for %q, want kept: %v", got, tc.in, tc.keep)
			}
			if !validRequestID(got) {
				t.Fatalf("got unsafe id %q", got)
			}
		})
	}
}
