package ui_test

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/lockgate/lockgate/internal/gatewaytest"
	"github.com/lockgate/lockgate/internal/redistest"
	"github.com/lockgate/lockgate/ui"
)

const secret = "ui-test-secret-0123456789-abcdefghijklmnop"

func startGateway(t *testing.T, args ...string) *gatewaytest.Gateway {
	t.Helper()
	return gatewaytest.Start(t, map[string]string{"LOCKGATE_JWT_SECRET": secret}, args...)
}

// token signs an HS256 JWT for sub with the namespace globs ns.
func token(t *testing.T, sub string, ns ...string) string {
	t.Helper()
	s, err := jwt.NewWithClaims(jwt.SigningMethodHS256, jwt.MapClaims{
		"sub": sub, "ns": ns, "exp": time.Now().Add(time.Hour).Unix(),
	}).SignedString([]byte(secret))
	if err != nil {
		t.Fatalf("sign token: %v", err)
	}
	return s
}

func get(t *testing.T, url string, header http.Header) (*http.Response, []byte) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range header {
		req.Header[k] = v
	}
	c := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, body
}

// TestAssetsHeaders: every asset comes with the policy, nosniff, no
// Referer and a validator, and a second load with it costs a 304.
func TestAssetsHeaders(t *testing.T) {
	gw := startGateway(t, "--ui")
	for _, tc := range []struct{ path, ctype string }{
		{"/ui/", "text/html; charset=utf-8"},
		{"/ui/app.js", "text/javascript; charset=utf-8"},
		{"/ui/style.css", "text/css; charset=utf-8"},
	} {
		t.Run(tc.path, func(t *testing.T) {
			resp, body := get(t, gw.URL+tc.path, nil)
			if resp.StatusCode != http.StatusOK || len(body) == 0 {
				t.Fatalf("status: got %d with %d bytes, want 200 with the asset", resp.StatusCode, len(body))
			}
			for k, want := range map[string]string{
				"Content-Type":            tc.ctype,
				"Content-Security-Policy": ui.ContentSecurityPolicy,
				"X-Content-Type-Options":  "nosniff",
				"Referrer-Policy":         "no-referrer",
				"Cache-Control":           "no-cache",
			} {
				if got := resp.Header.Get(k); got != want {
					t.Errorf("%s: got %q, want %q", k, got, want)
				}
			}
			etag := resp.Header.Get("ETag")
			if etag == "" {
				t.Fatal("no ETag")
			}
			again, _ := get(t, gw.URL+tc.path, http.Header{"If-None-Match": {etag}})
			if again.StatusCode != http.StatusNotModified {
				t.Errorf("with If-None-Match: got %d, want 304", again.StatusCode)
			}
		})
	}
}

// TestAssetsNothingInline: the page has no inline script, style or event
// handler, which the policy would block, and names no other host.
func TestAssetsNothingInline(t *testing.T) {
	gw := startGateway(t, "--ui")
	_, page := get(t, gw.URL+"/ui/", nil)
	for _, bad := range []string{"<style", " style=", "onclick=", "onload=", "javascript:", "http://", "https://", "//"} {
		if strings.Contains(string(page), bad) {
			t.Errorf("the page holds %q", bad)
		}
	}
	if n := strings.Count(string(page), "<script"); n != 1 || !strings.Contains(string(page), `<script src="app.js" defer></script>`) {
		t.Errorf("the page has %d scripts, want the one app.js", n)
	}
	_, js := get(t, gw.URL+"/ui/app.js", nil)
	for _, bad := range []string{"innerHTML", "outerHTML", "insertAdjacentHTML", "eval(", "new Function", "localStorage", "console.log", "console.error", "console.warn", "console.info", "console.debug"} {
		if strings.Contains(string(js), bad) {
			t.Errorf("app.js uses %q", bad)
		}
	}
}

func TestUIRoutes(t *testing.T) {
	gw := startGateway(t, "--ui")
	for _, tc := range []struct {
		name, path string
		status     int
	}{
		{"the page, without the slash", "/ui", http.StatusMovedPermanently},
		{"an asset not embedded", "/ui/nothing.js", http.StatusNotFound},
		{"whoami without a token", "/ui/api/whoami", http.StatusUnauthorized},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp, _ := get(t, gw.URL+tc.path, nil)
			if resp.StatusCode != tc.status {
				t.Fatalf("got %d, want %d", resp.StatusCode, tc.status)
			}
			if tc.status == http.StatusMovedPermanently && resp.Header.Get("Location") != "/ui/" {
				t.Errorf("Location: got %q, want /ui/", resp.Header.Get("Location"))
			}
		})
	}
}

// TestOffByDefault: without --ui nothing is served under /ui/.
func TestOffByDefault(t *testing.T) {
	gw := startGateway(t)
	for _, p := range []string{"/ui/", "/ui/app.js", "/ui/api/whoami"} {
		if resp, _ := get(t, gw.URL+p, nil); resp.StatusCode != http.StatusNotFound {
			t.Errorf("GET %s: got %d, want 404", p, resp.StatusCode)
		}
	}
}

// TestWhoAmI: the subject and the token's namespace globs, and nothing of
// the token itself.
func TestWhoAmI(t *testing.T) {
	gw := startGateway(t, "--ui")
	tok := token(t, "viewer", "team-a", "etl-*")
	resp, body := get(t, gw.URL+"/ui/api/whoami", http.Header{"Authorization": {"Bearer " + tok}})
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status: got %d, want 200: %s", resp.StatusCode, body)
	}
	var who struct {
		Subject    string   `json:"subject"`
		Namespaces []string `json:"namespaces"`
	}
	if err := json.Unmarshal(body, &who); err != nil {
		t.Fatal(err)
	}
	if who.Subject != "viewer" || strings.Join(who.Namespaces, ",") != "team-a,etl-*" {
		t.Errorf("got %+v, want viewer with team-a,etl-*", who)
	}
	if strings.Contains(string(body), tok[strings.LastIndexByte(tok, '.')+1:]) {
		t.Error("the answer holds the token's signature")
	}
	if got := resp.Header.Get("Cache-Control"); got != "no-store" {
		t.Errorf("Cache-Control: got %q, want no-store", got)
	}
}

// TestUINamespaces: /ui/api/namespaces names, on both backends, the
// namespaces a token grants by name and those with held locks that its
// globs match, never one it is not granted; without a token, a 401.
func TestUINamespaces(t *testing.T) {
	for name, args := range map[string]func(t *testing.T) []string{
		"memory": func(*testing.T) []string { return nil },
		"redis":  func(t *testing.T) []string { return []string{"--redis-url", redistest.Start(t).URL()} },
	} {
		t.Run(name, func(t *testing.T) {
			gw := startGateway(t, append(args(t), "--ui")...)
			star := token(t, "ops", "*")
			for _, ns := range []string{"etl-a", "etl-b", "team-x"} {
				req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, gw.URL+"/locks/"+ns+"/l", nil)
				req.Header.Set("Authorization", "Bearer "+star)
				resp, err := http.DefaultClient.Do(req)
				if err != nil || resp.StatusCode != http.StatusCreated {
					t.Fatalf("acquire in %s: %v %v", ns, resp, err)
				}
				resp.Body.Close()
			}
			for _, tc := range []struct {
				grants []string
				want   string
			}{
				{[]string{"*"}, "etl-a,etl-b,team-x"},
				{[]string{"etl-*", "quiet"}, "etl-a,etl-b,quiet"},
				{[]string{"other"}, "other"},
			} {
				resp, body := get(t, gw.URL+"/ui/api/namespaces", http.Header{"Authorization": {"Bearer " + token(t, "v", tc.grants...)}})
				var got struct{ Namespaces []string }
				if err := json.Unmarshal(body, &got); err != nil || resp.StatusCode != http.StatusOK {
					t.Fatalf("grants %q: got %d %s", tc.grants, resp.StatusCode, body)
				}
				if strings.Join(got.Namespaces, ",") != tc.want {
					t.Errorf("grants %q: got %q, want %s", tc.grants, got.Namespaces, tc.want)
				}
			}
			if resp, _ := get(t, gw.URL+"/ui/api/namespaces", nil); resp.StatusCode != http.StatusUnauthorized {
				t.Errorf("without a token: got %d, want 401", resp.StatusCode)
			}
			for path, status := range map[string]int{
				"/ui/api/contention?namespace=etl-a":  http.StatusForbidden,
				"/ui/api/contention?namespace=Bad%2F": http.StatusBadRequest,
				"/ui/api/contention?namespace=other":  http.StatusOK,
			} {
				resp, body := get(t, gw.URL+path, http.Header{"Authorization": {"Bearer " + token(t, "v", "other")}})
				if resp.StatusCode != status {
					t.Errorf("GET %s: got %d %s, want %d", path, resp.StatusCode, body, status)
				}
			}
		})
	}
}
