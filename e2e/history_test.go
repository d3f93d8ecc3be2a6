package e2e

import (
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestLockHistory: GET .../history shows the last events of a lock, newest
// first, for each way a lease ends (released, handed over to a waiter,
// expired), with who and which fencing token, and never a token; with
// --history 0 it keeps none.
func TestLockHistory(t *testing.T) {
	t.Parallel()
	type event struct {
		Event        string    `json:"event"`
		At           time.Time `json:"at"`
		Subject      string    `json:"subject"`
		Owner        string    `json:"owner"`
		FencingToken int64     `json:"fencing_token"`
	}
	type history struct {
		Lock   string  `json:"lock"`
		Limit  int     `json:"limit"`
		Events []event `json:"events"`
	}
	eachBackend(t, func(t *testing.T, b backend) {
		gw := startGateway(t, append(b.args(t), "--history", "5")...)
		auth := bearer(token(t, nil))
		url := gw.URL + "/locks/hist/x"
		get := func() (history, string) {
			t.Helper()
			r := call(t, "GET", url+"/history", "", auth...)
			var h history
			wantJSON(t, r, http.StatusOK, &h)
			var ks []string
			for _, e := range h.Events {
				ks = append(ks, e.Event)
			}
			return h, strings.Join(ks, ",")
		}
		if h, got := get(); got != "" || h.Limit != 5 || h.Lock != "hist/x" {
			t.Fatalf("a lock never taken: got %+v", h)
		}

		g := acquire(t, url, `{"ttl_ms":60000,"owner":"first"}`)
		waiter := callAsync(t, "POST", url, `{"ttl_ms":100,"wait_ms":30000,"owner":"second"}`, auth...)
		waitForQueued(t, url, 1)
		call(t, "DELETE", url, "", with(auth, []string{"Lock-Token", g.Token})...)
		var w grant
		wantJSON(t, <-waiter, http.StatusCreated, &w)
		waitFree(t, url, auth) // the second's 100 ms lease ends unreleased

		h, got := get()
		if got != "expired,handed_over,released,acquired" {
			t.Fatalf("got %q, want expired,handed_over,released,acquired", got)
		}
		if e := h.Events[0]; e.Owner != "second" || e.FencingToken != w.FencingToken || e.At.Before(w.ExpiresAt.Add(-time.Second)) {
			t.Fatalf("expired: %+v, want the second grant (%d) at its lease's end %v", e, w.FencingToken, w.ExpiresAt)
		}
		if e := h.Events[2]; e.Owner != "first" || e.FencingToken != g.FencingToken || e.Subject == "" {
			t.Fatalf("released: %+v, want the first grant (%d)", e, g.FencingToken)
		}
		r := call(t, "GET", url+"/history", "", auth...)
		if strings.Contains(string(r.body), g.Token) || strings.Contains(string(r.body), w.Token) {
			t.Fatalf("the history shows a token: %s", r.body)
		}

		off := startGateway(t, append(b.args(t), "--history", "0")...)
		ourl := off.URL + "/locks/hist/y"
		acquire(t, ourl, `{"ttl_ms":60000}`)
		var hoff history
		wantJSON(t, call(t, "GET", ourl+"/history", "", auth...), http.StatusOK, &hoff)
		if hoff.Limit != 0 || len(hoff.Events) != 0 {
			t.Fatalf("--history 0: got %+v, want no events", hoff)
		}
	})
}
