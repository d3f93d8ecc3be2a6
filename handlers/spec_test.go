package handlers_test

import (
	"bytes"
	"io"
	"net/http"
	"os"
	"testing"
	"time"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/golang-jwt/jwt/v5"

	"github.com/lockgate/lockgate"
	"github.com/lockgate/lockgate/internal/contract"
	"github.com/lockgate/lockgate/internal/gatewaytest"
)

// TestServedSpecIsTheFile: GET /openapi.yaml answers the repository's
// openapi.yaml byte for byte, so that clients generated from it get the
// same operation names as examples/node.
func TestServedSpecIsTheFile(t *testing.T) {
	want, err := os.ReadFile("../openapi.yaml")
	if err != nil {
		t.Fatal(err)
	}
	gw := gatewaytest.Start(t, map[string]string{"LOCKGATE_JWT_SECRET": "spec-test-secret-at-least-32-bytes-long"})
	resp, err := http.Get(gw.URL + "/openapi.yaml")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	got, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status: got %d, want 200", resp.StatusCode)
	}
	if !bytes.Equal(got, want) {
		i := 0
		for i < len(got) && i < len(want) && got[i] == want[i] {
			i++
		}
		t.Fatalf("served spec differs from openapi.yaml at byte %d of %d: got %q, want %q",
			i, len(want), excerpt(got, i), excerpt(want, i))
	}
	if ct := resp.Header.Get("Content-Type"); ct != "application/yaml" {
		t.Errorf("Content-Type: got %q, want application/yaml", ct)
	}
}

func excerpt(b []byte, i int) []byte { return b[max(i-20, 0):min(i+40, len(b))] }

// TestWhoAmIAnswersAsSpecified: GET /ui/api/whoami, which openapi.yaml
// describes but the dashboard's routes serve rather than the generated
// server, answers what the spec says it does: a WhoAmI to a bearer, a 401
// problem without one, and without --ui the 404 of any unknown path.
func TestWhoAmIAnswersAsSpecified(t *testing.T) {
	const secret = "spec-test-secret-at-least-32-bytes-long"
	const path = "/ui/api/whoami"
	// The file, not GetSpec's: oapi-codegen leaves the operation out of
	// the spec it embeds, as out of the server it generates. contract.Check
	// passes a path the spec does not route, so the test checks it does.
	spec, err := openapi3.NewLoader().LoadFromData(lockgate.OpenAPI)
	if err != nil {
		t.Fatal(err)
	}
	if item := spec.Paths.Find(path); item == nil || item.Get == nil {
		t.Fatalf("openapi.yaml has no GET %s", path)
	}
	tok, err := jwt.NewWithClaims(jwt.SigningMethodHS256, jwt.MapClaims{
		"sub": "viewer", "ns": []string{"team-a", "etl-*"}, "exp": time.Now().Add(time.Hour).Unix(),
	}).SignedString([]byte(secret))
	if err != nil {
		t.Fatal(err)
	}
	env := map[string]string{"LOCKGATE_JWT_SECRET": secret}
	withUI, withoutUI := gatewaytest.Start(t, env, "--ui"), gatewaytest.Start(t, env)
	for _, tc := range []struct {
		name   string
		url    string
		bearer string
		status int
	}{
		{"a bearer", withUI.URL, tok, http.StatusOK},
		{"no token", withUI.URL, "", http.StatusUnauthorized},
		{"no --ui", withoutUI.URL, tok, http.StatusNotFound},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, tc.url+path, nil)
			if err != nil {
				t.Fatal(err)
			}
			if tc.bearer != "" {
				req.Header.Set("Authorization", "Bearer "+tc.bearer)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			if err != nil {
				t.Fatal(err)
			}
			if resp.StatusCode != tc.status {
				t.Fatalf("status: got %d, want %d: %s", resp.StatusCode, tc.status, body)
			}
			if err := contract.Check(t.Context(), req, resp.StatusCode, resp.Header, body); err != nil {
				t.Fatal(err)
			}
		})
	}
}
