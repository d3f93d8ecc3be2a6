package main

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestNoRedirectToAnotherOrigin: a gateway URL that redirects elsewhere
// never gets lockctl to send the JWT or the owner token there. Go's client
// drops Authorization on a redirect to another host, but forwards custom
// headers such as Lock-Token.
func TestNoRedirectToAnotherOrigin(t *testing.T) {
	var mu sync.Mutex
	var seen []string
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen = append(seen, r.Method+" "+r.URL.Path+" Lock-Token="+r.Header.Get("Lock-Token")+" Authorization="+r.Header.Get("Authorization"))
		mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
	}))
	defer other.Close()
	redirector := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, other.URL+r.URL.Path, http.StatusTemporaryRedirect)
	}))
	defer redirector.Close()

	for name, args := range map[string][]string{
		"release": {"release", "a/b", "--token", "owner-token-secret"},
		"renew":   {"renew", "a/b", "--token", "owner-token-secret"},
		"status":  {"status", "a/b"},
	} {
		t.Run(name, func(t *testing.T) {
			r := lockctl(t, nil, map[string]string{"LOCKGATE_URL": redirector.URL}, args...)
			if r.code == exitOK {
				t.Fatalf("exit 0 after a redirect to another origin; stderr %s", r.stderr)
			}
			if !strings.Contains(r.stderr, "redirect") {
				t.Errorf("stderr %q does not say a redirect was refused", r.stderr)
			}
			mu.Lock()
			defer mu.Unlock()
			if len(seen) > 0 {
				t.Fatalf("the other origin got %q", seen)
			}
		})
	}
}

// TestStatusEscapesControlCharacters: a subject or owner label with
// terminal escapes or newlines reaches the terminal escaped.
func TestStatusEscapesControlCharacters(t *testing.T) {
	hostile := "\x1b]0;pwned\x07\x1b[2J\nfake line\r\u202e"
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(map[string]any{
			"lock": "a/b", "held": true, "fencing_token": 7, "ttl_ms": 1000,
			"expires_at": "2030-01-01T00:00:00Z", "acquired_at": "2030-01-01T00:00:00Z",
			"subject": "sub" + hostile, "owner": "own" + hostile,
		})
	}))
	defer srv.Close()
	r := lockctl(t, nil, map[string]string{"LOCKGATE_URL": srv.URL}, "status", "a/b").want(t, exitOK)
	if strings.ContainsAny(r.stdout, "\x1b\x07\r\u202e") || strings.Count(r.stdout, "\n") != 1 {
		t.Fatalf("status printed control characters raw: %q", r.stdout)
	}
	if !strings.Contains(r.stdout, "fake line") {
		t.Fatalf("status dropped the text around them: %q", r.stdout)
	}
}

// TestProblemDetailEscaped: a problem's detail, from whatever answers at
// the URL, reaches stderr escaped too.
func TestProblemDetailEscaped(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/problem+json")
		w.WriteHeader(http.StatusBadRequest)
		json.NewEncoder(w).Encode(map[string]any{"code": "invalid_request\x1b[31m", "detail": "bad\x1b]0;x\x07\nlockctl: fake"})
	}))
	defer srv.Close()
	r := lockctl(t, nil, map[string]string{"LOCKGATE_URL": srv.URL}, "status", "a/b")
	if strings.ContainsAny(r.stderr, "\x1b\x07") || strings.Contains(r.stderr, "\nlockctl: fake") {
		t.Fatalf("stderr carries control characters raw: %q", r.stderr)
	}
}

// TestRunRenewsWhenTold: run renews when the gateway's renew_after_ms
// says, not at a third of the TTL it computes itself.
func TestRunRenewsWhenTold(t *testing.T) {
	var mu sync.Mutex
	renews := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		body := map[string]any{"lock": "a/b", "fencing_token": 7, "ttl_ms": 60000, "renew_after_ms": 50, "expires_at": "2030-01-01T00:00:00Z"}
		switch r.Method {
		case http.MethodPost:
			body["token"] = "owner-token"
			w.WriteHeader(http.StatusCreated)
		case http.MethodPut:
			mu.Lock()
			renews++
			mu.Unlock()
		case http.MethodDelete:
			w.WriteHeader(http.StatusNoContent)
			return
		}
		json.NewEncoder(w).Encode(body)
	}))
	defer srv.Close()
	stop := filepath.Join(t.TempDir(), "stop")
	done := lockctlAsync(t, nil, map[string]string{"LOCKGATE_URL": srv.URL}, "run", "a/b", "--ttl", "60s", "--",
		"sh", "-c", `while [ ! -e `+shq(stop)+` ]; do sleep 0.05; done`)
	// A third of the TTL is 20 s: 3 renewals within 15 s come from renew_after_ms alone.
	deadline := time.Now().Add(15 * time.Second)
	for {
		mu.Lock()
		n := renews
		mu.Unlock()
		if n >= 3 {
			break
		}
		if time.Now().After(deadline) {
			touch(t, stop)
			<-done
			t.Fatalf("renewals within 15 s with renew_after_ms 50: got %d, want at least 3", n)
		}
		time.Sleep(10 * time.Millisecond) // poll interval, not synchronisation
	}
	touch(t, stop)
	waitRun(t, done).want(t, exitOK)
}

// TestRunRefusesUnexpectedHolds: lockctl run compares the holds a gateway
// answers with what it expects. A new grant said to have 2 holds, or a
// re-entry that names no hold of its own, runs no command: lockctl would
// otherwise end holds that are not its own.
func TestRunRefusesUnexpectedHolds(t *testing.T) {
	for name, tc := range map[string]struct {
		status int
		body   string
		env    map[string]string
	}{
		"a new grant with 2 holds": {http.StatusCreated,
			`{"lock":"a/b","token":"tok","fencing_token":7,"ttl_ms":60000,"expires_at":"2030-01-01T00:00:00Z","holds":2}`, nil},
		"a re-entry without a hold id": {http.StatusOK,
			`{"lock":"a/b","token":"outer","fencing_token":7,"ttl_ms":60000,"expires_at":"2030-01-01T00:00:00Z","holds":2}`,
			map[string]string{"LOCKGATE_LOCK": "a/b", "LOCKGATE_LOCK_TOKEN": "outer"}},
	} {
		t.Run(name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.Method == http.MethodDelete {
					w.WriteHeader(http.StatusNoContent)
					return
				}
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(tc.status)
				w.Write([]byte(tc.body))
			}))
			defer srv.Close()
			marker := filepath.Join(t.TempDir(), "ran")
			env := map[string]string{"LOCKGATE_URL": srv.URL}
			for k, v := range tc.env {
				env[k] = v
			}
			r := lockctl(t, nil, env, "run", "a/b", "--", "touch", marker)
			if r.code == exitOK || !strings.Contains(r.stderr, "holds") {
				t.Fatalf("exit %d, stderr %q; want a failure that names the holds", r.code, r.stderr)
			}
			if _, err := os.Stat(marker); err == nil {
				t.Fatal("the command ran")
			}
		})
	}
}
