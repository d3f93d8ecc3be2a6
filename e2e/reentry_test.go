package e2e

import (
	"net/http"
	"strings"
	"testing"
)

// TestReentrantHolds: a POST with the holder's Lock-Token re-enters its
// grant (200, same token and fence, holds counted, the lease never
// shortened); each DELETE takes one hold away (200 with what is left), the
// last one frees the lock (204) and hands it to the waiter; a Lock-Token
// that does not hold the lock is 409 not_holder and acquires nothing.
func TestReentrantHolds(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, b backend) {
		gw := startGateway(t, b.args(t)...)
		auth := bearer(token(t, nil))
		url := gw.URL + "/locks/reentry/x"
		g := acquire(t, url, `{"ttl_ms":60000}`)
		if g.Holds != 1 {
			t.Fatalf("a new grant: got holds %d, want 1", g.Holds)
		}

		var r grant
		wantJSON(t, call(t, "POST", url, `{"ttl_ms":1000}`, with(auth, []string{"Lock-Token", g.Token})...), http.StatusOK, &r)
		if r.Holds != 2 || r.Token != g.Token || r.FencingToken != g.FencingToken || r.TTLMs < 50000 || r.Hold == "" {
			t.Fatalf("re-entry: got %+v, want 2 holds, the same token and fence, the 60 s lease kept, a hold id", r)
		}
		var info struct {
			Holds   int `json:"holds"`
			Holders []struct {
				HoldIDs []string `json:"hold_ids"`
			} `json:"holders"`
		}
		wantJSON(t, call(t, "GET", url, "", auth...), http.StatusOK, &info)
		if info.Holds != 2 || len(info.Holders) != 1 || strings.Join(info.Holders[0].HoldIDs, " ") != "= "+r.Hold {
			t.Fatalf("inspect: got %+v, want 2 holds, = and %s", info, r.Hold)
		}

		wantProblem(t, call(t, "POST", url, "", with(auth, []string{"Lock-Token", "not-the-holder"})...), http.StatusConflict, "not_holder")
		wantProblem(t, call(t, "POST", gw.URL+"/locks/reentry/free", "", with(auth, []string{"Lock-Token", g.Token})...), http.StatusConflict, "not_holder")
		wantProblem(t, call(t, "GET", gw.URL+"/locks/reentry/free", "", auth...), http.StatusNotFound, "not_held")

		waiter := callAsync(t, "POST", url, `{"wait_ms":30000}`, auth...)
		waitForWaiters(t, gw, 1)
		var left struct {
			Holds int `json:"holds"`
		}
		// The inner hold ends by its id; ending it again (a retried
		// DELETE) changes nothing.
		for range 2 {
			wantJSON(t, call(t, "DELETE", url+"?hold="+r.Hold, "", with(auth, []string{"Lock-Token", g.Token})...), http.StatusOK, &left)
			if left.Holds != 1 {
				t.Fatalf("inner release: got holds %d, want 1 left", left.Holds)
			}
		}
		wantProblem(t, call(t, "DELETE", url+"?hold=not%20an%20id", "", with(auth, []string{"Lock-Token", g.Token})...), http.StatusBadRequest, "invalid_request")
		if r := call(t, "DELETE", url, "", with(auth, []string{"Lock-Token", g.Token})...); r.status != http.StatusNoContent {
			t.Fatalf("last release: got %d %s, want 204", r.status, r.body)
		}
		var w grant
		wantJSON(t, <-waiter, http.StatusCreated, &w)
		if w.FencingToken <= g.FencingToken || w.Holds != 1 {
			t.Fatalf("waiter: got %+v, want the lock with a larger fence", w)
		}
	})
}
