package e2e

import (
	"net/http"
	"strconv"
	"testing"
	"time"
)

// indexOf reads an answer's Lockgate-Index, failing the test when it has
// none.
func indexOf(t *testing.T, r response, what string) int64 {
	t.Helper()
	i, err := strconv.ParseInt(r.header.Get("Lockgate-Index"), 10, 64)
	if err != nil {
		t.Fatalf("%s: got %d with Lockgate-Index %q, want a number", what, r.status, r.header.Get("Lockgate-Index"))
	}
	return i
}

// TestPlainGetIndex: a plain GET of a lock answers its index in
// Lockgate-Index, held (200) or free (404), and a long-poll from that
// index waits, and answers at the next change, with it (#39). A lease that
// ended with nothing run on the lock since counts as ended. Without a
// history (--history 0) the index is 0.
func TestPlainGetIndex(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, b backend) {
		gw := startGateway(t, append(b.args(t), "--history", "10")...)
		auth := bearer(token(t, nil))
		url := gw.URL + "/locks/getindex/job"

		r := call(t, "GET", url, "", auth...)
		wantProblem(t, r, http.StatusNotFound, "not_held")
		if i := indexOf(t, r, "a lock never taken"); i != 0 {
			t.Fatalf("a lock never taken: got Lockgate-Index %d, want 0", i)
		}

		g := acquire(t, url, `{"ttl_ms":60000,"owner":"holder"}`)
		r = call(t, "GET", url, "", auth...)
		var info struct {
			FencingToken int64 `json:"fencing_token"`
		}
		wantJSON(t, r, http.StatusOK, &info)
		held := indexOf(t, r, "a held lock")
		if held < time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC).UnixMicro() || info.FencingToken != g.FencingToken {
			t.Fatalf("a held lock: got Lockgate-Index %d, fencing token %d; want an index from the clock, fencing token %d", held, info.FencingToken, g.FencingToken)
		}
		from := func(i int64, wait string) string {
			return url + "?index=" + strconv.FormatInt(i, 10) + "&wait=" + wait
		}
		// Nothing changed: the long-poll waits its wait out, and answers
		// the same index.
		r = call(t, "GET", from(held, "200ms"), "", auth...)
		if r.status != http.StatusOK || indexOf(t, r, "a long-poll with no change") != held {
			t.Fatalf("a long-poll from the GET's index, no change: got %d, Lockgate-Index %q; want 200, %d", r.status, r.header.Get("Lockgate-Index"), held)
		}
		// Another caller changes the lock: the long-poll answers with it.
		polled := callAsync(t, "GET", from(held, "30s"), "", auth...)
		call(t, "DELETE", url, "", with(auth, []string{"Lock-Token", g.Token})...)
		r = <-polled
		wantProblem(t, r, http.StatusNotFound, "not_held")
		if i := indexOf(t, r, "a long-poll across a release"); i != held+1 {
			t.Fatalf("a long-poll from the GET's index across a release: got Lockgate-Index %d, want %d", i, held+1)
		}
		r = call(t, "GET", url, "", auth...)
		wantProblem(t, r, http.StatusNotFound, "not_held")
		if i := indexOf(t, r, "a released lock"); i != held+1 {
			t.Fatalf("a released lock: got Lockgate-Index %d, want %d", i, held+1)
		}

		// A lease that ends unreleased: the GET that finds it ended
		// answers the expiry's index, and a long-poll from it waits. (A
		// lock of its own: on Redis, a gateway that watched the lock
		// before may not have read the expiry yet when the GET answers,
		// and a long-poll from an index ahead of the gateway's answers
		// at once.)
		url = gw.URL + "/locks/getindex/expiring"
		g = acquire(t, url, `{"ttl_ms":200,"owner":"holder"}`)
		deadline := time.Now().Add(30 * time.Second)
		for r = call(t, "GET", url, "", auth...); r.status == http.StatusOK; r = call(t, "GET", url, "", auth...) {
			if time.Now().After(deadline) {
				t.Fatal("a lease of 200ms: the lock still held 30s on")
			}
			time.Sleep(5 * time.Millisecond) // polling for the lease's end, not synchronising
		}
		wantProblem(t, r, http.StatusNotFound, "not_held")
		expired := indexOf(t, r, "an expired lease")
		if expired <= g.FencingToken {
			// The lock's first event is numbered from the clock, as its
			// first fencing token is: the expiry comes after.
			t.Fatalf("after a lease ended unreleased: got Lockgate-Index %d, want above the acquire's fencing token %d", expired, g.FencingToken)
		}
		r = call(t, "GET", from(expired, "200ms"), "", auth...)
		if r.status != http.StatusNotFound || indexOf(t, r, "a long-poll after an expiry") != expired {
			t.Fatalf("a long-poll from the expiry's index: got %d, Lockgate-Index %q; want 404, %d", r.status, r.header.Get("Lockgate-Index"), expired)
		}

		// No history, no index: 0, held or free.
		off := startGateway(t, append(b.args(t), "--history", "0")...)
		url = off.URL + "/locks/getindex/off"
		r = call(t, "GET", url, "", auth...)
		wantProblem(t, r, http.StatusNotFound, "not_held")
		if i := indexOf(t, r, "--history 0, free"); i != 0 {
			t.Fatalf("--history 0, free: got Lockgate-Index %d, want 0", i)
		}
		acquire(t, url, `{"ttl_ms":60000}`)
		if r = call(t, "GET", url, "", auth...); r.status != http.StatusOK || indexOf(t, r, "--history 0, held") != 0 {
			t.Fatalf("--history 0, held: got %d, Lockgate-Index %q; want 200, 0", r.status, r.header.Get("Lockgate-Index"))
		}
	})
}
