package embedded

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/lockgate/lockgate/locks"
)

// releaseFails is a backend whose releases of one lock fail, as they do
// when the Redis node of that lock does not answer.
type releaseFails struct {
	locks.Locker
	key locks.Key
}

func (r releaseFails) Release(ctx context.Context, key locks.Key, token string) (locks.Released, error) {
	if key == r.key {
		return locks.Released{}, locks.Unavailable("release", key, errors.New("i/o timeout"))
	}
	return r.Locker.Release(ctx, key, token)
}

// TestSetRollbackThatFails: a set that cannot be whole, and could not give
// back a lock it took, leaves that lock held until its lease ends; so its
// answer is that the outcome is unknown (ErrUnavailable), never the
// refusal that made it give the locks back.
func TestSetRollbackThatFails(t *testing.T) {
	for name, tc := range map[string]struct {
		wait time.Duration
		lose bool // a is broken while the set waits for b
	}{
		"refused":                   {0, false},
		"a wait that runs out":      {50 * time.Millisecond, false},
		"a lock lost while waiting": {20 * time.Second, true},
	} {
		t.Run(name, func(t *testing.T) {
			ctx := t.Context()
			m := New(Options{})
			a, b := locks.Key{Namespace: "test", Name: "a"}, locks.Key{Namespace: "test", Name: "b"}
			other, err := m.Acquire(ctx, b, locks.AcquireRequest{TTL: time.Minute, Subject: "other"})
			if err != nil {
				t.Fatal(err)
			}
			kept := a // the set takes a, then meets b held
			if tc.lose {
				kept = b // a is gone: b is what the set gives back
			}
			s := &locks.SetEngine{Grants: releaseFails{Locker: m, key: kept}}
			done := make(chan error, 1)
			go func() {
				_, err := s.AcquireSet(ctx, []locks.Key{a, b}, locks.AcquireRequest{TTL: time.Minute, Wait: tc.wait, Subject: "set"})
				done <- err
			}()
			if tc.lose {
				waitQueued(t, m, b)
				if _, err := m.Break(ctx, a, "admin", 0); err != nil {
					t.Fatal(err)
				}
				if _, err := m.Release(ctx, b, other.Token); err != nil {
					t.Fatal(err)
				}
			}
			err = <-done
			if code := locks.ErrorCode(err); code != locks.CodeUnavailable {
				t.Fatalf("got %v (%q), want %q: %s may still be held", err, code, locks.CodeUnavailable, kept)
			}
			if _, err := m.Inspect(ctx, kept); err != nil {
				t.Fatalf("%s: got %v, want it still held by the set, whose release failed", kept, err)
			}
		})
	}
}

// waitQueued waits until someone waits in key's queue.
func waitQueued(t *testing.T, m *Backend, key locks.Key) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); ; {
		if info, err := m.Inspect(t.Context(), key); err == nil && info.Waiters > 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("nobody queued on %s within 10s", key)
		}
		time.Sleep(time.Millisecond) // polling for the waiter to queue
	}
}

// renewFails is a backend whose renewals of one lock fail, as they do
// when the Redis node of that lock does not answer.
type renewFails struct {
	locks.Locker
	key locks.Key
}

func (r renewFails) Renew(ctx context.Context, key locks.Key, token string, ttl time.Duration) (locks.Lease, error) {
	if key == r.key {
		return locks.Lease{}, locks.Unavailable("renew", key, errors.New("i/o timeout"))
	}
	return r.Locker.Renew(ctx, key, token, ttl)
}

// TestRenewSetLostLockWins: a set one of whose locks is gone is lost,
// whatever the renewal of another lock answered; so its renewal says so
// (ErrNotHolder) rather than that the outcome is unknown, and says the
// same whichever of the two comes first in the set.
func TestRenewSetLostLockWins(t *testing.T) {
	a, b := locks.Key{Namespace: "test", Name: "a"}, locks.Key{Namespace: "test", Name: "b"}
	for _, tc := range []struct{ failing, lost locks.Key }{{a, b}, {b, a}} {
		t.Run("renewal of "+tc.failing.Name+" fails, "+tc.lost.Name+" lost", func(t *testing.T) {
			ctx := t.Context()
			m := New(Options{})
			s := &locks.SetEngine{Grants: renewFails{Locker: m, key: tc.failing}}
			set, err := s.AcquireSet(ctx, []locks.Key{a, b}, locks.AcquireRequest{TTL: time.Minute, Subject: "set"})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := m.Break(ctx, tc.lost, "admin", 0); err != nil {
				t.Fatal(err)
			}
			_, err = s.RenewSet(ctx, []locks.Key{a, b}, set.Token, time.Minute)
			if code := locks.ErrorCode(err); code != locks.ErrorCode(locks.ErrNotHolder) {
				t.Fatalf("got %v (%q), want %q: %s is gone, so the set is", err, code, locks.ErrorCode(locks.ErrNotHolder), tc.lost)
			}
		})
	}
}
