package handlers

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/lockgate/lockgate/locks/embedded"
)

// TestWhoAmIMethodsAndAdminGlobs: a non-GET on /ui/api/whoami is a 405
// problem with Allow: GET, not the dashboard's text 404; and whoami shows
// only the admin globs that administer a namespace the token is granted.
func TestWhoAmIMethodsAndAdminGlobs(t *testing.T) {
	b := embedded.New(embedded.Options{})
	t.Cleanup(func() { b.Close() })
	_, h := newTestHandler(t, Config{Backend: b, UI: http.NotFoundHandler()})
	ts := httptest.NewServer(h)
	t.Cleanup(ts.Close)
	tok, err := jwt.NewWithClaims(jwt.SigningMethodHS256, jwt.MapClaims{
		"sub": "viewer", "ns": []string{"team-a", "etl-*"}, "ns_admin": []string{"team-a", "team-b", "etl-x*", "*-prod"},
		"exp": time.Now().Add(time.Hour).Unix(),
	}).SignedString([]byte(testSecret))
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range []string{"POST", "PUT", "DELETE"} {
		req, _ := http.NewRequestWithContext(t.Context(), m, ts.URL+"/ui/api/whoami", nil)
		req.Header.Set("Authorization", "Bearer "+tok)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusMethodNotAllowed || resp.Header.Get("Allow") != "GET" ||
			!strings.HasPrefix(resp.Header.Get("Content-Type"), "application/problem+json") {
			t.Errorf("%s: got %d %q, Allow %q; want 405 problem+json with Allow: GET", m, resp.StatusCode, resp.Header.Get("Content-Type"), resp.Header.Get("Allow"))
		}
	}
	req, _ := http.NewRequestWithContext(t.Context(), "GET", ts.URL+"/ui/api/whoami", nil)
	req.Header.Set("Authorization", "Bearer "+tok)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	var who struct {
		AdminNamespaces []string `json:"admin_namespaces"`
	}
	if err := json.Unmarshal(body, &who); err != nil {
		t.Fatal(err)
	}
	// team-b is not granted; *-prod matches etl-prod, which etl-* grants.
	if got := strings.Join(who.AdminNamespaces, ","); got != "team-a,etl-x*,*-prod" {
		t.Errorf("admin_namespaces: got %q, want team-a,etl-x*,*-prod (team-b grants nothing)", got)
	}
}
