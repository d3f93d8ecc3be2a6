package locks

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"
)

// Sessions is what every backend offers for grants that share one lease:
// a session, opened with a TTL, answers a token; every grant acquired in
// it (a lock's hold, exclusive or shared, or a semaphore's permit) takes
// the session's lease instead of one of its own. One KeepSession renews
// them all; EndSession releases them all, each atomically on its own
// lock, and a session whose lease ran out has its grants' leases run out
// with it, so nothing is left to reap. Fencing tokens stay per grant.
//
// A session belongs to the subject that opened it: another subject that
// shows its token gets ErrSessionNotYours. A session that ended, by
// EndSession or its lease, gets ErrSessionEnded, as does one that never
// was. The session's token is the only way to keep or end it; the backend
// keeps its SHA-256 only, and the session's id is derived from that.
type Sessions interface {
	// OpenSession opens a session of subject with a lease of ttl (at
	// least 1 ms).
	OpenSession(ctx context.Context, subject string, ttl time.Duration) (Session, error)
	// KeepSession renews the session of token: its lease, and that of
	// every grant acquired in it, becomes ttl from now (0: the session's
	// TTL as last set). Grants that ended meanwhile (released on their
	// own, broken) are listed as gone, and the session forgets them.
	KeepSession(ctx context.Context, token, subject string, ttl time.Duration) (SessionKept, error)
	// EndSession ends the session of token and releases every grant of
	// it, each with one release of its own lock, atomic there: a lock's
	// history records the release with the session's id. A repeated end
	// within RecordTTL succeeds again, and releases nothing.
	EndSession(ctx context.Context, token, subject string) (SessionEnded, error)
	// DescribeSession tells the session's lease and what it holds.
	DescribeSession(ctx context.Context, token, subject string) (SessionInfo, error)
	// AcquireInSession is Acquire with the session's lease: req.TTL is
	// ignored. A session at its most grants (see SessionMaxHolds) gets
	// ErrSessionFull and acquires nothing.
	AcquireInSession(ctx context.Context, token string, key Key, req AcquireRequest) (Grant, error)
	// AcquirePermitInSession is AcquirePermit with the session's lease.
	AcquirePermitInSession(ctx context.Context, token string, key Key, req SemaphoreRequest) (Grant, error)
}

// DefaultSessionMaxHolds is how many grants one session may hold at once,
// unless the backend's options say otherwise: it bounds the work of one
// KeepSession or EndSession.
const DefaultSessionMaxHolds = 100

// Session is an open session.
type Session struct {
	// ID names the session; it is derived from the token, one way.
	ID string
	// Token is the session token: the only way to keep, end or join it.
	Token string
	Lease
}

// SessionHold is one grant of a session: a lock's hold or a semaphore's
// permit. It never carries the grant's owner token.
type SessionHold struct {
	// Semaphore is set for a permit; else it is a lock's hold.
	Semaphore bool
	Key       Key
	// FencingToken is the grant's, when the call learnt it (a renewal).
	FencingToken int64
	// TTL and ExpiresAt are the grant's own lease, when the call learnt it
	// (a renewal): never later than the backend's. It is the session's,
	// unless something shortened it (a break's period, see Breaker).
	TTL       time.Duration
	ExpiresAt time.Time
	// Pending is set for a grant whose acquire still runs.
	Pending bool
}

// SessionKept is what a KeepSession did.
type SessionKept struct {
	Lease
	// Renewed are the grants whose leases were renewed; Gone those that
	// had ended.
	Renewed, Gone []SessionHold
}

// SessionEnded is what an EndSession did.
type SessionEnded struct {
	// Released are the grants it released.
	Released []SessionHold
}

// SessionInfo describes a live session.
type SessionInfo struct {
	Lease
	// SessionTTL is the lease a KeepSession without a TTL gives.
	SessionTTL time.Duration
	Holds      []SessionHold
}

// SessionID is the id of the session of token, as OpenSession made it.
func SessionID(token string) string { return TokenHash("session:" + token)[:22] }

// memberToken is the owner token of the grant nonce names in the session
// of token: whoever shows the session's token can renew and release it,
// and no owner token is kept anywhere. It starts with sessionGrantMark,
// which no other owner token has (they are base64url alone), so that a
// backend knows a session's grant by its token (IsSessionGrant); a token
// with the mark taken off is another token, which holds nothing.
func memberToken(token, nonce string) string {
	return sessionGrantMark + derivedToken(token, nonce)
}

// derivedToken is the owner token that the holder of token has for nonce:
// a lock set's locks have theirs (see setOwner), a session's grants theirs.
func derivedToken(token, nonce string) string {
	mac := hmac.New(sha256.New, []byte(token))
	mac.Write([]byte(nonce))
	return base64.RawURLEncoding.EncodeToString(mac.Sum(nil)[:16])
}

// sessionGrantMark starts the owner token of every session's grant.
const sessionGrantMark = "s."

// IsSessionGrant reports whether token is the owner token of a session's
// grant. Such a grant takes its session's lease, and only the session moves
// it (SessionEngine.KeepSession): a backend refuses to renew it by its own
// token (ErrSessionGrantRenew), and takes a re-entry of it without a
// longer lease, so that nothing carries it past its session.
func IsSessionGrant(token string) bool { return strings.HasPrefix(token, sessionGrantMark) }

// ErrSessionGrantRenew refuses to renew a session's grant by its own token:
// keeping the session alive renews it.
var ErrSessionGrantRenew = fmt.Errorf("%w: a session's grant takes its session's lease: keep the session alive instead of renewing the grant", ErrInvalid)

// SessionMember is what a session keeps of one of its grants: its kind,
// key, and whether its acquire still runs. encode is the form the stores
// keep: 'l' or 's', then "ns/name".
type SessionMember struct {
	Nonce   string
	Hold    SessionHold
	Pending bool
	// Released: its holder released the grant (on its own), and the
	// store forgot the member as it listed it (SessionStore.Keep).
	Released bool
}

func EncodeHold(h SessionHold) string {
	kind := "l"
	if h.Semaphore {
		kind = "s"
	}
	return kind + h.Key.String()
}

func DecodeHold(s string) (SessionHold, bool) {
	if len(s) < 2 {
		return SessionHold{}, false
	}
	ns, name, ok := strings.Cut(s[1:], "/")
	return SessionHold{Semaphore: s[0] == 's', Key: Key{Namespace: ns, Name: name}}, ok
}

// SessionCaller is who calls: the hash of the session token shown, and
// the subject.
type SessionCaller struct {
	ID, TokHash, Subject string
}

func callerOf(token, subject string) SessionCaller {
	return SessionCaller{ID: SessionID(token), TokHash: TokenHash(token), Subject: subject}
}

// SessionStore keeps sessions: one per backend, each step atomic in it.
// Every step but open checks the caller (ErrSessionEnded,
// ErrSessionNotYours).
type SessionStore interface {
	Open(ctx context.Context, c SessionCaller, ttl time.Duration) error
	// Join adds a pending member unless the session has maxHolds, and
	// returns what is left of the session's lease. The member is pending
	// for pendingFor at most: an acquire that has not confirmed it by then
	// is taken for one whose gateway died. Such a member no longer counts
	// against maxHolds, and the next Join that finds the session full, or
	// Keep, forgets it; Describe no longer lists it.
	Join(ctx context.Context, c SessionCaller, m SessionMember, maxHolds int, pendingFor time.Duration) (time.Duration, error)
	// Confirm marks a member granted (adding it again if it was dropped,
	// or forgotten past its pending deadline: its grant exists now, and
	// the session's end must find it) and returns what is left of the
	// lease.
	Confirm(ctx context.Context, c SessionCaller, m SessionMember) (time.Duration, error)
	// Keep sets the lease to ttl (0: the TTL as last set) and returns it,
	// with the granted members, and those it knows were released (which it
	// forgets as it lists them); it forgets pending ones past their
	// deadline.
	Keep(ctx context.Context, c SessionCaller, ttl time.Duration) (time.Duration, []SessionMember, error)
	// Drop forgets members of a live session, by nonce.
	Drop(ctx context.Context, c SessionCaller, nonces []string) error
	// End ends the session and returns every member; a session ended
	// already returns none.
	End(ctx context.Context, c SessionCaller) ([]SessionMember, error)
	// Describe returns what is left of the lease, the TTL as last set,
	// and every member but pending ones past their deadline.
	Describe(ctx context.Context, c SessionCaller) (left, ttl time.Duration, ms []SessionMember, err error)
}

// sessionGrants are the backend's own grants, as the sessions use them.
type sessionGrants interface {
	Locker
	Semaphores
	// ReleaseEnded ends a member's grant, every hold of it, at its
	// session's end; the lock's history says which session ended.
	ReleaseEnded(ctx context.Context, h SessionHold, token, sessionID string) (Released, error)
	// RenewMember renews a member's grant for its session, which its own
	// token may not (see IsSessionGrant).
	RenewMember(ctx context.Context, h SessionHold, token string, ttl time.Duration) (Lease, error)
}

// SessionAcquirer takes a lock (or a permit) in a session in one step: it joins the
// session, acquires and confirms at once, for an acquire that does not
// wait and has no hard cap. The grant's lease is what is left of the
// session's, and the grant and its member exist together or not at all
// (with SessionStore, a member is pending between its join and its
// confirm). m is the member, owner its grant's token; req.TTL is not used.
// The Redis backend is one on a single Redis, where a session and its
// locks live together (lua/session_acquire.lua).
type SessionAcquirer interface {
	AcquireInSessionAtOnce(ctx context.Context, c SessionCaller, m SessionMember, maxHolds int, owner string, req AcquireRequest) (Grant, error)
	AcquirePermitInSessionAtOnce(ctx context.Context, c SessionCaller, m SessionMember, maxHolds int, owner string, req SemaphoreRequest) (Grant, error)
}

// SessionEngine is the one implementation of Sessions, on a backend's store
// and grants.
type SessionEngine struct {
	Store    SessionStore
	Grants   sessionGrants
	MaxHolds int
	// AtOnce, when set, takes the locks of acquires that neither wait
	// nor have a hard cap in one step (see SessionAcquirer); nil: every
	// acquire joins, acquires and confirms, three calls.
	AtOnce SessionAcquirer
	// StoreCounts: the Store's Open, Keep and End move the session in the
	// Counter too, in their own call (the Redis backend on a single
	// Redis): its Open adds it, up to MaxPerSubject (ErrTooManySessions
	// past it), its Keep moves its end, its End removes it, and the
	// engine makes no call of the Counter's for them.
	StoreCounts bool
	// Counter counts each subject's live sessions, and MaxPerSubject is
	// how many one subject may hold at once (ErrTooManySessions past it);
	// without a Counter, or with MaxPerSubject 0, they are not bounded.
	Counter       SessionCounter
	MaxPerSubject int
	// PendingSlack is how much longer than its wait an acquire in a
	// session may run, the backend's calls around the wait included: its
	// member is pending that long at most (see SessionStore.Join).
	// Default DefaultPendingSlack.
	PendingSlack time.Duration
}

// SessionCounter counts each subject's live sessions, for
// SessionEngine.MaxPerSubject: a record per subject, apart from the
// sessions' own (on Cluster, on another slot), which opening a session,
// keeping it alive and ending it each move with one call more (but a
// store that moves it itself: SessionEngine.StoreCounts). Each
// method is idempotent: a call delivered twice counts once.
type SessionCounter interface {
	// Add counts session id of subject, live until ttl from now, unless
	// the subject has max live sessions (ErrTooManySessions). Sessions
	// whose lease ended unended stop counting then.
	Add(ctx context.Context, subject, id string, ttl time.Duration, max int) error
	// Extend moves the end of a counted session to ttl from now.
	Extend(ctx context.Context, subject, id string, ttl time.Duration) error
	// Remove stops counting id.
	Remove(ctx context.Context, subject, id string) error
	// Live lists the subject's counted sessions whose lease has not ended.
	Live(ctx context.Context, subject string) ([]SessionSummary, error)
}

// SessionSummary is one live session of a subject, as SessionLister
// tells it: never its token.
type SessionSummary struct {
	ID        string
	ExpiresAt time.Time
}

// SessionLister lists a subject's live sessions (for the dashboard, which
// shows a viewer its own). Both backends offer it, through SessionEngine.
type SessionLister interface {
	SessionsOf(ctx context.Context, subject string) ([]SessionSummary, error)
}

var _ SessionLister = (*SessionEngine)(nil)

// SessionsOf implements SessionLister: the sessions the engine's Counter
// counts for subject, soonest to end first; none without a Counter.
func (s *SessionEngine) SessionsOf(ctx context.Context, subject string) ([]SessionSummary, error) {
	if s.Counter == nil || s.MaxPerSubject <= 0 {
		return []SessionSummary{}, nil
	}
	out, err := s.Counter.Live(ctx, subject)
	if err != nil {
		return nil, err
	}
	slices.SortFunc(out, func(a, b SessionSummary) int {
		if c := a.ExpiresAt.Compare(b.ExpiresAt); c != 0 {
			return c
		}
		return strings.Compare(a.ID, b.ID)
	})
	return out, nil
}

// DefaultSessionsPerSubject is how many live sessions one subject may
// hold, unless the backend's options say otherwise: a few per worker of a
// caller, and at about 430 bytes of Redis each, 43 KB per caller at most.
const DefaultSessionsPerSubject = 100

// forget stops counting session id, even when ctx has ended: a count that
// stays counts against its subject until the session's lease would end.
func (s *SessionEngine) forget(ctx context.Context, subject, id string) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	s.Counter.Remove(ctx, subject, id)
}

// DefaultPendingSlack is SessionEngine.PendingSlack unless set.
const DefaultPendingSlack = 10 * time.Second

// leaseSlack is how much longer than its session's a grant's lease may
// be found after its acquire before it is brought back to the session's:
// about the round trips between the session's check and the grant.
const leaseSlack = 50 * time.Millisecond

// OpenSession implements Sessions.
func (s *SessionEngine) OpenSession(ctx context.Context, subject string, ttl time.Duration) (Session, error) {
	if ttl < time.Millisecond {
		return Session{}, fmt.Errorf("%w: ttl must be at least 1ms", ErrInvalid)
	}
	token := NewToken()
	start := time.Now()
	bounded := s.Counter != nil && s.MaxPerSubject > 0 && !s.StoreCounts
	if bounded {
		if err := s.Counter.Add(ctx, subject, SessionID(token), ttl, s.MaxPerSubject); err != nil {
			return Session{}, fmt.Errorf("open session: %w", err)
		}
	}
	if err := s.Store.Open(ctx, callerOf(token, subject), ttl); err != nil {
		if bounded {
			s.forget(ctx, subject, SessionID(token))
		}
		return Session{}, err
	}
	return Session{ID: SessionID(token), Token: token, Lease: Lease{TTL: ttl, ExpiresAt: start.Add(ttl)}}, nil
}

// AcquireInSession implements Sessions.
func (s *SessionEngine) AcquireInSession(ctx context.Context, token string, key Key, req AcquireRequest) (Grant, error) {
	req.TTL = time.Millisecond // checked below, set by the session
	if err := req.Validate(); err != nil {
		return Grant{}, err
	}
	if s.AtOnce != nil && req.Wait == 0 && req.MaxHold == 0 {
		// The member exists only with its grant, so nothing is pending, and
		// an outcome that is unknown leaves nothing to forget: a member
		// whose grant the backend gave back is dropped by the next
		// keep-alive, as a released one is.
		m := SessionMember{Nonce: NewToken(), Hold: SessionHold{Key: key}}
		return s.AtOnce.AcquireInSessionAtOnce(ctx, callerOf(token, req.Subject), m, s.MaxHolds, memberToken(token, m.Nonce), req)
	}
	return s.acquire(ctx, token, SessionHold{Key: key}, req.Subject, req.Wait, func(ttl time.Duration, owner string) (Grant, error) {
		req.TTL, req.OwnerToken = ttl, owner
		if req.MaxHold > 0 {
			// The session's lease may be longer than the cap: the grant's
			// first lease ends at the cap, as the keep-alives' renewals do.
			req.TTL = min(ttl, req.MaxHold)
		}
		return s.Grants.Acquire(ctx, key, req)
	})
}

// AcquirePermitInSession implements Sessions.
func (s *SessionEngine) AcquirePermitInSession(ctx context.Context, token string, key Key, req SemaphoreRequest) (Grant, error) {
	req.TTL = time.Millisecond
	if err := req.Validate(); err != nil {
		return Grant{}, err
	}
	if s.AtOnce != nil && req.Wait == 0 && req.MaxHold == 0 { // as AcquireInSession's
		m := SessionMember{Nonce: NewToken(), Hold: SessionHold{Semaphore: true, Key: key}}
		return s.AtOnce.AcquirePermitInSessionAtOnce(ctx, callerOf(token, req.Subject), m, s.MaxHolds, memberToken(token, m.Nonce), req)
	}
	return s.acquire(ctx, token, SessionHold{Semaphore: true, Key: key}, req.Subject, req.Wait, func(ttl time.Duration, owner string) (Grant, error) {
		req.TTL, req.OwnerToken = ttl, owner
		if req.MaxHold > 0 {
			req.TTL = min(ttl, req.MaxHold) // as a lock's (AcquireInSession)
		}
		return s.Grants.AcquirePermit(ctx, key, req)
	})
}

// acquire joins the session before the grant exists, so that an end of
// the session that runs meanwhile finds it; takes the grant with what is
// left of the session's lease; then checks that the session is still
// alive, and brings the grant's lease back to the session's when it is
// longer. A grant outlives its session by at most about leaseSlack. Its
// member is pending for wait and PendingSlack: one that a killed gateway
// left does not fill the session for good.
func (s *SessionEngine) acquire(ctx context.Context, token string, h SessionHold, subject string, wait time.Duration, grant func(ttl time.Duration, owner string) (Grant, error)) (Grant, error) {
	c := callerOf(token, subject)
	m := SessionMember{Nonce: NewToken(), Hold: h, Pending: true}
	forget := func() {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		s.Store.Drop(cctx, c, []string{m.Nonce})
	}
	slack := s.PendingSlack
	if slack <= 0 {
		slack = DefaultPendingSlack
	}
	left, err := s.Store.Join(ctx, c, m, s.MaxHolds, wait+slack)
	if err != nil {
		if errors.Is(err, ErrUnavailable) { // it may have been noted
			forget()
		}
		return Grant{}, err
	}
	owner := memberToken(token, m.Nonce)
	g, err := grant(max(left, time.Millisecond), owner)
	if errors.Is(err, ErrTookNothing) && s.ended(ctx, c) {
		// The session's end released the grant handed to this waiter
		// before its pick-up, which then took nothing: the session ended
		// (TestRedisSessionEndedBeforeThePickUp).
		return Grant{}, ErrSessionEnded
	}
	if err != nil {
		forget()
		return Grant{}, err
	}
	start := time.Now()
	left, err = s.Store.Confirm(ctx, c, m)
	if err == nil && g.ExpiresAt.After(start.Add(left+leaseSlack)) {
		var lease Lease
		if lease, err = s.renew(ctx, h, owner, max(left, time.Millisecond)); err == nil {
			g.Lease = lease
		}
	}
	if err != nil {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		rerr := s.release(cctx, h, owner)
		if !errors.Is(err, ErrSessionEnded) {
			forget()
		}
		if rerr != nil && !errors.Is(rerr, ErrNotHolder) {
			// The grant may be held until its lease ends: the outcome is
			// unknown, whatever made the acquire give it back.
			return Grant{}, fmt.Errorf("acquire %s in session %s: %v; giving the grant back: %w", h.Key, c.ID, err, rerr)
		}
		return Grant{}, fmt.Errorf("acquire %s in session %s: %w", h.Key, c.ID, err)
	}
	return g, nil
}

// ended says whether c's session has ended (or lapsed): false when the
// store does not answer.
func (s *SessionEngine) ended(ctx context.Context, c SessionCaller) bool {
	_, _, _, err := s.Store.Describe(ctx, c)
	return errors.Is(err, ErrSessionEnded)
}

func (s *SessionEngine) renew(ctx context.Context, h SessionHold, owner string, ttl time.Duration) (Lease, error) {
	return s.Grants.RenewMember(ctx, h, owner, ttl)
}

func (s *SessionEngine) release(ctx context.Context, h SessionHold, owner string) error {
	var err error
	if h.Semaphore {
		_, err = s.Grants.ReleasePermit(ctx, h.Key, owner)
	} else {
		_, err = s.Grants.Release(ctx, h.Key, owner)
	}
	return err
}

// KeepSession implements Sessions. The session's lease moves first, then
// every grant's, all at once: the backend groups the renewals that arrive
// together.
func (s *SessionEngine) KeepSession(ctx context.Context, token, subject string, ttl time.Duration) (SessionKept, error) {
	if err := ValidateRenewTTL(ttl); err != nil {
		return SessionKept{}, err
	}
	c := callerOf(token, subject)
	start := time.Now()
	ttl, ms, err := s.Store.Keep(ctx, c, ttl)
	if err != nil {
		return SessionKept{}, err
	}
	if s.Counter != nil && s.MaxPerSubject > 0 && !s.StoreCounts {
		// A count that lags (this call failed) only lets the subject open
		// more sessions than its bound until the next keep-alive.
		s.Counter.Extend(ctx, subject, c.ID, ttl)
	}
	kept := SessionKept{Lease: Lease{TTL: ttl, ExpiresAt: start.Add(ttl)}}
	leases := make([]Lease, len(ms))
	errs := make([]error, len(ms))
	fanOut(len(ms), func(i int) {
		if !ms[i].Released {
			leases[i], errs[i] = s.renew(ctx, ms[i].Hold, memberToken(token, ms[i].Nonce), ttl)
		}
	})
	var gone []string
	for i, m := range ms {
		h := m.Hold
		switch {
		case m.Released: // forgotten already
			kept.Gone = append(kept.Gone, h)
		case errs[i] == nil:
			h.FencingToken, h.TTL, h.ExpiresAt = leases[i].FencingToken, leases[i].TTL, leases[i].ExpiresAt
			kept.Renewed = append(kept.Renewed, h)
		case errors.Is(errs[i], ErrNotHolder):
			kept.Gone = append(kept.Gone, h)
			gone = append(gone, m.Nonce)
		default:
			return kept, fmt.Errorf("keep session %s: %w", c.ID, errs[i])
		}
	}
	if len(gone) > 0 {
		if err := s.Store.Drop(ctx, c, gone); err != nil {
			return kept, err
		}
	}
	return kept, nil
}

// EndSession implements Sessions.
func (s *SessionEngine) EndSession(ctx context.Context, token, subject string) (SessionEnded, error) {
	c := callerOf(token, subject)
	ms, err := s.Store.End(ctx, c)
	if err != nil {
		return SessionEnded{}, err
	}
	if s.Counter != nil && s.MaxPerSubject > 0 && !s.StoreCounts {
		s.forget(ctx, subject, c.ID)
	}
	rels := make([]Released, len(ms))
	errs := make([]error, len(ms))
	fanOut(len(ms), func(i int) {
		rels[i], errs[i] = s.Grants.ReleaseEnded(ctx, ms[i].Hold, memberToken(token, ms[i].Nonce), c.ID)
	})
	var ended SessionEnded
	for i, m := range ms {
		switch {
		case errs[i] == nil:
			if rels[i].Ended { // not one that had ended before
				ended.Released = append(ended.Released, m.Hold)
			}
		case errors.Is(errs[i], ErrNotHolder): // ended on its own, or never granted
		default:
			// Its lease ends it within the session's TTL: the session is
			// gone, so nobody renews it.
			return ended, fmt.Errorf("end session %s: %w", c.ID, errs[i])
		}
	}
	return ended, nil
}

// DescribeSession implements Sessions.
func (s *SessionEngine) DescribeSession(ctx context.Context, token, subject string) (SessionInfo, error) {
	start := time.Now()
	left, ttl, ms, err := s.Store.Describe(ctx, callerOf(token, subject))
	if err != nil {
		return SessionInfo{}, err
	}
	info := SessionInfo{Lease: Lease{TTL: left, ExpiresAt: start.Add(left)}, SessionTTL: ttl, Holds: make([]SessionHold, len(ms))}
	for i, m := range ms {
		info.Holds[i] = m.Hold
		info.Holds[i].Pending = m.Pending
	}
	return info, nil
}

// fanOut runs f(0..n-1) at once and waits for them all.
func fanOut(n int, f func(i int)) {
	if n == 1 {
		f(0)
		return
	}
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { f(i) })
	}
	wg.Wait()
}

// SessionError is what a store's check of the caller found.
func SessionError(op string, c SessionCaller, err error) error {
	return fmt.Errorf("%s session %s: %w", op, c.ID, err)
}
