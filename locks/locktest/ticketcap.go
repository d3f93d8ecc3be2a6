package locktest

import (
	"testing"
	"time"

	"github.com/lockgate/lockgate/locks"
)

// ticketPollStatesTheCap: a ticket with a hard cap (AcquireRequest.MaxHold)
// is told its grant's hold_until by the poll that picks the grant up, and
// by every poll after, as an acquire's answer states it; polled through
// the other gateway, which never saw the ticket's request. Exclusive and
// shared.
func ticketPollStatesTheCap(t *testing.T, newPair TicketPair) {
	a, b := newPair(t, 0)
	const maxHold = 30 * time.Second
	for _, mode := range []locks.Mode{locks.Exclusive, locks.Shared} {
		key := UniqueKey(t)
		holder := MustAcquire(t, a, key, req(time.Minute))
		tk, err := b.OpenTicket(t.Context(), key, locks.AcquireRequest{TTL: 10 * time.Second, MaxHold: maxHold, Wait: time.Minute, Mode: mode, Subject: "fn"})
		if err != nil || tk.Grant != nil {
			t.Fatalf("%s: open ticket: got %+v, %v; want a ticket", mode, tk, err)
		}
		if _, err := a.Release(t.Context(), key, holder.Token); err != nil {
			t.Fatal(err)
		}
		g := pollUntilGranted(t, a, key, tk, 10*time.Second)
		latest := capEnd(maxHold) // the grant was handed before this
		for i := range 2 {
			switch {
			case g.HoldUntil.IsZero():
				t.Fatalf("%s: poll %d of a capped ticket answered its grant without hold_until: %+v", mode, i, g.Lease)
			case g.HoldUntil.After(latest):
				t.Fatalf("%s: poll %d: hold_until %v, want no later than %v", mode, i, g.HoldUntil, latest)
			case g.ExpiresAt.After(g.HoldUntil):
				t.Fatalf("%s: poll %d: lease ends %v, after its hold_until %v", mode, i, g.ExpiresAt, g.HoldUntil)
			}
			st, err := a.PollTicket(t.Context(), key, tk.ID, tk.Token, 0) // after the pick-up: the grant again
			if err != nil || st.Grant == nil {
				t.Fatalf("%s: a poll after the pick-up: got %+v, %v; want the grant", mode, st, err)
			}
			g = *st.Grant
		}
		if _, err := a.Release(t.Context(), key, g.Token); err != nil {
			t.Fatal(err)
		}
	}
}
