package locktest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/lockgate/lockgate/locks"
)

// TicketBackend is a backend with tickets.
type TicketBackend interface {
	locks.Backend
	locks.Tickets
}

// TicketPair returns two backends on one store, standing for two gateways
// (the embedded backend: the same one twice), whose tickets live for
// liveness after each poll (0: the backend's default).
type TicketPair func(t *testing.T, liveness time.Duration) (a, b TicketBackend)

// RunTickets runs the ticket cases of the conformance suite.
func RunTickets(t *testing.T, newPair TicketPair) {
	for _, tc := range []struct {
		name string
		test func(t *testing.T, newPair TicketPair)
	}{
		{"GrantedAtOnceWhenFree", ticketGrantedAtOnceWhenFree},
		{"FIFOWithConnectedWaiters", ticketFIFOWithConnectedWaiters},
		{"AbandonedGrantPassesOn", ticketAbandonedGrantPassesOn},
		{"NotPolledIsDropped", ticketNotPolledIsDropped},
		{"LongPollWokenByRelease", ticketLongPollWokenByRelease},
		{"LongPollKeepsItAlive", ticketLongPollKeepsItAlive},
		{"WrongToken", ticketWrongToken},
		{"Close", ticketClose},
		{"WaitRunsOut", ticketWaitRunsOut},
		{"PickUpWindowIsTheLiveness", ticketPickUpWindowIsTheLiveness},
		{"HandedCalledOnHandOff", ticketHandedCalledOnHandOff},
		{"PollStatesTheCap", ticketPollStatesTheCap},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tc.test(t, newPair)
		})
	}
}

func openTicket(t *testing.T, b locks.Tickets, key locks.Key, wait time.Duration) locks.TicketState {
	t.Helper()
	st, err := b.OpenTicket(t.Context(), key, locks.AcquireRequest{TTL: time.Minute, Wait: wait, Subject: "fn"})
	if err != nil {
		t.Fatalf("open ticket: %v", err)
	}
	if st.Grant != nil {
		t.Fatalf("open ticket: granted at once, want a ticket")
	}
	return st
}

// pollUntilGranted polls the ticket (briefly each time) until it is
// granted, within d.
func pollUntilGranted(t *testing.T, b locks.Tickets, key locks.Key, tk locks.TicketState, d time.Duration) locks.Grant {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		st, err := b.PollTicket(t.Context(), key, tk.ID, tk.Token, 200*time.Millisecond)
		if err != nil {
			t.Fatalf("poll: %v", err)
		}
		if st.Grant != nil {
			return *st.Grant
		}
		if time.Now().After(deadline) {
			t.Fatalf("ticket not granted within %v (rank %d)", d, st.Rank)
		}
	}
}

// Within waits up to d for ch's answer.
func Within(t *testing.T, d time.Duration, what string, ch <-chan Result) Result {
	t.Helper()
	select {
	case res := <-ch:
		return res
	case <-time.After(d):
		t.Fatalf("%s: no answer within %v", what, d)
	}
	return Result{}
}

// QueueBehind starts a waiting acquire behind the ahead waiters already
// queued, and returns once it is queued.
func QueueBehind(t *testing.T, l locks.Locker, key locks.Key, ahead int) <-chan Result {
	t.Helper()
	ch := make(chan Result, 1)
	go func() {
		start := time.Now()
		g, err := l.Acquire(context.Background(), key, locks.AcquireRequest{TTL: time.Minute, Wait: 30 * time.Second})
		ch <- Result{Grant: g, Err: err, Elapsed: time.Since(start)}
	}()
	WaitUntilQueued(t, l, key, ahead+1)
	return ch
}

func ticketGrantedAtOnceWhenFree(t *testing.T, newPair TicketPair) {
	_, b := newPair(t, 0)
	key := UniqueKey(t)
	st, err := b.OpenTicket(t.Context(), key, locks.AcquireRequest{TTL: time.Minute, Wait: time.Minute})
	if err != nil || st.Grant == nil {
		t.Fatalf("got %+v, %v; want a grant", st, err)
	}
	if _, err := b.Release(t.Context(), key, st.Grant.Token); err != nil {
		t.Fatal(err)
	}
}

// ticketFIFOWithConnectedWaiters: a ticket keeps its place between
// connected waiters on two gateways: the waiter ahead of it first, then
// the ticket (even though the waiter behind it is connected and the
// ticket polls only now and then), then the waiter behind.
func ticketFIFOWithConnectedWaiters(t *testing.T, newPair TicketPair) {
	a, b := newPair(t, 0)
	key := UniqueKey(t)
	holder := MustAcquire(t, a, key, locks.AcquireRequest{TTL: time.Minute})
	ahead := QueueInOrder(t, key, a)[0]
	tk := openTicket(t, b, key, 30*time.Second)
	if tk.Rank != 1 {
		t.Fatalf("ticket rank %d, want 1", tk.Rank)
	}
	behind := QueueBehind(t, a, key, 2)

	if _, err := a.Release(t.Context(), key, holder.Token); err != nil {
		t.Fatal(err)
	}
	first := Within(t, 10*time.Second, "the waiter ahead", ahead)
	if first.Err != nil {
		t.Fatalf("waiter ahead: %v", first.Err)
	}
	// Polled last through b, which has no connected waiter, so nobody
	// hears the hand-off message on its channel.
	if st, err := b.PollTicket(t.Context(), key, tk.ID, tk.Token, 0); err != nil || st.Grant != nil || st.Rank != 0 {
		t.Fatalf("poll: got %+v, %v; want rank 0", st, err)
	}
	// The lock goes to the ticket, provisionally, though nobody polls now
	// or listens: the connected waiter behind it does not get it.
	if _, err := a.Release(t.Context(), key, first.Grant.Token); err != nil {
		t.Fatal(err)
	}
	select {
	case res := <-behind:
		t.Fatalf("the waiter behind the ticket got %+v, %v first", res.Grant, res.Err)
	case <-time.After(500 * time.Millisecond):
	}
	g := pollUntilGranted(t, a, key, tk, 10*time.Second) // through the other gateway
	if g.Token != tk.Token || g.FencingToken <= first.Grant.FencingToken {
		t.Fatalf("ticket grant %+v after fence %d: want the ticket's token and a larger fence", g, first.Grant.FencingToken)
	}
	// The answer was lost, say: the next poll gets the same grant.
	again, err := b.PollTicket(t.Context(), key, tk.ID, tk.Token, 0)
	if err != nil || again.Grant == nil || again.Grant.FencingToken != g.FencingToken {
		t.Fatalf("poll after the pick-up: got %+v, %v; want the same grant", again, err)
	}
	select {
	case res := <-behind:
		t.Fatalf("the waiter behind got %+v, %v while the ticket holds", res.Grant, res.Err)
	default:
	}
	if _, err := b.Release(t.Context(), key, g.Token); err != nil {
		t.Fatal(err)
	}
	last := Within(t, 10*time.Second, "the waiter behind", behind)
	if last.Err != nil || last.Grant.FencingToken <= g.FencingToken {
		t.Fatalf("waiter behind: got %+v, %v", last.Grant, last.Err)
	}
}

// ticketAbandonedGrantPassesOn: a ticket nobody polls any more is
// handed the lock; the grant is provisional, and passes to the waiter
// behind within about the liveness. The ticket is gone then.
func ticketAbandonedGrantPassesOn(t *testing.T, newPair TicketPair) {
	const liveness = 2 * time.Second
	a, b := newPair(t, liveness)
	key := UniqueKey(t)
	holder := MustAcquire(t, a, key, locks.AcquireRequest{TTL: time.Minute})
	tk := openTicket(t, b, key, 30*time.Second)
	behind := QueueBehind(t, a, key, 1)
	// Its last poll went through a, the gateway that releases: the grant
	// is provisional all the same, not handed in full to a.
	if _, err := a.PollTicket(t.Context(), key, tk.ID, tk.Token, 0); err != nil {
		t.Fatal(err)
	}
	released := time.Now()
	if _, err := a.Release(t.Context(), key, holder.Token); err != nil {
		t.Fatal(err)
	}
	res := Within(t, 15*time.Second, "the waiter behind the abandoned ticket", behind)
	if res.Err != nil {
		t.Fatalf("waiter behind: %v", res.Err)
	}
	// The grant waited for its pick-up for at most the liveness (what was
	// left of it after the ticket's last poll), then a heartbeat (1 s)
	// handed it on.
	if took := time.Since(released); took > liveness+3*time.Second {
		t.Fatalf("the lock passed on after %v, want within about the liveness %v", took, liveness)
	}
	if _, err := b.PollTicket(t.Context(), key, tk.ID, tk.Token, 0); !errors.Is(err, locks.ErrTicketNotFound) {
		t.Fatalf("poll of the abandoned ticket: got %v, want ErrTicketNotFound", err)
	}
}

// ticketNotPolledIsDropped: a ticket not polled within the liveness
// leaves the queue: the lock skips it, and its poll finds nothing.
func ticketNotPolledIsDropped(t *testing.T, newPair TicketPair) {
	_, b := newPair(t, 300*time.Millisecond)
	key := UniqueKey(t)
	holder := MustAcquire(t, b, key, locks.AcquireRequest{TTL: time.Minute})
	tk := openTicket(t, b, key, 30*time.Second)
	deadline := time.Now().Add(10 * time.Second)
	for {
		_, err := b.PollTicket(t.Context(), key, tk.ID, tk.Token, 0)
		if errors.Is(err, locks.ErrTicketNotFound) {
			break
		}
		if err != nil || time.Now().After(deadline) {
			t.Fatalf("poll: %v; want the ticket gone once polls stop (they do not, here, for %v)", err, 300*time.Millisecond)
		}
		time.Sleep(500 * time.Millisecond) // longer than the liveness between polls
	}
	if _, err := b.Release(t.Context(), key, holder.Token); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Acquire(t.Context(), key, locks.AcquireRequest{TTL: time.Minute}); err != nil {
		t.Fatalf("acquire after the dropped ticket: %v, want the lock", err)
	}
}

// ticketLongPollWokenByRelease: a long-poll on one gateway returns
// the grant as soon as a release on the other hands the lock to the
// ticket, long before the long-poll's end.
func ticketLongPollWokenByRelease(t *testing.T, newPair TicketPair) {
	a, b := newPair(t, 0)
	key := UniqueKey(t)
	holder := MustAcquire(t, a, key, locks.AcquireRequest{TTL: time.Minute})
	tk := openTicket(t, b, key, time.Minute)
	type res struct {
		st  locks.TicketState
		err error
		at  time.Time
	}
	ch := make(chan res, 1)
	go func() {
		st, err := b.PollTicket(context.Background(), key, tk.ID, tk.Token, 30*time.Second)
		ch <- res{st, err, time.Now()}
	}()
	time.Sleep(300 * time.Millisecond) // let the long-poll start listening (a late start only runs the script sooner)
	released := time.Now()
	if _, err := a.Release(t.Context(), key, holder.Token); err != nil {
		t.Fatal(err)
	}
	select {
	case r := <-ch:
		if r.err != nil || r.st.Grant == nil {
			t.Fatalf("long-poll: got %+v, %v; want the grant", r.st, r.err)
		}
		if took := r.at.Sub(released); took > 5*time.Second {
			t.Fatalf("long-poll answered %v after the release, want at once", took)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("long-poll: no answer within 20s of the release")
	}
}

// ticketLongPollKeepsItAlive: a long-poll longer than the liveness
// keeps the ticket queued. The liveness is the shortest the gateway takes
// (2 s, twice the long-poll's keep-alive of once a second): with 1.5 s it
// failed once on a busy machine (load 7), a keep-alive half a second late.
func ticketLongPollKeepsItAlive(t *testing.T, newPair TicketPair) {
	_, b := newPair(t, 2*time.Second)
	key := UniqueKey(t)
	MustAcquire(t, b, key, locks.AcquireRequest{TTL: time.Minute})
	tk := openTicket(t, b, key, time.Minute)
	st, err := b.PollTicket(t.Context(), key, tk.ID, tk.Token, 5*time.Second)
	if err != nil || st.Grant != nil || st.Rank != 0 {
		t.Fatalf("long-poll: got %+v, %v; want rank 0", st, err)
	}
	if _, err := b.PollTicket(t.Context(), key, tk.ID, tk.Token, 0); err != nil {
		t.Fatalf("poll after a long-poll of more than two livenesses: %v, want the ticket still queued", err)
	}
}

// ticketWrongToken: another token, or another ticket's token, finds
// no ticket, and changes nothing.
func ticketWrongToken(t *testing.T, newPair TicketPair) {
	_, b := newPair(t, 0)
	key := UniqueKey(t)
	holder := MustAcquire(t, b, key, locks.AcquireRequest{TTL: time.Minute})
	tk := openTicket(t, b, key, time.Minute)
	other := openTicket(t, b, key, time.Minute)
	for name, token := range map[string]string{"made up": "AAAAAAAAAAAAAAAAAAAAAA", "another ticket's": other.Token, "the holder's": holder.Token} {
		if _, err := b.PollTicket(t.Context(), key, tk.ID, token, 0); !errors.Is(err, locks.ErrTicketNotFound) {
			t.Errorf("poll with %s token: got %v, want ErrTicketNotFound", name, err)
		}
		if err := b.CloseTicket(t.Context(), key, tk.ID, token); !errors.Is(err, locks.ErrTicketNotFound) {
			t.Errorf("close with %s token: got %v, want ErrTicketNotFound", name, err)
		}
	}
	if st, err := b.PollTicket(t.Context(), key, tk.ID, tk.Token, 0); err != nil || st.Rank != 0 {
		t.Fatalf("the ticket after the wrong tokens: got %+v, %v; want rank 0", st, err)
	}
	if _, err := b.Inspect(t.Context(), key); err != nil {
		t.Fatalf("the holder after the wrong tokens: %v", err)
	}
}

// ticketClose: a closed ticket leaves the queue; one that was handed
// the lock releases it, to the next in line.
func ticketClose(t *testing.T, newPair TicketPair) {
	_, b := newPair(t, 0)
	key := UniqueKey(t)
	holder := MustAcquire(t, b, key, locks.AcquireRequest{TTL: time.Minute})
	gone := openTicket(t, b, key, time.Minute)
	handed := openTicket(t, b, key, time.Minute)
	behind := QueueBehind(t, b, key, 2)
	if err := b.CloseTicket(t.Context(), key, gone.ID, gone.Token); err != nil {
		t.Fatalf("close: %v", err)
	}
	if err := b.CloseTicket(t.Context(), key, gone.ID, gone.Token); !errors.Is(err, locks.ErrTicketNotFound) {
		t.Fatalf("close again: got %v, want ErrTicketNotFound", err)
	}
	if st, err := b.PollTicket(t.Context(), key, handed.ID, handed.Token, 0); err != nil || st.Rank != 0 {
		t.Fatalf("the ticket behind the closed one: got %+v, %v; want rank 0", st, err)
	}
	if _, err := b.Release(t.Context(), key, holder.Token); err != nil {
		t.Fatal(err)
	}
	// Handed the lock (provisionally), and closed before any poll.
	if err := b.CloseTicket(t.Context(), key, handed.ID, handed.Token); err != nil {
		t.Fatalf("close a ticket handed the lock: %v", err)
	}
	if res := Within(t, 10*time.Second, "the waiter behind", behind); res.Err != nil {
		t.Fatalf("waiter behind: %v", res.Err)
	}
}

// ticketWaitRunsOut: a ticket whose wait ran out is gone, though
// polled.
func ticketWaitRunsOut(t *testing.T, newPair TicketPair) {
	_, b := newPair(t, 0)
	key := UniqueKey(t)
	MustAcquire(t, b, key, locks.AcquireRequest{TTL: time.Minute})
	tk := openTicket(t, b, key, 500*time.Millisecond)
	_, err := b.PollTicket(t.Context(), key, tk.ID, tk.Token, 2*time.Second)
	if !errors.Is(err, locks.ErrTicketNotFound) {
		t.Fatalf("long-poll past the wait: got %v, want ErrTicketNotFound", err)
	}
}

// ticketPickUpWindowIsTheLiveness: a grant handed to a ticket waits the
// ticket liveness for its pick-up, whatever TTL the ticket asked for: a
// function invoked once a minute asks for the lease its work needs (30 s,
// say), and must still find the grant a minute after the hand-off. The
// pick-up then gives it the TTL it asked for. (On Redis the hand-off gave
// the shorter of the two, and the grant ended with the TTL.)
func ticketPickUpWindowIsTheLiveness(t *testing.T, newPair TicketPair) {
	const ttl, liveness = 300 * time.Millisecond, 20 * time.Second
	_, b := newPair(t, liveness)
	key := UniqueKey(t)
	holder := MustAcquire(t, b, key, locks.AcquireRequest{TTL: time.Minute})
	tk, err := b.OpenTicket(t.Context(), key, locks.AcquireRequest{TTL: ttl, Wait: time.Minute, Subject: "fn"})
	if err != nil || tk.Grant != nil {
		t.Fatalf("open ticket: %+v, %v; want a ticket", tk, err)
	}
	if _, err := b.Release(t.Context(), key, holder.Token); err != nil {
		t.Fatal(err)
	}
	handed := time.Now()
	time.Sleep(3 * ttl) // the time passing is what is tested, not a synchronisation
	st, err := b.PollTicket(t.Context(), key, tk.ID, tk.Token, 0)
	if err != nil || st.Grant == nil {
		t.Fatalf("poll %v after the hand-off (ttl %v, liveness %v): got %+v, %v; want the grant",
			time.Since(handed).Round(time.Millisecond), ttl, liveness, st, err)
	}
	if st.Grant.TTL > ttl {
		t.Fatalf("picked-up lease %v, want the TTL asked for, %v", st.Grant.TTL, ttl)
	}
}

// ticketHandedCalledOnHandOff: a queued ticket's Handed is called once
// when a release on another gateway hands it the lock, before any poll,
// and the grant is still the poll's to pick up; a ticket granted at once
// never calls it.
func ticketHandedCalledOnHandOff(t *testing.T, newPair TicketPair) {
	a, b := newPair(t, 0)
	key := UniqueKey(t)
	calls := make(chan locks.TicketHanded, 2)
	handed := func(h locks.TicketHanded) { calls <- h }
	at := func(req locks.AcquireRequest) locks.AcquireRequest { req.Handed = handed; return req }

	st, err := b.OpenTicket(t.Context(), key, at(locks.AcquireRequest{TTL: time.Minute, Wait: time.Minute}))
	if err != nil || st.Grant == nil {
		t.Fatalf("free lock: got %+v, %v; want a grant", st, err)
	}
	holder := *st.Grant
	tk, err := b.OpenTicket(t.Context(), key, at(locks.AcquireRequest{TTL: time.Minute, Wait: time.Minute}))
	if err != nil || tk.Grant != nil {
		t.Fatalf("held lock: got %+v, %v; want a ticket", tk, err)
	}
	select {
	case <-calls:
		t.Fatal("Handed called before the hand-off")
	default:
	}
	if _, err := a.Release(t.Context(), key, holder.Token); err != nil {
		t.Fatal(err)
	}
	select {
	case h := <-calls:
		if h.ID != tk.ID || time.Until(h.PickUpBy) <= 0 {
			t.Fatalf("Handed(%+v), want ticket %s with a pick-up time ahead", h, tk.ID)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Handed not called within 5s of the release")
	}
	got, err := b.PollTicket(t.Context(), key, tk.ID, tk.Token, 0)
	if err != nil || got.Grant == nil {
		t.Fatalf("poll after Handed: got %+v, %v; want the grant", got, err)
	}
	if _, err := b.Release(t.Context(), key, got.Grant.Token); err != nil {
		t.Fatal(err)
	}
	select {
	case <-calls:
		t.Fatal("Handed called twice, or for the grant given at once")
	case <-time.After(200 * time.Millisecond):
	}
}
