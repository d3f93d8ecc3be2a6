package e2e

import (
	"net/http"
	"os"
	"testing"
	"time"

	"github.com/lockgate/lockgate/internal/redistest"
)

// serverlessBody is what the README's serverless recipe asks for: ten
// minutes of waiting, and a lease that outlasts the minute until the next
// invocation, since a grant handed to a ticket waits for its pick-up the
// shorter of its ttl_ms and the ticket liveness.
const serverlessBody = `{"wait_ms":600000,"ttl_ms":120000}`

// scheduleGap is how long a scheduler leaves between two invocations of
// the function the recipe is for.
const scheduleGap = time.Minute

// TestServerlessRecipeDefaults: the README's serverless recipe on a gateway
// with the default settings (Redis, a key, nothing else): a function opens a
// ticket and returns, is invoked again while the lock is still held, and
// again after its release; that invocation picks the grant up, writes with
// its fencing token and releases.
//
// A real minute between invocations is too slow for every CI run, so the
// gaps are short (LOCKGATE_E2E_REAL_GAP=1 makes them a minute and a bit),
// and after each the test checks what decides whether a minute would have
// been survived: the poll_within_ms the gateway states, and in Redis the
// ticket's alive time and the handed grant's expiry, which are what the
// ticket script compares with its clock. Each must leave a minute and a
// cold start's margin.
func TestServerlessRecipeDefaults(t *testing.T) {
	t.Parallel()
	rs := redistest.Start(t)
	gw := startGateway(t, "--redis-url", rs.URL())
	rdb := rs.Client(t)
	auth := bearer(token(t, nil))
	path := "/locks/serverless/report"
	gap := time.Second
	if os.Getenv("LOCKGATE_E2E_REAL_GAP") != "" {
		gap = scheduleGap + 5*time.Second
	}
	const margin = 20 * time.Second // a late invocation, a cold start
	// left is how long Redis keeps key's member (a sorted set's score in
	// ms, or the key's expiry) from now, on Redis's clock.
	left := func(t *testing.T, key, member string) time.Duration {
		t.Helper()
		now, err := rdb.Time(t.Context()).Result()
		if err != nil {
			t.Fatal(err)
		}
		if member == "" {
			d, err := rdb.PTTL(t.Context(), key).Result()
			if err != nil {
				t.Fatal(err)
			}
			return d
		}
		score, err := rdb.ZScore(t.Context(), key, member).Result()
		if err != nil {
			t.Fatalf("%s %s: %v", key, member, err)
		}
		return time.UnixMilli(int64(score)).Sub(now)
	}
	lockKey := "lockgate:{serverless/report}" // the default --redis-prefix

	// Someone else holds the lock for longer than one invocation.
	holder := acquire(t, gw.URL+path, `{"ttl_ms":600000}`)

	// Invocation 1: a ticket, and return.
	tk := openTicket(t, gw.URL+path, serverlessBody, auth)
	if d := time.Duration(tk.PollWithinMs) * time.Millisecond; d < scheduleGap+margin {
		t.Fatalf("poll_within_ms %d: a function invoked every %v would lose its ticket", tk.PollWithinMs, scheduleGap)
	}
	time.Sleep(gap) // the platform's gap between invocations: the time passing is what is tested
	if d := left(t, lockKey+":alive", tk.Ticket); d < scheduleGap+margin-gap {
		t.Fatalf("%v after the ticket was opened, Redis keeps it alive %v longer: too little for a gap of %v", gap, d, scheduleGap)
	}

	// Invocation 2: still held: the ticket keeps its place, and the poll
	// starts its liveness again.
	var st struct {
		Rank         int   `json:"rank"`
		PollWithinMs int64 `json:"poll_within_ms"`
	}
	wantJSON(t, pollTicket(t, gw.URL, tk, auth), http.StatusOK, &st)
	if st.Rank != 0 || time.Duration(st.PollWithinMs)*time.Millisecond < scheduleGap+margin {
		t.Fatalf("poll: %+v, want rank 0 and a minute and more to the next poll", st)
	}
	if d := left(t, lockKey+":alive", tk.Ticket); d < scheduleGap+margin {
		t.Fatalf("after a poll, Redis keeps the ticket alive %v longer, want more than %v", d, scheduleGap+margin)
	}

	// Between invocations, the holder releases: the lock is handed to the
	// ticket, to be picked up by its next poll.
	if r := call(t, "DELETE", gw.URL+path, "", with(auth, []string{"Lock-Token", holder.Token})...); r.status != http.StatusNoContent {
		t.Fatalf("release: %d %s", r.status, r.body)
	}
	time.Sleep(gap) // the platform's gap between invocations
	if d := left(t, lockKey, ""); d < scheduleGap+margin-gap {
		t.Fatalf("%v after the hand-off, the grant handed to the ticket waits %v more for its pick-up: too little for a gap of %v", gap, d, scheduleGap)
	}

	// Invocation 3: the grant, whose owner token is the ticket token.
	var g grant
	wantJSON(t, pollTicket(t, gw.URL, tk, auth), http.StatusCreated, &g)
	if g.Token != tk.TicketToken || g.FencingToken <= holder.FencingToken || g.Lock != "serverless/report" {
		t.Fatalf("grant %+v: want the ticket token, and a fencing token above the previous holder's %d", g, holder.FencingToken)
	}
	// The work: a store that keeps the largest fencing token it has seen
	// takes the new holder's write, and refuses the old holder's.
	store := fencedStore{}
	if !store.write(g.FencingToken) || store.write(holder.FencingToken) {
		t.Fatalf("fenced writes: the new holder's must pass and the old one's fail (tokens %d, %d)", g.FencingToken, holder.FencingToken)
	}
	if r := call(t, "DELETE", gw.URL+path, "", with(auth, []string{"Lock-Token", g.Token})...); r.status != http.StatusNoContent {
		t.Fatalf("release with the ticket token: %d %s", r.status, r.body)
	}
	wantProblem(t, call(t, "GET", gw.URL+path, "", auth...), http.StatusNotFound, "not_held")
}

// TestTicketWaitsLongerThanMaxWait: a ticket may wait up to
// --max-ticket-wait (1 h by default), far past --max-wait; an acquire that
// waits in the call may not.
func TestTicketWaitsLongerThanMaxWait(t *testing.T) {
	t.Parallel()
	gw := startGateway(t, "--redis-url", redistest.Start(t).URL())
	auth := bearer(token(t, nil))
	path := "/locks/tickets/long"
	holder := acquire(t, gw.URL+path, `{"ttl_ms":60000}`)
	wantProblem(t, call(t, "POST", gw.URL+path, `{"wait_ms":3600000}`, auth...), http.StatusBadRequest, "invalid_request")
	tk := openTicket(t, gw.URL+path, `{"wait_ms":3600000}`, auth)
	wantProblem(t, call(t, "POST", gw.URL+path, `{"wait_ms":3600001}`, with(auth, respondAsync)...), http.StatusBadRequest, "invalid_request")
	if r := call(t, "DELETE", gw.URL+tk.location, "", with(auth, []string{"Ticket-Token", tk.TicketToken})...); r.status != http.StatusNoContent {
		t.Fatalf("close the ticket: %d %s", r.status, r.body)
	}
	if r := call(t, "DELETE", gw.URL+path, "", with(auth, []string{"Lock-Token", holder.Token})...); r.status != http.StatusNoContent {
		t.Fatalf("release: %d %s", r.status, r.body)
	}
}

// fencedStore is a resource that checks fencing tokens, as the README
// asks: it accepts a write whose token is at least the largest seen.
type fencedStore struct{ largest int64 }

func (s *fencedStore) write(fence int64) bool {
	if fence < s.largest {
		return false
	}
	s.largest = fence
	return true
}
