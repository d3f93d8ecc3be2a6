package e2e

import (
	"encoding/json"
	"net/http"
	"testing"
	"time"
)

// TestMinHoldUntil: through a real gateway on each backend, an acquire
// refused by a released grant's min hold states its end as a field of the
// 409's problem, min_hold_until, the one the 404 of GET states (the Redis
// backend reads the 409's as its clock plus what is left of the kept
// name: a millisecond apart).
func TestMinHoldUntil(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, b backend) {
		gw := startGateway(t, b.args(t)...)
		auth := bearer(token(t, nil))
		url := gw.URL + "/locks/minhold/until"
		g := acquire(t, url, `{"ttl_ms":60000,"min_hold_ms":600000}`)
		if r := call(t, "DELETE", url, "", with(auth, []string{"Lock-Token", g.Token})...); r.status != http.StatusNoContent {
			t.Fatalf("release: %d %s", r.status, r.body)
		}
		type problem struct {
			Code         string     `json:"code"`
			RetryAfterMs int64      `json:"retry_after_ms"`
			MinHoldUntil *time.Time `json:"min_hold_until"`
		}
		read := func(r response, status int) problem {
			t.Helper()
			var p problem
			if err := json.Unmarshal(r.body, &p); err != nil || r.status != status || p.MinHoldUntil == nil {
				t.Fatalf("got %d %s (%v), want %d with min_hold_until", r.status, r.body, err, status)
			}
			return p
		}
		held := read(call(t, "POST", url, `{"ttl_ms":60000}`, auth...), http.StatusConflict)
		free := read(call(t, "GET", url, "", auth...), http.StatusNotFound)
		if held.Code != "lock_held" || free.Code != "not_held" {
			t.Fatalf("codes %q and %q, want lock_held and not_held", held.Code, free.Code)
		}
		if d := held.MinHoldUntil.Sub(*free.MinHoldUntil); d < -10*time.Millisecond || d > 10*time.Millisecond {
			t.Fatalf("409's min_hold_until %v, want the 404's, %v", held.MinHoldUntil, free.MinHoldUntil)
		}
		if left := time.Until(*held.MinHoldUntil); left < 9*time.Minute || left > 10*time.Minute+time.Second {
			t.Fatalf("min_hold_until %v, %v from now; want about 10 minutes", held.MinHoldUntil, left)
		}
	})
}
