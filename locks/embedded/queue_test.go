package embedded

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/lockgate/lockgate/locks"
)

// A waiter that joined the queue while the lock delay kept a free lock is
// first in line when the delay ends, also for a newcomer that asks in the
// moment between the delay's end and its timer's run (which hands the lock
// on): the Redis backend's acquire serves the queue first in that moment too.
// The delay's timer is an hour away here, and the test ends the delay by
// hand: the state the newcomer finds is the one of that moment.
func TestMemoryDelayEndServesTheQueueBeforeANewcomer(t *testing.T) {
	m := New(Options{LockDelay: time.Hour})
	key := locks.Key{Namespace: "t", Name: "delay-end"}
	ctx := t.Context()
	if _, err := m.Acquire(ctx, key, locks.AcquireRequest{TTL: time.Millisecond}); err != nil {
		t.Fatalf("first acquire: %v", err)
	}
	pollUntil(t, "the first lease to end", func() bool {
		_, err := m.Inspect(ctx, key)
		return errors.Is(err, locks.ErrNotHeld)
	})

	type result struct {
		g   locks.Grant
		err error
	}
	waiter := make(chan result, 1)
	go func() {
		g, err := m.Acquire(ctx, key, locks.AcquireRequest{TTL: time.Minute, Wait: time.Minute})
		waiter <- result{g, err}
	}()
	pollUntil(t, "the waiter to join the queue", func() bool {
		m.mu.Lock()
		defer m.mu.Unlock()
		return len(m.queues[key]) == 1
	})
	m.mu.Lock()
	m.delayed[key] = time.Now().Add(-time.Millisecond) // the delay ended; its timer has not run
	m.mu.Unlock()

	g, err := m.Acquire(ctx, key, locks.AcquireRequest{TTL: time.Minute})
	var held *locks.HeldError
	if !errors.As(err, &held) {
		t.Fatalf("a newcomer as the delay ends, with a waiter queued: got grant %d, err %v; want HeldError", g.FencingToken, err)
	}
	select {
	case r := <-waiter:
		if r.err != nil {
			t.Fatalf("the queued waiter: got %v, want a grant", r.err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the queued waiter got no grant within 10s of the delay's end")
	}
}

// pollUntil calls cond until it holds, failing t after a generous deadline.
func pollUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	for !cond() {
		select {
		case <-ctx.Done():
			t.Fatalf("waiting for %s: %v", what, ctx.Err())
		case <-time.After(time.Millisecond):
		}
	}
}
