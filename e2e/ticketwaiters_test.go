package e2e

import (
	"net/http"
	"testing"

	"github.com/golang-jwt/jwt/v5"

	"github.com/lockgate/lockgate/internal/redistest"
)

// TestTicketsCountAsWaiters: an open ticket is a waiter of its subject:
// past --subject-max-waiters the next ticket is a 429 and changes
// nothing, while another subject opens its own; a ticket that leaves
// (closed, or granted) makes room. A long poll of a ticket counted already
// does not count it twice.
func TestTicketsCountAsWaiters(t *testing.T) {
	t.Parallel()
	gw := startGateway(t, "--redis-url", redistest.Start(t).URL(), "--subject-max-waiters", "2")
	alice, bob := bearer(token(t, jwt.MapClaims{"sub": "alice"})), bearer(token(t, jwt.MapClaims{"sub": "bob"}))
	url := gw.URL + "/locks/tickets/capped"
	const wait = `{"ttl_ms":60000,"wait_ms":30000}`
	holder := acquire(t, url, `{"ttl_ms":60000}`)

	first := openTicket(t, url, wait, alice)
	second := openTicket(t, url, wait, alice)
	// A long poll of alice's own ticket takes no third place.
	r := pollTicket(t, gw.URL, second, alice, "Prefer", "wait=1")
	if r.status != http.StatusOK {
		t.Fatalf("long poll of a counted ticket: got %d %s, want 200", r.status, r.body)
	}
	p := wantProblem(t, call(t, "POST", url, wait, with(alice, respondAsync)...), http.StatusTooManyRequests, "too_many_requests")
	if got := p.Detail; got == "" {
		t.Fatal("429 without a detail")
	}
	openTicket(t, url, wait, bob)

	if r := call(t, "DELETE", gw.URL+first.location, "", with(alice, []string{"Ticket-Token", first.TicketToken})...); r.status != http.StatusNoContent {
		t.Fatalf("close ticket: got %d %s", r.status, r.body)
	}
	openTicket(t, url, wait, alice)

	// Granted and picked up, a ticket holds the lock: it waits no more.
	if r := call(t, "DELETE", url, "", with(bearer(token(t, nil)), []string{"Lock-Token", holder.Token})...); r.status != http.StatusNoContent {
		t.Fatalf("release: got %d %s", r.status, r.body)
	}
	pollUntil(t, "alice's second ticket is granted", func() bool { return pollTicket(t, gw.URL, second, alice).status == http.StatusCreated })
	openTicket(t, url, wait, alice)
}
