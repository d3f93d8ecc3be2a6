package e2e

import (
	"net/http"
	"testing"
)

// TestRenewAfter: every grant and every renewed lease says when to renew,
// a third of the ttl_ms in the same answer, rounded down: the 201 of an
// acquire (lock and semaphore), the 200 of a re-entry and of a renew.
func TestRenewAfter(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, b backend) {
		gw := startGateway(t, b.args(t)...)
		auth := bearer(token(t, nil))
		type answer struct {
			Token        string `json:"token"`
			TTLMs        int64  `json:"ttl_ms"`
			RenewAfterMs *int64 `json:"renew_after_ms"`
		}
		check := func(t *testing.T, r response, status int) answer {
			t.Helper()
			var a answer
			wantJSON(t, r, status, &a)
			if a.RenewAfterMs == nil {
				t.Fatalf("no renew_after_ms: %s", r.body)
			}
			if *a.RenewAfterMs != a.TTLMs/3 {
				t.Fatalf("renew_after_ms: got %d with ttl_ms %d, want %d", *a.RenewAfterMs, a.TTLMs, a.TTLMs/3)
			}
			return a
		}
		for name, tc := range map[string]struct {
			body string
			want int64
		}{
			"default-ttl":  {"", 10000},
			"30s":          {`{"ttl_ms":30000}`, 10000},
			"rounded-down": {`{"ttl_ms":1000}`, 333},
			"under-3ms":    {`{"ttl_ms":2}`, 0},
			"an-hour":      {`{"ttl_ms":3600000}`, 1200000},
		} {
			t.Run(name, func(t *testing.T) {
				a := check(t, call(t, "POST", gw.URL+"/locks/renew-after/"+name, tc.body, auth...), http.StatusCreated)
				if *a.RenewAfterMs != tc.want {
					t.Fatalf("renew_after_ms: got %d, want %d", *a.RenewAfterMs, tc.want)
				}
			})
		}

		lock := gw.URL + "/locks/renew-after/lock"
		g := check(t, call(t, "POST", lock, `{"ttl_ms":30000}`, auth...), http.StatusCreated)
		withToken := with(auth, []string{"Lock-Token", g.Token})
		check(t, call(t, "POST", lock, `{"ttl_ms":60000}`, withToken...), http.StatusOK) // re-entry
		if a := check(t, call(t, "PUT", lock+"/lease", `{"ttl_ms":9000}`, withToken...), http.StatusOK); *a.RenewAfterMs != 3000 {
			t.Fatalf("renew to 9 s: renew_after_ms %d, want 3000", *a.RenewAfterMs)
		}
		check(t, call(t, "PUT", lock+"/lease", "", withToken...), http.StatusOK)

		sem := gw.URL + "/semaphores/renew-after/sem"
		p := check(t, call(t, "POST", sem, `{"limit":2,"ttl_ms":45000}`, auth...), http.StatusCreated)
		if *p.RenewAfterMs != 15000 {
			t.Fatalf("permit of 45 s: renew_after_ms %d, want 15000", *p.RenewAfterMs)
		}
		if a := check(t, call(t, "PUT", sem+"/lease", `{"ttl_ms":4}`, with(auth, []string{"Lock-Token", p.Token})...), http.StatusOK); *a.RenewAfterMs != 1 {
			t.Fatalf("permit renewed to 4 ms: renew_after_ms %d, want 1", *a.RenewAfterMs)
		}
	})
}
