package locks

import (
	"context"
	"time"
)

// memIdem holds the Memory backend's records of idempotency keys, as Redis
// holds them (see lua/idem_lib.lua), under Memory.mu.
type memIdem struct {
	records   map[memIdemID]*memIdemRecord
	nextSweep time.Time
}

type memIdemID struct {
	sem bool
	key Key
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
		g.idem.expires = g.expiresAt.Add(IdempotencyGrace)
	}
}

// AcquireOnce implements Idempotent.
func (m *Memory) AcquireOnce(ctx context.Context, key Key, req AcquireRequest, idemKey string) (Grant, error) {
	if err := req.validate(); err != nil {
		return Grant{}, err
	}
	c, err := newIdemCall(apiPath(false, key), req, 0, idemKey)
	if err != nil {
		return Grant{}, err
	}
	req.keep = true // the record leads a retry to a grant made as the caller left
	return acquireOnce(ctx, "lock "+key.String(), memIdemStore{m, false, key}, c, req.Wait+idemPendingSlack,
		func(ctx context.Context) (Grant, error) { return m.Acquire(ctx, key, req) },
		func(ctx context.Context, token string) { m.Release(ctx, key, token) })
}

// AcquirePermitOnce implements Idempotent.
func (m *Memory) AcquirePermitOnce(ctx context.Context, key Key, req SemaphoreRequest, idemKey string) (Grant, error) {
	if err := req.validate(); err != nil {
		return Grant{}, err
	}
	c, err := newIdemCall(apiPath(true, key), req.AcquireRequest, req.Limit, idemKey)
	if err != nil {
		return Grant{}, err
	}
	req.keep = true
	return acquireOnce(ctx, "semaphore "+key.String(), memIdemStore{m, true, key}, c, req.Wait+idemPendingSlack,
		func(ctx context.Context) (Grant, error) { return m.AcquirePermit(ctx, key, req) },
		func(ctx context.Context, token string) { m.ReleasePermit(ctx, key, token) })
}

// memIdemStore keeps the idempotency records of one lock or semaphore.
type memIdemStore struct {
	m   *Memory
	sem bool
	key Key
}

func (s memIdemStore) id(c *idemCall) memIdemID { return memIdemID{s.sem, s.key, c.id} }

// record returns the record of c, or nil when there is none or it has
// expired. s.m.mu must be held.
func (s memIdemStore) record(c *idemCall, now time.Time) *memIdemRecord {
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

func (s memIdemStore) begin(_ context.Context, c *idemCall, pending time.Duration) (idemFound, error) {
	s.m.mu.Lock()
	defer s.m.mu.Unlock()
	now := time.Now()
	s.m.idem.sweep(now)
	rec := s.record(c, now)
	switch {
	case rec == nil:
		s.m.idem.records[s.id(c)] = &memIdemRecord{pending: true, nonce: c.nonce, fingerprint: c.fingerprint, expires: now.Add(pending)}
		return idemFound{outcome: idemBegun}, nil
	case rec.fingerprint != c.fingerprint:
		return idemFound{outcome: idemMismatch}, nil
	case rec.pending:
		return idemFound{outcome: idemInProgress, ttl: rec.expires.Sub(now)}, nil
	}
	g := s.grant(rec.tokenSum, now)
	if g == nil {
		return idemFound{outcome: idemEnded}, nil
	}
	return idemFound{outcome: idemLive, sealed: rec.sealed, fence: rec.fence, ttl: g.expiresAt.Sub(now), holds: g.holdCount()}, nil
}

func (s memIdemStore) done(_ context.Context, c *idemCall, grant Grant) error {
	s.m.mu.Lock()
	defer s.m.mu.Unlock()
	now := time.Now()
	if rec := s.record(c, now); rec != nil && (!rec.pending || rec.nonce != c.nonce) {
		return errIdemTaken
	}
	th := sumOf(grant.Token)
	rec := &memIdemRecord{fingerprint: c.fingerprint, sealed: c.seal(grant.Token), tokenSum: th,
		fence: grant.FencingToken, expires: now.Add(IdempotencyGrace)}
	if g := s.grant(th, now); g != nil {
		g.idem = rec
		g.keepIdem()
	}
	s.m.idem.records[s.id(c)] = rec
	return nil
}

func (s memIdemStore) abort(_ context.Context, c *idemCall, _ bool) {
	s.m.mu.Lock()
	defer s.m.mu.Unlock()
	if rec := s.m.idem.records[s.id(c)]; rec != nil && rec.pending && rec.nonce == c.nonce {
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
