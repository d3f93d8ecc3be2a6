package redisbackend_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/lockgate/lockgate/internal/redistest"
	"github.com/lockgate/lockgate/locks"
	"github.com/lockgate/lockgate/locks/locktest"
	"github.com/lockgate/lockgate/locks/redisbackend"
	"github.com/lockgate/lockgate/lua"
)

// TestScriptsAreAcked: every path that answers a grant passes the one
// replica barrier. r asks for a replica that Redis does not have, so every
// WAIT counts 0; s, on the same keys, asks for none and sets the scene. For
// each script whose reply can tell of a grant (lua.Script.Acked) a case
// drives the engine down the path that answers it, and the call must fail
// with a ReplicaError and hand out nothing. A script marked Acked with no
// case here fails the test: a new grant path is not done until it is
// listed.
func TestScriptsAreAcked(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	r := openRedis(t, newClient(t, srv), redisbackend.Options{MinReplicas: 1, ReplicaTimeout: 20 * time.Millisecond})
	s := openRedis(t, newClient(t, srv), redisbackend.Options{})
	t.Cleanup(func() { r.Close(); s.Close() })
	s.PretendCluster() // its hand-offs to an unserved waiter stay (see QueueUnserved)
	ctx := context.Background()
	req := locks.AcquireRequest{TTL: time.Minute, Subject: "tester"}
	permit := locks.SemaphoreRequest{AcquireRequest: req, Limit: 1}

	cases := map[string]func(t *testing.T, key locks.Key) error{
		"acquire": func(t *testing.T, key locks.Key) error {
			_, err := r.Acquire(ctx, key, req)
			return err
		},
		"set_acquire": func(t *testing.T, key locks.Key) error { // every lock of a set, none kept
			other := locktest.UniqueKey(t)
			_, err := r.AcquireSet(ctx, []locks.Key{key, other}, req)
			locktest.WaitUntilFree(t, s, key)
			locktest.WaitUntilFree(t, s, other)
			return err
		},
		"leave": func(t *testing.T, key locks.Key) error {
			g := locktest.MustAcquire(t, s, key, req)
			id, token, err := s.QueueUnserved(ctx, key, 0)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := s.Release(ctx, key, g.Token); err != nil { // hands the lock to the unserved waiter
				t.Fatal(err)
			}
			return r.LeaveAndPickUp(ctx, key, 0, id, token)
		},
		"release": func(t *testing.T, key locks.Key) error { // hands the lock in full to r's own waiter
			g := locktest.MustAcquire(t, s, key, req)
			got := make(chan error, 1)
			go func() {
				_, err := r.Acquire(ctx, key, locks.AcquireRequest{TTL: time.Minute, Wait: time.Minute})
				got <- err
			}()
			waitQueued(t, r, key, 1)
			if _, err := r.Release(ctx, key, g.Token); err != nil {
				t.Fatal(err)
			}
			return <-got
		},
		"break": func(t *testing.T, key locks.Key) error { // hands the lock in full to r's own waiter
			locktest.MustAcquire(t, s, key, req)
			got := make(chan error, 1)
			go func() {
				_, err := r.Acquire(ctx, key, locks.AcquireRequest{TTL: time.Minute, Wait: time.Minute})
				got <- err
			}()
			waitQueued(t, r, key, 1)
			if _, err := r.Break(ctx, key, "admin", 0); err != nil {
				t.Fatal(err)
			}
			return <-got
		},
		"reenter": func(t *testing.T, key locks.Key) error {
			g := locktest.MustAcquire(t, s, key, req)
			_, err := r.Reenter(ctx, key, g.Token, time.Minute, locks.Exclusive)
			if info, ierr := s.Inspect(ctx, key); ierr != nil || info.Holds != 1 {
				t.Errorf("after the refused re-entry: %+v, %v; want the one hold", info, ierr)
			}
			s.Release(ctx, key, g.Token)
			return err
		},
		"renew": func(t *testing.T, key locks.Key) error {
			g := locktest.MustAcquire(t, s, key, req)
			defer s.Release(ctx, key, g.Token)
			_, err := r.Renew(ctx, key, g.Token, 0)
			return err
		},
		"ticket": func(t *testing.T, key locks.Key) error {
			_, err := r.OpenTicket(ctx, key, locks.AcquireRequest{TTL: time.Minute, Wait: time.Minute})
			return err
		},
		"sem_acquire": func(t *testing.T, key locks.Key) error {
			_, err := r.AcquirePermit(ctx, key, permit)
			return err
		},
		"sem_leave": func(t *testing.T, key locks.Key) error {
			p, err := s.AcquirePermit(ctx, key, permit)
			if err != nil {
				t.Fatal(err)
			}
			id, token, err := s.QueueUnserved(ctx, key, 1)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := s.ReleasePermit(ctx, key, p.Token); err != nil {
				t.Fatal(err)
			}
			return r.LeaveAndPickUp(ctx, key, 1, id, token)
		},
		"sem_renew": func(t *testing.T, key locks.Key) error {
			p, err := s.AcquirePermit(ctx, key, permit)
			if err != nil {
				t.Fatal(err)
			}
			defer s.ReleasePermit(ctx, key, p.Token)
			_, err = r.RenewPermit(ctx, key, p.Token, 0)
			return err
		},
		"sem_resize": func(t *testing.T, key locks.Key) error { // raises the limit, handing a permit to the waiter
			p, err := s.AcquirePermit(ctx, key, permit)
			if err != nil {
				t.Fatal(err)
			}
			defer s.ReleasePermit(ctx, key, p.Token)
			if _, _, err := s.QueueUnserved(ctx, key, 1); err != nil {
				t.Fatal(err)
			}
			_, err = r.ResizeSemaphore(ctx, key, 2)
			var re *locks.ReplicaError
			if errors.As(err, &re) && !re.Resize {
				t.Errorf("got %+v, want a resize's ReplicaError", *re)
			}
			return err
		},
		"session_open": func(t *testing.T, _ locks.Key) error { // answers the session's lease
			_, err := r.OpenSession(ctx, "tester", time.Minute)
			return err
		},
		"session_keep": func(t *testing.T, _ locks.Key) error { // answers the session's new lease
			ss, err := s.OpenSession(ctx, "tester", time.Minute)
			if err != nil {
				t.Fatal(err)
			}
			_, err = r.KeepSession(ctx, ss.Token, "tester", 0)
			return err
		},
		"session_acquire": func(t *testing.T, key locks.Key) error { // a lock taken in a session in one call
			ss, err := s.OpenSession(ctx, "tester", time.Minute)
			if err != nil {
				t.Fatal(err)
			}
			_, err = r.AcquireInSession(ctx, ss.Token, key, locks.AcquireRequest{Subject: "tester"})
			locktest.WaitUntilFree(t, s, key) // given back
			return err
		},
		"session_sem_acquire": func(t *testing.T, key locks.Key) error { // a permit taken in a session in one call
			ss, err := s.OpenSession(ctx, "tester", time.Minute)
			if err != nil {
				t.Fatal(err)
			}
			_, err = r.AcquirePermitInSession(ctx, ss.Token, key, locks.SemaphoreRequest{AcquireRequest: locks.AcquireRequest{Subject: "tester"}, Limit: 1})
			return err
		},
		"idem_begin": func(t *testing.T, key locks.Key) error { // a replay of a live grant
			g, err := s.AcquireOnce(ctx, key, req, "replayed-"+key.Name)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Release(ctx, key, g.Token)
			_, err = r.AcquireOnce(ctx, key, req, "replayed-"+key.Name)
			return err
		},
	}
	for _, script := range lua.Scripts() {
		if !script.Acked {
			if _, ok := cases[script.Name]; ok {
				t.Errorf("%s is not marked Acked, yet has a case here", script.Name)
			}
			continue
		}
		t.Run(script.Name, func(t *testing.T) {
			run, ok := cases[script.Name]
			if !ok {
				t.Fatalf("%s can answer a grant (Acked) and has no case here: add the path that answers it", script.Name)
			}
			key := locktest.UniqueKey(t)
			err := run(t, key)
			var re *locks.ReplicaError
			if !errors.As(err, &re) || !errors.Is(err, locks.ErrUnavailable) {
				t.Fatalf("got %v, want a ReplicaError (0 of 1 replicas acknowledged)", err)
			}
		})
	}
}
