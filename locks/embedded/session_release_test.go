package embedded

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/lockgate/lockgate/locks"
)

// sessionReleaseFails is a backend whose releases of one lock fail, as
// they do when the Redis node of that lock does not answer.
type sessionReleaseFails struct {
	*Backend
	key locks.Key
}

func (r sessionReleaseFails) Release(ctx context.Context, key locks.Key, token string) (locks.Released, error) {
	if key == r.key {
		return locks.Released{}, locks.Unavailable("release", key, errors.New("i/o timeout"))
	}
	return r.Backend.Release(ctx, key, token)
}

// TestSessionAcquireWhoseReleaseFails: an acquire in a session that ended
// while it waited gives its grant back; when that release fails, the
// grant stays held until its lease ends, so the answer is that the
// outcome is unknown (ErrUnavailable), never session_ended.
func TestSessionAcquireWhoseReleaseFails(t *testing.T) {
	ctx := t.Context()
	m := New(Options{})
	key := locks.Key{Namespace: "test", Name: "a"}
	s := &locks.SessionEngine{Store: m.SessionEngine.Store, Grants: sessionReleaseFails{Backend: m, key: key}, MaxHolds: locks.DefaultSessionMaxHolds}
	other, err := m.Acquire(ctx, key, locks.AcquireRequest{TTL: time.Minute, Subject: "other"})
	if err != nil {
		t.Fatal(err)
	}
	sess, err := s.OpenSession(ctx, "s", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := s.AcquireInSession(ctx, sess.Token, key, locks.AcquireRequest{Wait: 20 * time.Second, Subject: "s"})
		done <- err
	}()
	waitQueued(t, m, key)
	if _, err := s.EndSession(ctx, sess.Token, "s"); err != nil {
		t.Fatal(err)
	}
	if _, err := m.Release(ctx, key, other.Token); err != nil {
		t.Fatal(err)
	}
	err = <-done
	if code := locks.ErrorCode(err); code != locks.CodeUnavailable {
		t.Fatalf("got %v (%q), want %q: the grant may still be held", err, code, locks.CodeUnavailable)
	}
	if _, err := m.Inspect(ctx, key); err != nil {
		t.Fatalf("got %v, want the lock still held by the grant whose release failed", err)
	}
}
