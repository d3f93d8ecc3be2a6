package e2e

import (
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestMaxHoldHandsOn is the acceptance of #39's hard cap, through a real
// gateway on each backend: a holder with max_hold_ms 2000 that renews
// every 500 ms keeps a waiter out only until its cap. The holder renews
// until it is refused; no renewal answers a lease past acquired_at + 2000
// ms (as GET states acquired_at), each says hold_until, and the waiter's
// grant comes by the hand-off; the history says max_hold.
func TestMaxHoldHandsOn(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, b backend) {
		gw := startGateway(t, append(b.args(t), "--history", "10")...)
		auth := bearer(token(t, nil))
		url := gw.URL + "/locks/maxhold/job"
		holder := acquire(t, url, `{"ttl_ms":1000,"max_hold_ms":2000,"owner":"holder"}`)
		var info struct {
			AcquiredAt time.Time `json:"acquired_at"`
			HoldUntil  time.Time `json:"hold_until"`
		}
		wantJSON(t, call(t, "GET", url, "", auth...), http.StatusOK, &info)
		limit := info.AcquiredAt.Add(2000 * time.Millisecond)
		if info.HoldUntil.IsZero() || info.HoldUntil.After(limit) {
			t.Fatalf("GET: hold_until %v, want it set, no later than acquired_at + 2000 ms (%v)", info.HoldUntil, limit)
		}
		waiter := callAsync(t, "POST", url, `{"ttl_ms":1000,"wait_ms":30000,"owner":"waiter"}`, auth...)
		waitForQueued(t, url, 1)

		withToken := with(auth, []string{"Lock-Token", holder.Token})
		renewals := 0
		for ; ; renewals++ {
			r := call(t, "PUT", url+"/lease", `{"ttl_ms":1000}`, withToken...)
			if r.status == http.StatusConflict {
				if !strings.Contains(string(r.body), `"reason":"expired"`) {
					t.Fatalf("renewal %d refused: %s, want not_holder, reason expired", renewals, r.body)
				}
				break // the cap ended the grant
			}
			var lease struct {
				grant
				HoldUntil time.Time `json:"hold_until"`
			}
			wantJSON(t, r, http.StatusOK, &lease)
			if lease.HoldUntil.IsZero() || lease.HoldUntil.After(limit) || lease.ExpiresAt.After(lease.HoldUntil) {
				t.Fatalf("renewal %d: expires_at %v, hold_until %v; want both set, no later than acquired_at + 2000 ms (%v)",
					renewals, lease.ExpiresAt, lease.HoldUntil, limit)
			}
			if renewals > 1000 {
				t.Fatal("renewed 1000 times: the cap never ended the grant")
			}
			time.Sleep(500 * time.Millisecond) // the holder's renewal pace, as #39 says, not synchronisation
		}
		if renewals == 0 {
			t.Fatal("the first renewal was refused: want the holder to renew up to its cap")
		}
		var w grant
		wantJSON(t, <-waiter, http.StatusCreated, &w)
		if w.FencingToken <= holder.FencingToken {
			t.Fatalf("the waiter's fencing token %d, want past the holder's %d", w.FencingToken, holder.FencingToken)
		}
		var h struct {
			Events []struct {
				Event        string `json:"event"`
				FencingToken int64  `json:"fencing_token"`
			} `json:"events"`
		}
		wantJSON(t, call(t, "GET", url+"/history", "", auth...), http.StatusOK, &h)
		var kinds []string
		found := false
		for _, e := range h.Events {
			kinds = append(kinds, e.Event)
			found = found || e.Event == "max_hold" && e.FencingToken == holder.FencingToken
		}
		if !found {
			t.Fatalf("history %s: want the holder's grant (%d) to end max_hold", strings.Join(kinds, ","), holder.FencingToken)
		}
		call(t, "DELETE", url, "", with(auth, []string{"Lock-Token", w.Token})...)
	})
}

// TestMaxHoldGatewayBound: --max-hold caps every lock's grant, and refuses
// a max_hold_ms past it with a problem naming the flag.
func TestMaxHoldGatewayBound(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, b backend) {
		gw := startGateway(t, append(b.args(t), "--max-hold", "1s")...)
		auth := bearer(token(t, nil))
		url := gw.URL + "/locks/maxhold/bound"
		r := call(t, "POST", url, `{"ttl_ms":500,"max_hold_ms":1001}`, auth...)
		if r.status != http.StatusBadRequest || !strings.Contains(string(r.body), "--max-hold") {
			t.Fatalf("max_hold_ms past --max-hold: %d %s, want 400 naming the flag", r.status, r.body)
		}
		// A lease as long as the bound allows: the renewal must come
		// within it, however busy the machine.
		g := acquire(t, url, `{"ttl_ms":1000}`)
		var lease struct {
			HoldUntil time.Time `json:"hold_until"`
		}
		wantJSON(t, call(t, "PUT", url+"/lease", `{"ttl_ms":60000}`, with(auth, []string{"Lock-Token", g.Token})...), http.StatusOK, &lease)
		if lease.HoldUntil.IsZero() {
			t.Fatal("a grant under --max-hold: renewal without hold_until")
		}
		waitFree(t, url, auth)
	})
}
