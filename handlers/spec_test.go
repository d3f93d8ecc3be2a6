package handlers_test

import (
	"bytes"
	"io"
	"net/http"
	"os"
	"testing"

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
