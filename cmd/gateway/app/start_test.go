package app

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
)

var startArgs = []string{"gateway", "--addr", "127.0.0.1:0"}

func startEnv(k string) string {
	return map[string]string{"LOCKGATE_JWT_SECRET": "start-test-secret-at-least-32-bytes"}[k]
}

func TestStartServesUntilStop(t *testing.T) {
	g, err := Start(t.Context(), startArgs, startEnv, io.Discard)
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	resp, err := http.Get(g.URL + "/healthz")
	if err != nil {
		t.Fatalf("GET /healthz: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /healthz: got %d, want 200", resp.StatusCode)
	}
	for range 2 {
		if err := g.Stop(); err != nil {
			t.Fatalf("Stop: got %v, want nil", err)
		}
	}
	if _, err := http.Get(g.URL + "/healthz"); err == nil {
		t.Fatal("GET /healthz after Stop: got an answer, want an error")
	}
}

func TestStartReportsWhyRunExited(t *testing.T) {
	_, err := Start(t.Context(), startArgs, func(string) string { return "" }, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "no JWT key configured") {
		t.Fatalf("got %v, want an error saying no JWT key is configured", err)
	}
}

func TestStartGivesUpWhenCtxEnds(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := Start(ctx, startArgs, startEnv, io.Discard); !errors.Is(err, context.Canceled) {
		t.Fatalf("got %v, want context.Canceled", err)
	}
}

func TestWaitListening(t *testing.T) {
	for name, tc := range map[string]struct {
		stdout, want string
		wantErr      bool
	}{
		"listens":      {"hello\n" + ListeningPrefix + "http://127.0.0.1:1\nmore\n", "http://127.0.0.1:1", false},
		"exits before": {"hello\n", "", true},
	} {
		t.Run(name, func(t *testing.T) {
			got, err := WaitListening(strings.NewReader(tc.stdout))
			if got != tc.want || (err != nil) != tc.wantErr {
				t.Fatalf("got %q, %v; want %q, error %t", got, err, tc.want, tc.wantErr)
			}
		})
	}
}
