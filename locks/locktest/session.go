package locktest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/lockgate/lockgate/locks"
)

// RunSessions runs the session cases (locks.Sessions) on backends that
// newBackend makes with a history of HistoryLen events and the default
// cap of grants per session.
func RunSessions(t *testing.T, newBackend func(t *testing.T) locks.Backend) {
	for _, tc := range []struct {
		name string
		test func(t *testing.T, b locks.Backend)
	}{
		{"OpenAnswersAnIDDerivedFromTheToken", testSessionOpen},
		{"LeaseEndFreesEveryHoldWithinASecond", testSessionLeaseEnds},
		{"EndReleasesEveryHoldAndSaysWhy", testSessionEnd},
		{"OneKeepAliveRenewsFiftyHolds", testSessionKeepFifty},
		{"FencingTokensStayPerGrant", testSessionFencing},
		{"AHoldReleasedOnItsOwnIsGoneAtTheNextKeepAlive", testSessionHoldReleasedAlone},
		{"AnotherSubjectIsRefused", testSessionNotYours},
		{"ARefusedAcquireLeavesNothing", testSessionHeld},
		{"AWaiterInASessionGetsTheSessionsLease", testSessionWaiter},
		{"CapOfGrants", testSessionFull},
		{"AGrantNeverOutlivesItsSession", testSessionGrantBound},
		{"SessionsPerSubjectAreBounded", testSessionsPerSubject},
		{"ASubjectsLiveSessionsAreListed", testSessionsOf},
		{"AKeepAliveMovesTheSessionsEndInItsList", testSessionsOfKept},
		{"AKeepAliveStatesEachGrantsOwnLease", testSessionKeepBroken},
		{"AKilledAcquireLeavesNoPendingGrantPastItsDeadline", testSessionDeadPending},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tc.test(t, newBackend(t))
		})
	}
}

// sessionSubject is the subject the cases open their sessions as.
const sessionSubject = "iss#alice"

// MustOpenSession opens a session of sessionSubject or fails the test.
func MustOpenSession(t testing.TB, s locks.Sessions, ttl time.Duration) locks.Session {
	t.Helper()
	ss, err := s.OpenSession(context.Background(), sessionSubject, ttl)
	if err != nil {
		t.Fatalf("open session: %v", err)
	}
	return ss
}

// MustAcquireInSession acquires key in the session of token or fails the
// test.
func MustAcquireInSession(t testing.TB, s locks.Sessions, token string, key locks.Key, mode locks.Mode) locks.Grant {
	t.Helper()
	g, err := s.AcquireInSession(context.Background(), token, key, locks.AcquireRequest{Subject: sessionSubject, Owner: "job", Mode: mode})
	if err != nil {
		t.Fatalf("acquire %s in session: %v", key, err)
	}
	return g
}

func testSessionOpen(t *testing.T, b locks.Backend) {
	ss := MustOpenSession(t, b, time.Minute)
	if ss.ID != locks.SessionID(ss.Token) || ss.ID == "" || ss.Token == "" {
		t.Fatalf("got id %q for its token, want SessionID of the token", ss.ID)
	}
	if ss.TTL != time.Minute {
		t.Fatalf("got ttl %v, want 1m", ss.TTL)
	}
	if _, err := b.OpenSession(context.Background(), sessionSubject, 0); !errors.Is(err, locks.ErrInvalid) {
		t.Fatalf("open with ttl 0: got %v, want ErrInvalid", err)
	}
	info, err := b.DescribeSession(context.Background(), ss.Token, sessionSubject)
	if err != nil || len(info.Holds) != 0 || info.SessionTTL != time.Minute || info.TTL <= 0 {
		t.Fatalf("describe a new session: got %+v, %v", info, err)
	}
}

// testSessionLeaseEnds: a session's lease that runs out ends its holds
// within a second. The session lives 400 ms, and longer on a machine so
// busy that it ended before its three grants were taken ("join session
// ...: no live session", load 16, each call delivered twice): each try
// with a session and locks of its own.
func testSessionLeaseEnds(t *testing.T, b locks.Backend) {
	var ss locks.Session
	var keys []locks.Key
	var permit locks.Grant
	for try, short := range []time.Duration{400 * time.Millisecond, 2 * time.Second, 5 * time.Second} {
		ss = MustOpenSession(t, b, short)
		keys = []locks.Key{UniqueKey(t), UniqueKey(t), UniqueKey(t)}
		ctx := context.Background()
		_, err := b.AcquireInSession(ctx, ss.Token, keys[0], locks.AcquireRequest{Subject: sessionSubject, Owner: "job"})
		if err == nil {
			_, err = b.AcquireInSession(ctx, ss.Token, keys[1], locks.AcquireRequest{Subject: sessionSubject, Owner: "job", Mode: locks.Shared})
		}
		if err == nil {
			permit, err = b.AcquirePermitInSession(ctx, ss.Token, keys[2],
				locks.SemaphoreRequest{AcquireRequest: locks.AcquireRequest{Subject: sessionSubject}, Limit: 1})
		}
		if errors.Is(err, locks.ErrSessionEnded) && try < 2 {
			t.Logf("a session of %v ended before its grants were taken (a busy machine): again with a longer one", short)
			continue
		}
		if err != nil {
			t.Fatalf("acquire in session: %v", err)
		}
		break
	}
	if permit.TTL > ss.TTL {
		t.Fatalf("got a permit's lease of %v in a session of %v", permit.TTL, ss.TTL)
	}
	for _, key := range keys[:2] {
		WaitUntilFree(t, b, key)
	}
	for {
		if _, err := b.InspectSemaphore(context.Background(), keys[2]); errors.Is(err, locks.ErrNotHeld) {
			break
		}
		if time.Now().After(ss.ExpiresAt.Add(2 * time.Second)) {
			t.Fatal("the permit outlived its session by 2s")
		}
		time.Sleep(2 * time.Millisecond) // polling for an expiry
	}
	if late := time.Since(ss.ExpiresAt); late > time.Second {
		t.Fatalf("the holds ended %v after their session's lease, want within 1s", late)
	}
	if _, err := b.KeepSession(context.Background(), ss.Token, sessionSubject, 0); !errors.Is(err, locks.ErrSessionEnded) {
		t.Fatalf("keep a session whose lease ran out: got %v, want ErrSessionEnded", err)
	}
}

func testSessionEnd(t *testing.T, b locks.Backend) {
	ctx := context.Background()
	ss := MustOpenSession(t, b, time.Minute)
	keys := []locks.Key{UniqueKey(t), UniqueKey(t), UniqueKey(t)}
	grants := []locks.Grant{
		MustAcquireInSession(t, b, ss.Token, keys[0], locks.Exclusive),
		MustAcquireInSession(t, b, ss.Token, keys[1], locks.Shared),
	}
	if _, err := b.AcquirePermitInSession(ctx, ss.Token, keys[2],
		locks.SemaphoreRequest{AcquireRequest: locks.AcquireRequest{Subject: sessionSubject}, Limit: 2}); err != nil {
		t.Fatal(err)
	}
	ended, err := b.EndSession(ctx, ss.Token, sessionSubject)
	if err != nil {
		t.Fatalf("end session: %v", err)
	}
	if len(ended.Released) != 3 {
		t.Fatalf("end released %d holds, want 3: %+v", len(ended.Released), ended.Released)
	}
	for i, key := range keys[:2] {
		if _, err := b.Inspect(ctx, key); !errors.Is(err, locks.ErrNotHeld) {
			t.Fatalf("%s after the session's end: got %v, want ErrNotHeld", key, err)
		}
		events, err := b.History(ctx, key)
		if err != nil || len(events) == 0 {
			t.Fatalf("history of %s: %v, %v", key, events, err)
		}
		if e := events[0]; e.Kind != "released" || e.Session != ss.ID || e.FencingToken != grants[i].FencingToken {
			t.Fatalf("%s's last event: got %+v, want released by session %s", key, e, ss.ID)
		}
		// A session's grant is not renewed by its own token; a re-entry
		// says why it holds nothing.
		_, err = b.Reenter(ctx, key, grants[i].Token, time.Second, []locks.Mode{locks.Exclusive, locks.Shared}[i])
		wantReason(t, err, locks.ReasonReleased)
	}
	if _, err := b.InspectSemaphore(ctx, keys[2]); !errors.Is(err, locks.ErrNotHeld) {
		t.Fatalf("the permit after the session's end: got %v, want ErrNotHeld", err)
	}
	again, err := b.EndSession(ctx, ss.Token, sessionSubject)
	if err != nil || len(again.Released) != 0 {
		t.Fatalf("a repeated end: got %+v, %v, want nothing released, no error", again, err)
	}
	if _, err := b.KeepSession(ctx, ss.Token, sessionSubject, 0); !errors.Is(err, locks.ErrSessionEnded) {
		t.Fatalf("keep an ended session: got %v, want ErrSessionEnded", err)
	}
	if _, err := b.AcquireInSession(ctx, ss.Token, keys[0], locks.AcquireRequest{Subject: sessionSubject}); !errors.Is(err, locks.ErrSessionEnded) {
		t.Fatalf("acquire in an ended session: got %v, want ErrSessionEnded", err)
	}
	if _, err := b.Inspect(ctx, keys[0]); !errors.Is(err, locks.ErrNotHeld) {
		t.Fatalf("an acquire in an ended session left %s held: %v", keys[0], err)
	}
}

func testSessionKeepFifty(t *testing.T, b locks.Backend) {
	ctx := context.Background()
	// 20 s, not less: the fifty acquires must come within one session
	// lease (a 2 s one ran out at load 25, each call delivered twice),
	// and a lease renewed to a minute must still tell from one that was
	// not (at most 20 s).
	ss := MustOpenSession(t, b, 20*time.Second)
	keys := make([]locks.Key, 50)
	for i := range keys {
		keys[i] = UniqueKey(t)
		if g := MustAcquireInSession(t, b, ss.Token, keys[i], locks.Exclusive); g.TTL > 20*time.Second {
			t.Fatalf("got a lease of %v in a session of 20s", g.TTL)
		}
	}
	kept, err := b.KeepSession(ctx, ss.Token, sessionSubject, time.Minute)
	if err != nil {
		t.Fatalf("keep session: %v", err)
	}
	if len(kept.Renewed) != 50 || len(kept.Gone) != 0 || kept.TTL != time.Minute {
		t.Fatalf("keep renewed %d, found %d gone, ttl %v; want 50, 0, 1m", len(kept.Renewed), len(kept.Gone), kept.TTL)
	}
	for _, key := range keys {
		info, err := b.Inspect(ctx, key)
		if err != nil || info.TTL < 30*time.Second {
			t.Fatalf("%s after one keep-alive of 1m: got %+v, %v", key, info.Lease, err)
		}
	}
	// A keep-alive without a TTL gives the one last set.
	kept, err = b.KeepSession(ctx, ss.Token, sessionSubject, 0)
	if err != nil || kept.TTL != time.Minute {
		t.Fatalf("keep without a ttl: got %v, %v, want 1m", kept.TTL, err)
	}
}

func testSessionFencing(t *testing.T, b locks.Backend) {
	ss := MustOpenSession(t, b, time.Minute)
	key := UniqueKey(t)
	first := MustAcquireInSession(t, b, ss.Token, key, locks.Exclusive)
	other := MustAcquireInSession(t, b, ss.Token, UniqueKey(t), locks.Exclusive)
	if first.Token == other.Token || first.Token == ss.Token {
		t.Fatal("grants of one session share an owner token")
	}
	if _, err := b.EndSession(context.Background(), ss.Token, sessionSubject); err != nil {
		t.Fatal(err)
	}
	next := MustAcquireInSession(t, b, MustOpenSession(t, b, time.Minute).Token, key, locks.Exclusive)
	if next.FencingToken <= first.FencingToken {
		t.Fatalf("got fencing token %d after %d, want larger", next.FencingToken, first.FencingToken)
	}
}

func testSessionHoldReleasedAlone(t *testing.T, b locks.Backend) {
	ctx := context.Background()
	for _, mode := range []locks.Mode{locks.Exclusive, locks.Shared} {
		ss := MustOpenSession(t, b, time.Minute)
		key, kept := UniqueKey(t), UniqueKey(t)
		if mode == locks.Shared {
			// Another shared holder, outside the session: the lock stays held.
			MustAcquire(t, b, key, locks.AcquireRequest{TTL: time.Minute, Mode: locks.Shared})
		}
		g := MustAcquireInSession(t, b, ss.Token, key, mode)
		MustAcquireInSession(t, b, ss.Token, kept, locks.Exclusive)
		if _, err := b.Release(ctx, key, g.Token); err != nil {
			t.Fatalf("%s: release a session's hold with its own token: %v", mode, err)
		}
		k, err := b.KeepSession(ctx, ss.Token, sessionSubject, 0)
		if err != nil || len(k.Renewed) != 1 || len(k.Gone) != 1 || k.Gone[0].Key != key {
			t.Fatalf("%s: keep: got %+v, %v; want 1 renewed, %s gone", mode, k, err, key)
		}
		k, err = b.KeepSession(ctx, ss.Token, sessionSubject, 0)
		if err != nil || len(k.Renewed) != 1 || len(k.Gone) != 0 {
			t.Fatalf("%s: the next keep: got %+v, %v; want 1 renewed, none gone", mode, k, err)
		}
	}
	// A permit, the same.
	ss := MustOpenSession(t, b, time.Minute)
	sem, kept := UniqueKey(t), UniqueKey(t)
	p, err := b.AcquirePermitInSession(ctx, ss.Token, sem, locks.SemaphoreRequest{AcquireRequest: locks.AcquireRequest{Subject: sessionSubject}, Limit: 2})
	if err != nil {
		t.Fatal(err)
	}
	MustAcquireInSession(t, b, ss.Token, kept, locks.Exclusive)
	if _, err := b.ReleasePermit(ctx, sem, p.Token); err != nil {
		t.Fatalf("release a session's permit with its own token: %v", err)
	}
	k, err := b.KeepSession(ctx, ss.Token, sessionSubject, 0)
	if err != nil || len(k.Renewed) != 1 || len(k.Gone) != 1 || k.Gone[0].Key != sem {
		t.Fatalf("permit: keep: got %+v, %v; want 1 renewed, %s gone", k, err, sem)
	}
	k, err = b.KeepSession(ctx, ss.Token, sessionSubject, 0)
	if err != nil || len(k.Renewed) != 1 || len(k.Gone) != 0 {
		t.Fatalf("permit: the next keep: got %+v, %v; want 1 renewed, none gone", k, err)
	}
}

func testSessionNotYours(t *testing.T, b locks.Backend) {
	ctx := context.Background()
	ss := MustOpenSession(t, b, time.Minute)
	const mallory = "iss#mallory"
	_, err := b.KeepSession(ctx, ss.Token, mallory, 0)
	wantErr(t, err, locks.ErrSessionNotYours)
	_, err = b.EndSession(ctx, ss.Token, mallory)
	wantErr(t, err, locks.ErrSessionNotYours)
	_, err = b.AcquireInSession(ctx, ss.Token, UniqueKey(t), locks.AcquireRequest{Subject: mallory})
	wantErr(t, err, locks.ErrSessionNotYours)
	_, err = b.KeepSession(ctx, "not-a-session-token", sessionSubject, 0)
	wantErr(t, err, locks.ErrSessionEnded)
	if _, err := b.KeepSession(ctx, ss.Token, sessionSubject, 0); err != nil {
		t.Fatalf("the owner's keep after the others': %v", err)
	}
}

func testSessionHeld(t *testing.T, b locks.Backend) {
	ctx := context.Background()
	key := UniqueKey(t)
	MustAcquire(t, b, key, req(time.Minute))
	ss := MustOpenSession(t, b, time.Minute)
	_, err := b.AcquireInSession(ctx, ss.Token, key, locks.AcquireRequest{Subject: sessionSubject})
	wantErr(t, err, locks.ErrHeld)
	info, err := b.DescribeSession(ctx, ss.Token, sessionSubject)
	if err != nil || len(info.Holds) != 0 {
		t.Fatalf("a session after a refused acquire: got %+v, %v, want no holds", info, err)
	}
}

func testSessionWaiter(t *testing.T, b locks.Backend) {
	ctx := context.Background()
	key := UniqueKey(t)
	holder := MustAcquire(t, b, key, req(time.Minute))
	ss := MustOpenSession(t, b, 5*time.Second)
	got := make(chan Result, 1)
	go func() {
		g, err := b.AcquireInSession(ctx, ss.Token, key, locks.AcquireRequest{Subject: sessionSubject, Wait: 10 * time.Second})
		got <- Result{Grant: g, Err: err}
	}()
	WaitUntilQueued(t, b, key, 1)
	if _, err := b.KeepSession(ctx, ss.Token, sessionSubject, 2*time.Second); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Release(ctx, key, holder.Token); err != nil {
		t.Fatal(err)
	}
	r := <-got
	if r.Err != nil {
		t.Fatalf("the waiter in a session: %v", r.Err)
	}
	if r.Grant.TTL > 2*time.Second+100*time.Millisecond {
		t.Fatalf("the waiter's lease is %v, longer than its session's 2s", r.Grant.TTL)
	}
	if ended, err := b.EndSession(ctx, ss.Token, sessionSubject); err != nil || len(ended.Released) != 1 {
		t.Fatalf("end: got %+v, %v, want the waiter's grant released", ended, err)
	}
	if _, err := b.Inspect(ctx, key); !errors.Is(err, locks.ErrNotHeld) {
		t.Fatalf("after the end: got %v, want ErrNotHeld", err)
	}
}

func testSessionFull(t *testing.T, b locks.Backend) {
	ctx := context.Background()
	ss := MustOpenSession(t, b, time.Minute)
	for i := range locks.DefaultSessionMaxHolds {
		if _, err := b.AcquireInSession(ctx, ss.Token, UniqueKey(t), locks.AcquireRequest{Subject: sessionSubject}); err != nil {
			t.Fatalf("acquire %d: %v", i, err)
		}
	}
	key := UniqueKey(t)
	_, err := b.AcquireInSession(ctx, ss.Token, key, locks.AcquireRequest{Subject: sessionSubject})
	wantErr(t, err, locks.ErrSessionFull)
	if _, err := b.Inspect(ctx, key); !errors.Is(err, locks.ErrNotHeld) {
		t.Fatalf("a refused acquire left %s held: %v", key, err)
	}
	ended, err := b.EndSession(ctx, ss.Token, sessionSubject)
	if err != nil || len(ended.Released) != locks.DefaultSessionMaxHolds {
		t.Fatalf("end: got %d released, %v", len(ended.Released), err)
	}
}

// testSessionGrantBound: a session's grant takes the session's lease, and
// nothing its holder does with the grant's own token carries it past the
// session (#36, finding 1): a renew is refused, a re-entry takes a hold
// but no longer lease, and the session's end ends every hold, so that the
// lock is free and the end's answer lists it.
func testSessionGrantBound(t *testing.T, b locks.Backend) {
	ctx := context.Background()
	ss := MustOpenSession(t, b, time.Minute)
	key, sem := UniqueKey(t), UniqueKey(t)
	g := MustAcquireInSession(t, b, ss.Token, key, locks.Exclusive)
	if l, err := b.Renew(ctx, key, g.Token, time.Hour); !errors.Is(err, locks.ErrInvalid) {
		t.Fatalf("renew a session's grant for an hour: got %+v, %v, want ErrInvalid", l, err)
	}
	re, err := b.Reenter(ctx, key, g.Token, time.Hour, locks.Exclusive)
	if err != nil {
		t.Fatalf("re-enter a session's grant: %v", err)
	}
	if re.TTL > time.Minute || re.Holds != 2 {
		t.Fatalf("re-entry of a session's grant: got ttl %v, holds %d, want at most the session's minute, 2 holds", re.TTL, re.Holds)
	}
	if info, err := b.Inspect(ctx, key); err != nil || info.TTL > time.Minute {
		t.Fatalf("after the re-entry: got ttl %v (%v), want at most the session's minute", info.TTL, err)
	}
	p, err := b.AcquirePermitInSession(ctx, ss.Token, sem,
		locks.SemaphoreRequest{AcquireRequest: locks.AcquireRequest{Subject: sessionSubject}, Limit: 2})
	if err != nil {
		t.Fatal(err)
	}
	if l, err := b.RenewPermit(ctx, sem, p.Token, time.Hour); !errors.Is(err, locks.ErrInvalid) {
		t.Fatalf("renew a session's permit for an hour: got %+v, %v, want ErrInvalid", l, err)
	}
	ended, err := b.EndSession(ctx, ss.Token, sessionSubject)
	if err != nil {
		t.Fatalf("end session: %v", err)
	}
	if len(ended.Released) != 2 {
		t.Fatalf("end released %+v, want the lock and the permit", ended.Released)
	}
	if info, err := b.Inspect(ctx, key); !errors.Is(err, locks.ErrNotHeld) {
		t.Fatalf("the re-entered lock after its session's end: got %+v, %v, want ErrNotHeld", info, err)
	}
	if _, err := b.InspectSemaphore(ctx, sem); !errors.Is(err, locks.ErrNotHeld) {
		t.Fatalf("the permit after its session's end: got %v, want ErrNotHeld", err)
	}
}

// testSessionKeepBroken: a keep-alive answers each grant's own lease, so
// that one an administrator broke with a period is never told the
// session's longer lease (#36, finding 2).
func testSessionKeepBroken(t *testing.T, b locks.Backend) {
	ctx := context.Background()
	ss := MustOpenSession(t, b, time.Minute)
	broken, other := UniqueKey(t), UniqueKey(t)
	MustAcquireInSession(t, b, ss.Token, broken, locks.Exclusive)
	MustAcquireInSession(t, b, ss.Token, other, locks.Exclusive)
	const period = 1500 * time.Millisecond
	if _, err := b.Break(ctx, broken, "admin", period); err != nil {
		t.Fatalf("break: %v", err)
	}
	// At the latest; and Redis, which counts in whole ms, ends a key only
	// once its clock is past the key's expiry ms (keyIsExpired: now >
	// when), so a lease it states in ms lasts up to 1 ms more.
	breakEnd := time.Now().Add(period + time.Millisecond)
	kept, err := b.KeepSession(ctx, ss.Token, sessionSubject, 0)
	if err != nil {
		t.Fatalf("keep: %v", err)
	}
	if len(kept.Renewed) != 2 {
		t.Fatalf("keep renewed %+v, want both grants", kept.Renewed)
	}
	for _, h := range kept.Renewed {
		switch {
		case h.ExpiresAt.IsZero() || h.TTL <= 0:
			t.Errorf("keep-alive states no lease of %s: %+v", h.Key, h)
		case h.Key == broken && h.ExpiresAt.After(breakEnd):
			t.Errorf("keep-alive states %s, broken with a %v period, until %v: %v past the break's end",
				h.Key, period, h.ExpiresAt, h.ExpiresAt.Sub(breakEnd))
		case h.Key == other && h.TTL < time.Minute-10*time.Second:
			t.Errorf("keep-alive states %s, not broken, for %v, want the session's minute", h.Key, h.TTL)
		}
	}
}

// SessionStores is a backend whose session store a test can reach (each
// backend's export_test.go hands it out): a gateway killed during an
// acquire in a session leaves a Join that no Confirm nor Drop follows.
type SessionStores interface {
	SessionStore() locks.SessionStore
}

func sessionStoreOf(t testing.TB, b locks.Backend) locks.SessionStore {
	t.Helper()
	s, ok := b.(SessionStores)
	if !ok {
		t.Fatalf("%T does not hand out its session store (SessionStores)", b)
	}
	return s.SessionStore()
}

// joinPending does what an acquire in the session of token does before
// its grant: it notes a pending member, whose acquire may run for
// pendingFor.
func joinPending(t testing.TB, store locks.SessionStore, token string, pendingFor time.Duration) locks.SessionMember {
	t.Helper()
	c := locks.SessionCaller{ID: locks.SessionID(token), TokHash: locks.TokenHash(token), Subject: sessionSubject}
	m := locks.SessionMember{Nonce: locks.NewToken(), Hold: locks.SessionHold{Key: UniqueKey(t)}, Pending: true}
	if _, err := store.Join(context.Background(), c, m, locks.DefaultSessionMaxHolds, pendingFor); err != nil {
		t.Fatalf("join a pending member: %v", err)
	}
	return m
}

// clockSlack is how far the store's clock (Redis TIME) may be behind the
// test's.
const clockSlack = 20 * time.Millisecond

func testSessionDeadPending(t *testing.T, b locks.Backend) {
	ctx := context.Background()
	store := sessionStoreOf(t, b)
	ss := MustOpenSession(t, b, time.Minute)
	c := locks.SessionCaller{ID: ss.ID, TokHash: locks.TokenHash(ss.Token), Subject: sessionSubject}
	// The members' deadlines are one instant, so that they all fill the
	// session until then (a join that finds the session full forgets the
	// members past their deadline).
	deadline := time.Now().Add(200 * time.Millisecond)
	dead := make([]locks.SessionMember, locks.DefaultSessionMaxHolds)
	lastDeadline := deadline
	for i := range dead {
		pendingFor := max(time.Until(deadline), time.Millisecond)
		dead[i] = joinPending(t, store, ss.Token, pendingFor)
		if d := time.Now().Add(pendingFor); d.After(lastDeadline) { // joined late
			lastDeadline = d
		}
	}
	if time.Until(deadline) > clockSlack { // not on a machine too busy to fill it in time
		_, err := b.AcquireInSession(ctx, ss.Token, UniqueKey(t), locks.AcquireRequest{Subject: sessionSubject})
		wantErr(t, err, locks.ErrSessionFull)
	}
	for time.Until(lastDeadline) > -clockSlack {
		time.Sleep(time.Millisecond) // polling the clock past every member's deadline
	}
	info, err := b.DescribeSession(ctx, ss.Token, sessionSubject)
	if err != nil || len(info.Holds) != 0 {
		t.Fatalf("describe: got %d holds (%+v), %v; want none of the pending members past their deadline", len(info.Holds), first(info.Holds), err)
	}
	key := UniqueKey(t)
	if _, err := b.AcquireInSession(ctx, ss.Token, key, locks.AcquireRequest{Subject: sessionSubject}); err != nil {
		t.Fatalf("acquire in a session full of pending members past their deadline: got %v, want a grant", err)
	}
	info, err = b.DescribeSession(ctx, ss.Token, sessionSubject)
	if err != nil || len(info.Holds) != 1 || info.Holds[0].Key != key || info.Holds[0].Pending {
		t.Fatalf("describe: got %d holds (%+v), %v; want the one grant, none of the dead pending members", len(info.Holds), first(info.Holds), err)
	}

	// An acquire that ran past its deadline and got its grant after all
	// confirms it: the session must find it at its end.
	if _, err := store.Confirm(ctx, c, dead[0]); err != nil {
		t.Fatalf("confirm a member past its pending deadline: %v", err)
	}
	info, err = b.DescribeSession(ctx, ss.Token, sessionSubject)
	if err != nil || len(info.Holds) != 2 {
		t.Fatalf("describe after a late confirm: got %d holds, %v; want 2", len(info.Holds), err)
	}
	for _, h := range info.Holds {
		if h.Pending || (h.Key != key && h.Key != dead[0].Hold.Key) {
			t.Fatalf("describe after a late confirm: got %+v, want %s and %s granted", info.Holds, key, dead[0].Hold.Key)
		}
	}

	// Pending members within their deadline still count.
	for range locks.DefaultSessionMaxHolds - 2 {
		joinPending(t, store, ss.Token, time.Minute)
	}
	_, err = b.AcquireInSession(ctx, ss.Token, UniqueKey(t), locks.AcquireRequest{Subject: sessionSubject})
	wantErr(t, err, locks.ErrSessionFull)
}

func first[T any](s []T) []T { return s[:min(len(s), 1)] }

// testSessionsPerSubject: one subject holds at most the default bound of live
// sessions (#37, finding 6): the next is refused with ErrTooManySessions,
// and an ended session makes room. Another subject has its own share.
func testSessionsPerSubject(t *testing.T, b locks.Backend) {
	ctx := context.Background()
	subject := "iss#" + UniqueKey(t).Name
	var opened []locks.Session
	for range locks.DefaultSessionsPerSubject {
		ss, err := b.OpenSession(ctx, subject, time.Minute)
		if err != nil {
			t.Fatalf("session %d of %d: %v", len(opened)+1, locks.DefaultSessionsPerSubject, err)
		}
		opened = append(opened, ss)
	}
	if _, err := b.OpenSession(ctx, subject, time.Minute); !errors.Is(err, locks.ErrTooManySessions) {
		t.Fatalf("session %d of a subject bound to %d: got %v, want ErrTooManySessions", locks.DefaultSessionsPerSubject+1, locks.DefaultSessionsPerSubject, err)
	}
	if _, err := b.OpenSession(ctx, subject+"-other", time.Minute); err != nil {
		t.Fatalf("another subject's session: %v", err)
	}
	if _, err := b.KeepSession(ctx, opened[1].Token, subject, 0); err != nil {
		t.Fatalf("keep: %v", err)
	}
	if _, err := b.EndSession(ctx, opened[0].Token, subject); err != nil {
		t.Fatalf("end: %v", err)
	}
	if _, err := b.OpenSession(ctx, subject, time.Minute); err != nil {
		t.Fatalf("a session after one ended: %v", err)
	}
}

func testSessionsOf(t *testing.T, b locks.Backend) {
	ctx := context.Background()
	sl, ok := b.(locks.SessionLister)
	if !ok {
		t.Fatalf("%T does not implement locks.SessionLister", b)
	}
	subject := "iss#" + UniqueKey(t).Name
	if got, err := sl.SessionsOf(ctx, subject); err != nil || len(got) != 0 {
		t.Fatalf("sessions of a subject that opened none: got %+v, %v; want none", got, err)
	}
	short, err := b.OpenSession(ctx, subject, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	long, err := b.OpenSession(ctx, subject, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	ended, err := b.OpenSession(ctx, subject, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.EndSession(ctx, ended.Token, subject); err != nil {
		t.Fatal(err)
	}
	if _, err := b.OpenSession(ctx, subject+"-other", time.Minute); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	got, err := sl.SessionsOf(ctx, subject)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].ID != short.ID || got[1].ID != long.ID {
		t.Fatalf("sessions of the subject: got %+v; want %s then %s (soonest to end first), not the ended one nor another subject's", got, short.ID, long.ID)
	}
	// Each end is its lease's, from about now: never past it, and not far
	// before it (bounds, not a pace: a busy machine stays inside them).
	for i, ttl := range []time.Duration{time.Minute, time.Hour} {
		if e := got[i].ExpiresAt; e.After(time.Now().Add(ttl)) || e.Before(start.Add(ttl-30*time.Second)) {
			t.Errorf("session %s ends at %v; want about %v from %v", got[i].ID, e, ttl, start)
		}
	}
}

// testSessionsOfKept: a keep-alive with a longer TTL moves the session's
// end in its subject's list (and in the count that bounds the subject's
// sessions, which the list reads), whether the keep-alive moves it in a
// call of its own or in the session's.
func testSessionsOfKept(t *testing.T, b locks.Backend) {
	ctx := context.Background()
	sl := b.(locks.SessionLister)
	subject := "iss#" + UniqueKey(t).Name
	ss, err := b.OpenSession(ctx, subject, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if _, err := b.KeepSession(ctx, ss.Token, subject, time.Hour); err != nil {
		t.Fatal(err)
	}
	got, err := sl.SessionsOf(ctx, subject)
	if err != nil || len(got) != 1 || got[0].ID != ss.ID {
		t.Fatalf("sessions of the subject: got %+v, %v; want %s", got, err, ss.ID)
	}
	// Bounds, not a pace: a busy machine stays inside them.
	if e := got[0].ExpiresAt; e.After(time.Now().Add(time.Hour)) || e.Before(start.Add(time.Hour-30*time.Second)) {
		t.Errorf("after a keep-alive of an hour, the session ends at %v in its list; want about an hour from %v", e, start)
	}
}
