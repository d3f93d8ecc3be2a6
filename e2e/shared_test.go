package e2e

import (
	"net/http"
	"testing"
)

// TestSharedLocks: shared grants coexist and exclude an exclusive one; GET
// lists them; a shared request does not jump a waiting exclusive one; a
// shared holder cannot upgrade with its token; the exclusive waiter gets
// the lock when the last shared holder leaves; a mode the API does not
// know is a 400.
func TestSharedLocks(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, b backend) {
		gw := startGateway(t, b.args(t)...)
		auth := bearer(token(t, nil))
		url := gw.URL + "/locks/shared/config"

		r1 := acquire(t, url, `{"ttl_ms":60000,"mode":"shared","owner":"r1"}`)
		r2 := acquire(t, url, `{"ttl_ms":90000,"mode":"shared","owner":"r2"}`)
		if r1.Mode != "shared" || r2.Mode != "shared" || r1.Token == r2.Token || r2.FencingToken <= r1.FencingToken {
			t.Fatalf("got %+v and %+v; want two shared grants, own tokens, increasing fences", r1, r2)
		}
		p := wantProblem(t, call(t, "POST", url, `{"ttl_ms":60000}`, auth...), http.StatusConflict, "lock_held")
		if p.RetryAfterMs == nil || *p.RetryAfterMs < 60000 {
			t.Fatalf("exclusive beside shared holders: retry_after_ms %v, want the later shared lease (about 90 s)", p.RetryAfterMs)
		}

		var info struct {
			Mode         string `json:"mode"`
			FencingToken int64  `json:"fencing_token"`
			Owner        string `json:"owner"`
			Holders      []struct {
				Owner        string `json:"owner"`
				FencingToken int64  `json:"fencing_token"`
				TTLMs        int64  `json:"ttl_ms"`
				Holds        int    `json:"holds"`
			} `json:"holders"`
		}
		wantJSON(t, call(t, "GET", url, "", auth...), http.StatusOK, &info)
		if info.Mode != "shared" || len(info.Holders) != 2 || info.Holders[0].Owner != "r1" || info.Holders[1].Owner != "r2" ||
			info.Owner != "r2" || info.FencingToken != r2.FencingToken || info.Holders[1].Holds != 1 {
			t.Fatalf("inspect: got %+v; want both shared holders, soonest first, described by r2", info)
		}

		writer := callAsync(t, "POST", url, `{"ttl_ms":60000,"wait_ms":30000,"owner":"w"}`, auth...)
		waitForQueued(t, url, 1)
		wantProblem(t, call(t, "POST", url, `{"mode":"shared"}`, auth...), http.StatusConflict, "lock_held")
		wantProblem(t, call(t, "POST", url, `{"mode":"exclusive"}`, with(auth, []string{"Lock-Token", r1.Token})...),
			http.StatusConflict, "lock_held") // no upgrade

		var again grant
		wantJSON(t, call(t, "POST", url, `{"mode":"shared"}`, with(auth, []string{"Lock-Token", r1.Token})...), http.StatusOK, &again)
		if again.Holds != 2 || again.Mode != "shared" || again.FencingToken != r1.FencingToken {
			t.Fatalf("shared re-entry: got %+v, want 2 shared holds with r1's fence", again)
		}
		for _, rel := range []struct {
			g      grant
			hold   string
			status int
		}{{r1, "=", http.StatusOK}, {r1, again.Hold, http.StatusNoContent}, {r2, "=", http.StatusNoContent}} {
			if r := call(t, "DELETE", url+"?hold="+rel.hold, "", with(auth, []string{"Lock-Token", rel.g.Token})...); r.status != rel.status {
				t.Fatalf("release: got %d %s, want %d", r.status, r.body, rel.status)
			}
		}
		var w grant
		wantJSON(t, <-writer, http.StatusCreated, &w)
		if w.Mode != "exclusive" || w.FencingToken <= r2.FencingToken {
			t.Fatalf("writer: got %+v, want the exclusive lock with a larger fence", w)
		}

		p = wantProblem(t, call(t, "POST", url, `{"mode":"read"}`, auth...), http.StatusBadRequest, "invalid_request")
		if p.Detail != `field "mode" must be one of exclusive, shared` {
			t.Fatalf("detail: got %q", p.Detail)
		}
	})
}
