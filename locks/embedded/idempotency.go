package embedded

import (
	"context"
	"time"

	"github.com/lockgate/lockgate/locks"
)

// memIdem holds the Memory backend's records of idempotency keys, as Redis
// holds them (see lua/idem_lib.lua), under Memory.mu.
type memIdem struct {
	records   map[memIdemID]*memIdemRecord
	nextSweep time.Time
}

type memIdemID struct {
	sem bool
	key locks.Key
	id  string
}

// memIdemRecord is one idempotency key's record.
type memIdemRecord struct {
	pending     bool
	nonce       string // the pending call's
	fingerprint string
	sealed      string // the owner token, encrypted
	tokenSum    tokenSum
	fence       int64
	expires     time.Time // when the key is forgotten
}

// keepIdem keeps the record of g's idempotency key until IdempotencyGrace
// after g's lease, as renew.lua does. m.mu must be held.
func (g *memGrant) keepIdem() {
	if g.idem != nil {
		g.idem.expires = g.expiresAt.Add(locks.IdempotencyGrace)
	}
}

// AcquireOnce implements Idempotent.
func (m *Backend) AcquireOnce(ctx context.Context, key locks.Key, req locks.AcquireRequest, idemKey string) (locks.Grant, error) {
	if err := req.Validate(); err != nil {
		return locks.Grant{}, err
	}
	c, err := locks.NewIdemCall(locks.APIPath(false, key), req, 0, idemKey)
	if err != nil {
		return locks.Grant{}, err
	}
	req.Keep = true // the record leads a retry to a grant made as the caller left
	return locks.AcquireOnce(ctx, "lock "+key.String(), memIdemStore{m, false, key}, c, req.Wait+locks.IdemPendingSlack,
		func(ctx context.Context) (locks.Grant, error) { return m.Acquire(ctx, key, req) },
		func(ctx context.Context, token string) { m.Release(ctx, key, token) })
}

// AcquirePermitOnce implements Idempotent.
func (m *Backend) AcquirePermitOnce(ctx context.Context, key locks.Key, req locks.SemaphoreRequest, idemKey string) (locks.Grant, error) {
	if err := req.Validate(); err != nil {
		return locks.Grant{}, err
	}
	c, err := locks.NewIdemCall(locks.APIPath(true, key), req.AcquireRequest, req.Limit, idemKey)
	if err != nil {
		return locks.Grant{}, err
	}
	req.Keep = true
	return locks.AcquireOnce(ctx, "semaphore "+key.String(), memIdemStore{m, true, key}, c, req.Wait+locks.IdemPendingSlack,
		func(ctx context.Context) (locks.Grant, error) { return m.AcquirePermit(ctx, key, req) },
		func(ctx context.Context, token string) { m.ReleasePermit(ctx, key, token) })
}

// memIdemStore keeps the idempotency records of one lock or semaphore.
type memIdemStore struct {
	m   *Backend
	sem bool
	key locks.Key
}

func (s memIdemStore) id(c *locks.IdemCall) memIdemID { return memIdemID{s.sem, s.key, c.ID} }

// record returns the record of c, or nil when there is none or it has
// expired. s.m.mu must be held.
func (s memIdemStore) record(c *locks.IdemCall, now time.Time) *memIdemRecord {
	rec := s.m.idem.records[s.id(c)]
	if rec != nil && !now.Before(rec.expires) {
		delete(s.m.idem.records, s.id(c))
		return nil
	}
	return rec
}

// grant returns the live grant whose token hash is th. s.m.mu must be held.
func (s memIdemStore) grant(th tokenSum, now time.Time) *memGrant {
	if !s.sem {
		s.m.expireLocked(s.key, now)
		if l := s.m.locks[s.key]; l != nil {
			return l.holders[th] // nil when th holds nothing
		}
		return nil
	}
	sem := s.m.sems[s.key]
	if sem == nil {
		return nil
	}
	s.m.expirePermitsLocked(s.key, sem, now)
	return sem.holders[th]
}

func (s memIdemStore) Begin(_ context.Context, c *locks.IdemCall, pending time.Duration) (locks.IdemFound, error) {
	s.m.mu.Lock()
	defer s.m.mu.Unlock()
	now := time.Now()
	s.m.idem.sweep(now)
	rec := s.record(c, now)
	switch {
	case rec == nil:
		s.m.idem.records[s.id(c)] = &memIdemRecord{pending: true, nonce: c.Nonce, fingerprint: c.Fingerprint, expires: now.Add(pending)}
		return locks.IdemFound{Outcome: locks.IdemBegun}, nil
	case rec.fingerprint != c.Fingerprint:
		return locks.IdemFound{Outcome: locks.IdemMismatch}, nil
	case rec.pending:
		return locks.IdemFound{Outcome: locks.IdemInProgress, TTL: rec.expires.Sub(now)}, nil
	}
	g := s.grant(rec.tokenSum, now)
	if g == nil {
		return locks.IdemFound{Outcome: locks.IdemEnded}, nil
	}
	found := locks.IdemFound{Outcome: locks.IdemLive, Sealed: rec.sealed, Fence: rec.fence, TTL: g.expiresAt.Sub(now), Holds: g.holdCount()}
	if !g.holdEnd.IsZero() {
		found.Capped, found.HoldLeft = true, max(g.holdEnd.Sub(now), 0)
	}
	return found, nil
}

func (s memIdemStore) Done(_ context.Context, c *locks.IdemCall, grant locks.Grant) error {
	s.m.mu.Lock()
	defer s.m.mu.Unlock()
	now := time.Now()
	if rec := s.record(c, now); rec != nil && (!rec.pending || rec.nonce != c.Nonce) {
		return locks.ErrIdemTaken
	}
	th := sumOf(grant.Token)
	rec := &memIdemRecord{fingerprint: c.Fingerprint, sealed: c.Seal(grant.Token), tokenSum: th,
		fence: grant.FencingToken, expires: now.Add(locks.IdempotencyGrace)}
	if g := s.grant(th, now); g != nil {
		g.idem = rec
		g.keepIdem()
	}
	s.m.idem.records[s.id(c)] = rec
	return nil
}

func (s memIdemStore) Abort(_ context.Context, c *locks.IdemCall, _ bool) {
	s.m.mu.Lock()
	defer s.m.mu.Unlock()
	if rec := s.m.idem.records[s.id(c)]; rec != nil && rec.pending && rec.nonce == c.Nonce {
		delete(s.m.idem.records, s.id(c))
	}
}

// idemSweepEvery is how often begin drops the expired records.
const idemSweepEvery = 10 * time.Second

// sweep drops expired records, at most every idemSweepEvery. m.mu must be
// held.
func (mi *memIdem) sweep(now time.Time) {
	if mi.records == nil {
		mi.records = make(map[memIdemID]*memIdemRecord)
	}
	if now.Before(mi.nextSweep) {
		return
	}
	mi.nextSweep = now.Add(idemSweepEvery)
	for id, rec := range mi.records {
		if !now.Before(rec.expires) {
			delete(mi.records, id)
		}
	}
}
