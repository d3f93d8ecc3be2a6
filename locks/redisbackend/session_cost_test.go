package redisbackend_test

import (
	"errors"
	"testing"
	"time"

	"github.com/lockgate/lockgate/internal/redistest"
	"github.com/lockgate/lockgate/locks"
	"github.com/lockgate/lockgate/locks/locktest"
	"github.com/lockgate/lockgate/locks/redisbackend"
)

// TestRedisSessionCycleIsThreeCalls: on a single Redis, a lock taken in a
// session, released by its own token, and the keep-alive after that cost
// three script calls: the acquire joins the session and confirms its
// member in its own call (lua/session_acquire.lua); the release marks
// the member released, so that the keep-alive lists it gone without a
// renewal that is refused, and forgets it without a call of its own; and
// the keep-alive moves the subject's count of sessions itself. (Each step
// a call of its own: join, acquire, confirm, release, keep-alive, the
// count, a refused renewal and the drop, eight.)
func TestRedisSessionCycleIsThreeCalls(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	admin := srv.Client(t)
	for _, kind := range []string{"exclusive", "shared", "permit"} {
		t.Run(kind, func(t *testing.T) {
			l, ss := openSession(t, srv)
			key := locktest.UniqueKey(t)
			take := func() error {
				if kind == "permit" {
					p, err := l.AcquirePermitInSession(t.Context(), ss.Token, key, locks.SemaphoreRequest{AcquireRequest: locks.AcquireRequest{Subject: "s"}, Limit: 2})
					if err == nil {
						_, err = l.ReleasePermit(t.Context(), key, p.Token)
					}
					return err
				}
				mode := locks.Exclusive
				if kind == "shared" {
					mode = locks.Shared
				}
				g, err := l.AcquireInSession(t.Context(), ss.Token, key, locks.AcquireRequest{Subject: "s", Mode: mode})
				if err == nil {
					_, err = l.Release(t.Context(), key, g.Token)
				}
				return err
			}
			cycle := func() locks.SessionKept {
				t.Helper()
				if err := take(); err != nil {
					t.Fatalf("take and release in the session: %v", err)
				}
				k, err := l.KeepSession(t.Context(), ss.Token, "s", 0)
				if err != nil {
					t.Fatalf("keep-alive: %v", err)
				}
				return k
			}
			cycle() // the functions loaded, the name in the index
			// One Redis for both modes, one mode at a time: the counts are
			// this subtest's.
			if err := admin.ConfigResetStat(t.Context()).Err(); err != nil {
				t.Fatal(err)
			}
			k := cycle()
			if got := commandCounts(t, admin)["fcall"]; got != 3 {
				t.Errorf("a session's cycle: got %d script calls, want 3 (acquire in the session, release, keep-alive)", got)
			}
			if len(k.Renewed) != 0 || len(k.Gone) != 1 || k.Gone[0].Key != key {
				t.Errorf("the keep-alive after the release: got %+v, want %s gone and nothing renewed", k, key)
			}
			if k, err := l.KeepSession(t.Context(), ss.Token, "s", 0); err != nil || len(k.Gone) != 0 || len(k.Renewed) != 0 {
				t.Errorf("the next keep-alive: got %+v, %v; want the member forgotten", k, err)
			}
		})
	}
}

// TestRedisReleaseMakesNoSessionAnew: the release of a session's grant
// marks its member released only in a session that still has it. With the
// session's record gone (lost, or ended and expired) while its grant is
// still held, the release writes nothing there: one HSET would make the
// record anew, with no lease, and it would stay for good.
func TestRedisReleaseMakesNoSessionAnew(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	admin := srv.Client(t)
	l, ss := openSession(t, srv)
	key := locktest.UniqueKey(t)
	g, err := l.AcquireInSession(t.Context(), ss.Token, key, locks.AcquireRequest{Subject: "s"})
	if err != nil {
		t.Fatal(err)
	}
	session := "lockgate:session:{" + ss.ID + "}"
	if n, err := admin.Del(t.Context(), session).Result(); err != nil || n != 1 {
		t.Fatalf("DEL %s: %d, %v; want the session's record deleted", session, n, err)
	}
	if _, err := l.Release(t.Context(), key, g.Token); err != nil {
		t.Fatalf("release: %v", err)
	}
	if n, err := admin.Exists(t.Context(), session).Result(); err != nil || n != 0 {
		t.Errorf("after the release: %s exists (%d, %v), want it gone", session, n, err)
	}
}

// openSession opens a backend on srv, and a session of subject "s" for a
// minute in it.
func openSession(t *testing.T, srv *redistest.Server) (*redisbackend.Backend, locks.Session) {
	t.Helper()
	l := newRedis(t, srv, redisbackend.Options{})
	ss, err := l.OpenSession(t.Context(), "s", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	return l, ss
}

// TestRedisSessionOpenAndEndAreOneCallEach: on a single Redis, opening a
// session counts it among its subject's live sessions in the same call,
// and ending it stops counting it there too (lua/session_open.lua,
// lua/session_end.lua): one script call each, where the count took one
// more. The bound holds all the same: past it an open is refused and makes
// no session, and an end makes room.
func TestRedisSessionOpenAndEndAreOneCallEach(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	admin := srv.Client(t)
	l := newRedis(t, srv, redisbackend.Options{SessionsPerSubject: 2})
	if _, err := l.OpenSession(t.Context(), "warm", time.Minute); err != nil { // the functions loaded
		t.Fatal(err)
	}
	if err := admin.ConfigResetStat(t.Context()).Err(); err != nil {
		t.Fatal(err)
	}
	first, err := l.OpenSession(t.Context(), "s", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if got := commandCounts(t, admin)["fcall"]; got != 1 {
		t.Errorf("open a session: got %d script calls, want 1", got)
	}
	if _, err := l.OpenSession(t.Context(), "s", time.Minute); err != nil {
		t.Fatal(err)
	}
	// The sessions' records (a call's record, which the refusal keeps as
	// every call of session_open does, ends in ":c:<call id>").
	sessions := func() int { return len(admin.Keys(t.Context(), "lockgate:session:{*}").Val()) }
	before := sessions()
	if _, err := l.OpenSession(t.Context(), "s", time.Minute); !errors.Is(err, locks.ErrTooManySessions) {
		t.Fatalf("a third session of a subject bounded to 2: got %v, want ErrTooManySessions", err)
	}
	if got := sessions(); got != before {
		t.Fatalf("the refused open left %d sessions, where there were %d", got, before)
	}
	if err := admin.ConfigResetStat(t.Context()).Err(); err != nil {
		t.Fatal(err)
	}
	if _, err := l.EndSession(t.Context(), first.Token, "s"); err != nil {
		t.Fatal(err)
	}
	if got := commandCounts(t, admin)["fcall"]; got != 1 {
		t.Errorf("end a session that holds nothing: got %d script calls, want 1", got)
	}
	if _, err := l.OpenSession(t.Context(), "s", time.Minute); err != nil {
		t.Fatalf("after an end made room: %v", err)
	}
}
