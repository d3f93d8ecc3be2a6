package e2e

import (
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/lockgate/lockgate/internal/redistest"
)

// ticket is the 202 of an acquire with Prefer: respond-async.
type ticket struct {
	Lock         string `json:"lock"`
	Ticket       string `json:"ticket"`
	TicketToken  string `json:"ticket_token"`
	Rank         int    `json:"rank"`
	PollWithinMs int64  `json:"poll_within_ms"`
	// CallbackSecret is the ticket's own key for its notifications (with
	// callback_url only).
	CallbackSecret string `json:"callback_secret"`
	location       string
}

var respondAsync = []string{"Prefer", "respond-async"}

// openTicket asks for url's lock with a ticket, and fails the test unless
// it gets one.
func openTicket(t *testing.T, url, body string, auth []string) ticket {
	t.Helper()
	r := call(t, "POST", url, body, with(auth, respondAsync)...)
	var tk ticket
	wantJSON(t, r, http.StatusAccepted, &tk)
	tk.location = r.header.Get("Location")
	if r.header.Get("Preference-Applied") != "respond-async" || r.header.Get("Cache-Control") != "no-store" {
		t.Fatalf("202 headers %v: want Preference-Applied: respond-async and Cache-Control: no-store", r.header)
	}
	if tk.TicketToken == "" || tk.location != strings.TrimPrefix(url, baseOf(url))+"/tickets/"+tk.Ticket {
		t.Fatalf("ticket %+v at %q: want a token and the ticket's Location", tk, tk.location)
	}
	if strings.Contains(tk.location, tk.TicketToken) {
		t.Fatalf("Location %q holds the ticket token", tk.location)
	}
	return tk
}

// baseOf is the scheme and host of url.
func baseOf(url string) string {
	i := strings.Index(url, "/locks/")
	return url[:i]
}

// pollTicket polls tk through the gateway at base with extra headers.
func pollTicket(t *testing.T, base string, tk ticket, auth []string, extra ...string) response {
	t.Helper()
	return call(t, "GET", base+tk.location, "", with(auth, []string{"Ticket-Token", tk.TicketToken}, extra)...)
}

// TestTicketsAcrossGateways: tickets with two gateways on one Redis: the
// queue is FIFO between tickets and connected waiters; a grant handed to
// an abandoned ticket passes on within the liveness; a long-poll on one
// gateway is woken by a release on the other; a wrong token finds nothing
// and changes nothing; DELETE leaves the queue; tokens stay out of URLs
// and logs.
func TestTicketsAcrossGateways(t *testing.T) {
	t.Parallel()
	u := redistest.Start(t).URL()
	const liveness = 2 * time.Second
	gw1 := startGateway(t, "--redis-url", u, "--ticket-liveness", liveness.String())
	gw2 := startGateway(t, "--redis-url", u, "--ticket-liveness", liveness.String())
	auth := bearer(token(t, nil))
	waitBody := `{"ttl_ms":60000,"wait_ms":30000}`
	queued := func(t *testing.T, path string, n int) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for {
			var info struct{ Waiters int }
			wantJSON(t, call(t, "GET", gw1.URL+path, "", auth...), http.StatusOK, &info)
			if info.Waiters == n {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("waiters: got %d, want %d", info.Waiters, n)
			}
			time.Sleep(5 * time.Millisecond) // polling for a request to queue up
		}
	}
	release := func(t *testing.T, base, path, tok string) {
		t.Helper()
		if r := call(t, "DELETE", base+path, "", with(auth, []string{"Lock-Token", tok})...); r.status != http.StatusNoContent {
			t.Fatalf("release: got %d %s", r.status, r.body)
		}
	}
	got := func(t *testing.T, what string, ch <-chan response, within time.Duration) grant {
		t.Helper()
		select {
		case r := <-ch:
			var g grant
			wantJSON(t, r, http.StatusCreated, &g)
			return g
		case <-time.After(within):
			t.Fatalf("%s: no grant within %v", what, within)
		}
		return grant{}
	}

	t.Run("FIFOWithConnectedWaiters", func(t *testing.T) {
		path := "/locks/tickets/fifo"
		holder := acquire(t, gw1.URL+path, `{"ttl_ms":60000}`)
		ahead := callAsync(t, "POST", gw1.URL+path, waitBody, auth...)
		queued(t, path, 1)
		tk := openTicket(t, gw2.URL+path, waitBody, auth)
		if tk.Rank != 1 || tk.PollWithinMs != liveness.Milliseconds() {
			t.Fatalf("ticket %+v: want rank 1, poll within %v", tk, liveness)
		}
		behind := callAsync(t, "POST", gw1.URL+path, waitBody, auth...)
		queued(t, path, 3)

		release(t, gw2.URL, path, holder.Token)
		first := got(t, "the waiter ahead", ahead, 10*time.Second)
		var st struct{ Rank int }
		wantJSON(t, pollTicket(t, gw2.URL, tk, auth), http.StatusOK, &st)
		if st.Rank != 0 {
			t.Fatalf("ticket rank %d, want 0", st.Rank)
		}
		release(t, gw1.URL, path, first.Token)
		var g grant
		deadline := time.Now().Add(10 * time.Second)
		for {
			r := pollTicket(t, gw1.URL, tk, auth)
			if r.status == http.StatusCreated {
				wantJSON(t, r, http.StatusCreated, &g)
				break
			}
			if r.status != http.StatusOK || time.Now().After(deadline) {
				t.Fatalf("poll: got %d %s, want the grant within 10s", r.status, r.body)
			}
			select {
			case r := <-behind:
				t.Fatalf("the waiter behind the ticket got %d %s first", r.status, r.body)
			case <-time.After(20 * time.Millisecond):
			}
		}
		if g.Token != tk.TicketToken || g.FencingToken <= first.FencingToken {
			t.Fatalf("ticket grant %+v: want the ticket token as owner token and a fence above %d", g, first.FencingToken)
		}
		release(t, gw2.URL, path, g.Token)
		if last := got(t, "the waiter behind", behind, 10*time.Second); last.FencingToken <= g.FencingToken {
			t.Fatalf("fence %d after the ticket's %d", last.FencingToken, g.FencingToken)
		}
	})

	t.Run("AbandonedTicketsGrantPassesOn", func(t *testing.T) {
		path := "/locks/tickets/abandoned"
		holder := acquire(t, gw1.URL+path, `{"ttl_ms":60000}`)
		tk := openTicket(t, gw2.URL+path, waitBody, auth)
		behind := callAsync(t, "POST", gw1.URL+path, waitBody, auth...)
		queued(t, path, 2)
		released := time.Now()
		release(t, gw1.URL, path, holder.Token)
		got(t, "the waiter behind the abandoned ticket", behind, 15*time.Second)
		if took := time.Since(released); took > liveness+3*time.Second {
			t.Fatalf("the lock passed on %v after the release, want within about the liveness (%v)", took, liveness)
		}
		wantProblem(t, pollTicket(t, gw2.URL, tk, auth), http.StatusNotFound, "not_found")
	})

	t.Run("LongPollWokenByRelease", func(t *testing.T) {
		path := "/locks/tickets/longpoll"
		holder := acquire(t, gw1.URL+path, `{"ttl_ms":60000}`)
		tk := openTicket(t, gw2.URL+path, waitBody, auth)
		start := time.Now()
		long := callAsync(t, "GET", gw1.URL+tk.location, "", with(auth, []string{"Ticket-Token", tk.TicketToken, "Prefer", "wait=25"})...)
		time.Sleep(300 * time.Millisecond) // let it listen; a late one only looks sooner
		release(t, gw2.URL, path, holder.Token)
		g := got(t, "the long-poll", long, 10*time.Second)
		if took := time.Since(start); took > 10*time.Second || g.Token != tk.TicketToken {
			t.Fatalf("long-poll: %+v after %v, want the ticket's grant at once", g, took)
		}
		// An answer lost on the way: the next poll answers it again.
		var again grant
		wantJSON(t, pollTicket(t, gw2.URL, tk, auth), http.StatusCreated, &again)
		if again.FencingToken != g.FencingToken {
			t.Fatalf("poll after the pick-up: fence %d, want %d", again.FencingToken, g.FencingToken)
		}
		release(t, gw2.URL, path, g.Token)
	})

	t.Run("PollSaysMode", func(t *testing.T) {
		for _, mode := range []string{"shared", "exclusive"} {
			path := "/locks/tickets/mode-" + mode
			holder := acquire(t, gw1.URL+path, `{"ttl_ms":60000}`)
			tk := openTicket(t, gw2.URL+path, `{"ttl_ms":60000,"wait_ms":30000,"mode":"`+mode+`"}`, auth)
			long := callAsync(t, "GET", gw1.URL+tk.location, "", with(auth, []string{"Ticket-Token", tk.TicketToken, "Prefer", "wait=25"})...)
			release(t, gw2.URL, path, holder.Token)
			g := got(t, "the "+mode+" ticket's long-poll", long, 10*time.Second)
			var again grant
			wantJSON(t, pollTicket(t, gw2.URL, tk, auth), http.StatusCreated, &again)
			if g.Mode != mode || again.Mode != mode {
				t.Fatalf("%s ticket: the poll's 201 says mode %q, and again %q", mode, g.Mode, again.Mode)
			}
			release(t, gw2.URL, path, g.Token)
		}
	})

	t.Run("LongPollEndsWithRank", func(t *testing.T) {
		path := "/locks/tickets/longpoll-rank"
		acquire(t, gw1.URL+path, `{"ttl_ms":60000}`)
		tk := openTicket(t, gw2.URL+path, waitBody, auth)
		start := time.Now()
		var st struct{ Rank int }
		wantJSON(t, pollTicket(t, gw1.URL, tk, auth, "Prefer", "wait=3"), http.StatusOK, &st)
		if took := time.Since(start); took < 2500*time.Millisecond || st.Rank != 0 {
			t.Fatalf("long-poll: rank %d after %v; want rank 0 after about 3s", st.Rank, took)
		}
		// Longer than the liveness, and the ticket lives.
		wantJSON(t, pollTicket(t, gw2.URL, tk, auth), http.StatusOK, &st)
	})

	t.Run("WrongTokenIs404AndChangesNothing", func(t *testing.T) {
		path := "/locks/tickets/wrong"
		holder := acquire(t, gw1.URL+path, `{"ttl_ms":60000}`)
		tk := openTicket(t, gw2.URL+path, waitBody, auth)
		other := openTicket(t, gw2.URL+path, waitBody, auth)
		for name, tok := range map[string]string{"another ticket's": other.TicketToken, "the holder's": holder.Token, "made up": "x"} {
			h := with(auth, []string{"Ticket-Token", tok})
			notFound := wantProblem(t, call(t, "GET", gw1.URL+tk.location, "", h...), http.StatusNotFound, "not_found")
			gone := wantProblem(t, call(t, "GET", gw1.URL+path+"/tickets/AAAAAAAAAAAAAAAAAAAAAA", "", h...), http.StatusNotFound, "not_found")
			if notFound.Detail != gone.Detail {
				t.Errorf("%s token: the 404 of a wrong token (%q) differs from that of no ticket (%q)", name, notFound.Detail, gone.Detail)
			}
			wantProblem(t, call(t, "DELETE", gw1.URL+tk.location, "", h...), http.StatusNotFound, "not_found")
		}
		var st struct{ Rank int }
		wantJSON(t, pollTicket(t, gw1.URL, tk, auth), http.StatusOK, &st)
		if st.Rank != 0 {
			t.Fatalf("the ticket after wrong tokens: rank %d, want 0", st.Rank)
		}
		wantProblem(t, call(t, "GET", gw1.URL+tk.location, "", auth...), http.StatusBadRequest, "invalid_request") // no Ticket-Token
	})

	t.Run("Delete", func(t *testing.T) {
		path := "/locks/tickets/delete"
		holder := acquire(t, gw1.URL+path, `{"ttl_ms":60000}`)
		tk := openTicket(t, gw2.URL+path, waitBody, auth)
		h := with(auth, []string{"Ticket-Token", tk.TicketToken})
		if r := call(t, "DELETE", gw1.URL+tk.location, "", h...); r.status != http.StatusNoContent {
			t.Fatalf("DELETE: got %d %s", r.status, r.body)
		}
		wantProblem(t, pollTicket(t, gw2.URL, tk, auth), http.StatusNotFound, "not_found")
		wantProblem(t, call(t, "DELETE", gw1.URL+tk.location, "", h...), http.StatusNotFound, "not_found")
		// A ticket handed the lock, deleted before any poll: the lock is free.
		tk = openTicket(t, gw2.URL+path, waitBody, auth)
		release(t, gw1.URL, path, holder.Token)
		if r := call(t, "DELETE", gw2.URL+tk.location, "", with(auth, []string{"Ticket-Token", tk.TicketToken})...); r.status != http.StatusNoContent {
			t.Fatalf("DELETE of a ticket handed the lock: got %d %s", r.status, r.body)
		}
		wantProblem(t, call(t, "GET", gw1.URL+path, "", auth...), http.StatusNotFound, "not_held")
	})

	t.Run("GrantedAtOnceAndRefusals", func(t *testing.T) {
		path := "/locks/tickets/free"
		var g grant
		wantJSON(t, call(t, "POST", gw1.URL+path, waitBody, with(auth, respondAsync)...), http.StatusCreated, &g)
		release(t, gw1.URL, path, g.Token)
		wantProblem(t, call(t, "POST", gw1.URL+path, waitBody, with(auth, respondAsync, []string{"Idempotency-Key", "k-1"})...),
			http.StatusBadRequest, "invalid_request")
		// Without wait_ms there is nothing to wait for: a plain acquire.
		holder := acquire(t, gw1.URL+path, "")
		wantProblem(t, call(t, "POST", gw1.URL+path, "", with(auth, respondAsync)...), http.StatusConflict, "lock_held")
		release(t, gw1.URL, path, holder.Token)
	})

	t.Run("NoTokenInLogsAndPollsCountedApart", func(t *testing.T) {
		for _, gw := range []*gateway{gw1, gw2} {
			logs := gw.logs.String()
			if strings.Contains(logs, "ticket_token") || strings.Contains(logs, "Ticket-Token") {
				t.Errorf("the logs mention ticket tokens:\n%s", logs)
			}
		}
		resp, err := http.Get(gw1.URL + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		m, _ := io.ReadAll(resp.Body)
		for _, want := range []string{`lockgate_ticket_polls_total{outcome="granted"}`, `lockgate_ticket_polls_total{outcome="waiting"}`, `lockgate_ticket_polls_total{outcome="not_found"}`} {
			if !strings.Contains(string(m), want) {
				t.Errorf("/metrics lacks %s", want)
			}
		}
		resp2, err := http.Get(gw2.URL + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		defer resp2.Body.Close()
		m2, _ := io.ReadAll(resp2.Body)
		if !strings.Contains(string(m2), `lockgate_acquires_total{outcome="ticket"}`) {
			t.Errorf("/metrics of gateway 2 lacks the acquires answered with a ticket")
		}
	})
}

// TestTicketsEmbeddedBackend: the embedded backend has tickets too (issue
// 24 item 4; before it, the preference was ignored and the acquire
// answered 409 lock_held): a ticket queued behind a holder is handed the
// lock on release, and a poll picks the grant up.
func TestTicketsEmbeddedBackend(t *testing.T) {
	t.Parallel()
	gw := startGateway(t)
	auth := bearer(token(t, nil))
	path := "/locks/tickets/embedded"
	holder := acquire(t, gw.URL+path, `{"ttl_ms":60000}`)
	tk := openTicket(t, gw.URL+path, `{"ttl_ms":60000,"wait_ms":60000}`, auth)
	if tk.Rank != 0 {
		t.Fatalf("ticket behind the holder: rank %d, want 0", tk.Rank)
	}
	wantJSON(t, pollTicket(t, gw.URL, tk, auth), http.StatusOK, &ticket{}) // still queued
	if r := call(t, "DELETE", gw.URL+path, "", with(auth, []string{"Lock-Token", holder.Token})...); r.status != http.StatusNoContent {
		t.Fatalf("release: got %d %s, want 204", r.status, r.body)
	}
	var g grant
	wantJSON(t, pollTicket(t, gw.URL, tk, auth), http.StatusCreated, &g)
	if g.Token != tk.TicketToken || g.FencingToken <= holder.FencingToken {
		t.Fatalf("the ticket's grant %+v: want its ticket token and a fence above %d", g, holder.FencingToken)
	}
	if r := call(t, "DELETE", gw.URL+path, "", with(auth, []string{"Lock-Token", g.Token})...); r.status != http.StatusNoContent {
		t.Fatalf("release of the ticket's grant: got %d %s, want 204", r.status, r.body)
	}
	wantProblem(t, call(t, "GET", gw.URL+path+"/tickets/AAAAAAAAAAAAAAAAAAAAAA", "", with(auth, []string{"Ticket-Token", "x"})...),
		http.StatusNotFound, "not_found")
}
