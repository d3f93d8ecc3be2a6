package locks

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"time"
)

// LockSets is what every backend offers for lock sets: up to MaxSetLocks
// locks taken in one call, all of them or none. The caller never holds a
// subset: a set that cannot have every lock gets none, and the locks it
// took on the way are released before it answers.
//
// Deadlock freedom comes from one order: every set takes its locks sorted
// by namespace, then name (SortSet), so no two sets can each hold a lock
// the other waits for. A set that waits queues in each lock's own FIFO
// queue in that order, holding the locks it has while it waits for the
// next, with what is left of its wait; so waiting stays first come, first
// served per lock. Its request's Priority is that of each of those waits:
// it ranks in each queue as a waiter of that priority that arrived when
// the set reached that lock. The order of the locks, not the queues', is
// what keeps sets from deadlocking, so a priority cannot undo it. Where the backend can look at every lock at once (the
// embedded backend; one script on a single Redis), a set first tries to
// take them all in one step, which grants only when no lock has waiters
// ahead of it.
//
// A set has one token, returned to the caller; each lock's owner token is
// derived from it (see setOwner), so one RenewSet or ReleaseSet with the
// token and the set's locks renews or ends them all, and nothing of the
// set is stored beside its locks. Each lock keeps its own fencing token.
type LockSets interface {
	// AcquireSet takes every lock of keys for req.TTL, waiting up to
	// req.Wait for them, or none. Exclusive grants only, without a value
	// or a min hold; req.MaxHold caps each lock's grant as any grant's,
	// from that lock's acquisition (each Lease states its HoldUntil).
	// It refuses (ErrInvalid) an empty set, more than MaxSetLocks locks,
	// and a lock named twice. A set that cannot have every lock in time
	// gets the error of the lock it could not have (a *HeldError): one
	// held, or one it took while it waited for the next and lost (a
	// break, or its lease ran out) before it was whole, whose RetryAfter
	// is then what is left of its holder's lease (0 when it is free).
	AcquireSet(ctx context.Context, keys []Key, req AcquireRequest) (SetGrant, error)
	// RenewSet extends the lease of every lock of the set of token to
	// ttl from now (0: the TTL the set was acquired with). The first lock
	// whose grant has ended (ErrNotHolder) or failed is the error: the
	// set is no longer whole, and its holder should release it.
	RenewSet(ctx context.Context, keys []Key, token string, ttl time.Duration) ([]SetLock, error)
	// ReleaseSet releases every lock of the set of token. A lock the set
	// no longer holds (its lease ended, broken) is listed as gone; when
	// the set holds none of them, the error is the first lock's
	// ErrNotHolder. A repeated release within RecordTTL succeeds again,
	// and releases nothing.
	ReleaseSet(ctx context.Context, keys []Key, token string) (SetReleased, error)
}

// MaxSetLocks is how many locks one set may take: it bounds the work of
// one call, and the keys of one script.
const MaxSetLocks = 16

// SetGrant is a lock set granted in full.
type SetGrant struct {
	// Token is the set's token: the only way to renew or release it.
	Token string
	// Locks are the set's locks, in the order asked, each with its own
	// fencing token and lease.
	Locks []SetLock
	// TTL and ExpiresAt are those of the lease that ends first.
	TTL       time.Duration
	ExpiresAt time.Time
}

// SetLock is one lock of a set, and its lease.
type SetLock struct {
	Key Key
	Lease
}

// SetReleased is what a ReleaseSet did.
type SetReleased struct {
	// Released are the locks it released (or had released already, on a
	// repeated release); Gone those the set no longer held.
	Released, Gone []Key
}

// SortSet sorts keys in the one order every set takes its locks in:
// namespace, then name.
func SortSet(keys []Key) { slices.SortFunc(keys, compareKeys) }

// compareKeys orders keys by namespace, then name.
func compareKeys(a, b Key) int {
	return cmp.Or(cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Name, b.Name))
}

// CheckSet refuses a set that is empty, has more than MaxSetLocks locks,
// or names a lock twice.
func CheckSet(keys []Key) error {
	switch {
	case len(keys) == 0:
		return fmt.Errorf("%w: a lock set names at least one lock", ErrInvalid)
	case len(keys) > MaxSetLocks:
		return fmt.Errorf("%w: a lock set names at most %d locks, not %d", ErrInvalid, MaxSetLocks, len(keys))
	}
	sorted := slices.Clone(keys)
	SortSet(sorted)
	for i := 1; i < len(sorted); i++ {
		if sorted[i] == sorted[i-1] {
			return fmt.Errorf("%w: lock %s appears twice in the set", ErrInvalid, sorted[i])
		}
	}
	return nil
}

// setOwner is the owner token of key's grant in the set of token: whoever
// shows the set's token can renew and release it, and no owner token is
// kept anywhere.
func setOwner(token string, key Key) string { return derivedToken(token, "set:"+key.String()) }

// allAtOnce is what a backend that can look at every lock of a set at
// once offers: acquireAll grants lock i of keys (sorted) to owners[i] for
// req.TTL, all or none, and only when none has waiters. tried is false
// when it cannot for these keys (locks on different Cluster nodes). A
// refusal is a *HeldError of the lock that stood in the way, wrapped; an
// unknown outcome is undone by acquireAll itself.
type allAtOnce interface {
	AcquireAll(ctx context.Context, keys []Key, owners []string, req AcquireRequest) (leases []Lease, tried bool, err error)
}

// SetEngine is the one implementation of LockSets, on a backend's grants.
type SetEngine struct {
	Grants Locker
	All    allAtOnce // or nil
}

// AcquireSet implements LockSets.
func (s *SetEngine) AcquireSet(ctx context.Context, keys []Key, req AcquireRequest) (SetGrant, error) {
	if err := req.Validate(); err != nil {
		return SetGrant{}, err
	}
	switch {
	case req.Mode != Exclusive:
		return SetGrant{}, fmt.Errorf("%w: a lock set takes exclusive grants", ErrInvalid)
	case req.Value != "":
		return SetGrant{}, fmt.Errorf("%w: a lock set's grants carry no value", ErrInvalid)
	case req.MinHold > 0:
		return SetGrant{}, fmt.Errorf("%w: a lock set's grants take no min hold", ErrInvalid)
	}
	if err := CheckSet(keys); err != nil {
		return SetGrant{}, err
	}
	deadline := time.Now().Add(req.Wait)
	sorted := slices.Clone(keys)
	SortSet(sorted)
	token := NewToken()
	owners := make([]string, len(sorted))
	for i, k := range sorted {
		owners[i] = setOwner(token, k)
	}
	var (
		leases []Lease
		err    error
		tried  bool
	)
	if s.All != nil {
		leases, tried, err = s.All.AcquireAll(ctx, sorted, owners, req)
		var held *HeldError
		if tried && errors.As(err, &held) && req.Wait > 0 {
			tried = false // wait in the queues, in order
		}
	}
	if !tried {
		leases, err = s.inOrder(ctx, sorted, owners, req, deadline)
	}
	if err != nil {
		return SetGrant{}, err
	}
	g := SetGrant{Token: token, Locks: make([]SetLock, len(keys))}
	for i, k := range keys {
		j, _ := slices.BinarySearchFunc(sorted, k, compareKeys)
		g.Locks[i] = SetLock{Key: k, Lease: leases[j]}
		if i == 0 || leases[j].ExpiresAt.Before(g.ExpiresAt) {
			g.TTL, g.ExpiresAt = leases[j].TTL, leases[j].ExpiresAt
		}
	}
	return g, nil
}

// inOrder takes the locks one by one in the set's order, each with
// Acquire, waiting in its queue with what is left of the set's wait. A
// lock taken before the last one is held while the set waits for the
// rest, so its lease covers that wait too, and is brought back to req.TTL
// once the set is complete. Any failure releases what was taken.
func (s *SetEngine) inOrder(ctx context.Context, keys []Key, owners []string, req AcquireRequest, deadline time.Time) ([]Lease, error) {
	leases := make([]Lease, 0, len(keys))
	extended := false
	for i, k := range keys {
		r := req
		r.OwnerToken = owners[i]
		if req.Wait > 0 {
			if r.Wait = time.Until(deadline); r.Wait < time.Millisecond {
				r.Wait = time.Millisecond // one last look, in the queue's order
			}
			if i < len(keys)-1 {
				r.TTL += r.Wait
				if req.MaxHold > 0 {
					// The cap counts from this lock's grant, the wait
					// included: no lease of the set passes it.
					r.TTL = min(r.TTL, req.MaxHold)
				}
				extended = true
			}
		}
		var g Grant
		var err error
		if r.Wait > 0 && i > 0 {
			g, err = s.acquireWatching(ctx, k, r, keys[:i], leases)
		} else {
			g, err = s.Grants.Acquire(ctx, k, r)
		}
		if err != nil {
			return nil, s.rollback(ctx, keys[:i], owners, fmt.Errorf("acquire set: %s: %w", k, err))
		}
		leases = append(leases, g.Lease)
	}
	if !extended {
		return leases, nil
	}
	errs := make([]error, len(keys)-1)
	fanOut(len(keys)-1, func(i int) {
		leases[i], errs[i] = s.Grants.Renew(ctx, keys[i], owners[i], req.TTL)
	})
	lost := -1
	for i, err := range errs {
		switch {
		case err == nil:
		case errors.Is(err, ErrNotHolder):
			lost = i
		default:
			return nil, s.rollback(ctx, keys, owners, fmt.Errorf("acquire set: %w", err))
		}
	}
	if lost >= 0 {
		// A lock taken while the set waited for the next was broken, or
		// its lease ran out: the set never held it whole, so it is refused
		// as any set is, by that lock, which someone else may hold now.
		held := s.heldNow(ctx, keys[lost])
		return nil, s.rollback(ctx, keys, owners, fmt.Errorf("acquire set: %s was lost while the set waited: %w", keys[lost], held))
	}
	return leases, nil
}

// lossCheck is how often a set that waits for a lock looks whether it
// still holds those it took: the next lock's wait ends once it lost one (a
// break), and the set is refused then rather than at the end of its wait.
// One inspect of each lock taken per check, for as long as the set waits.
const lossCheck = 500 * time.Millisecond

// errSetLost ends the wait of a set that lost a lock it had taken.
var errSetLost = errors.New("the set lost a lock it had taken")

// acquireWatching acquires key for a set that took took already, whose
// leases are leases, and ends the wait as soon as one of them is lost:
// then the error says which, as a HeldError.
func (s *SetEngine) acquireWatching(ctx context.Context, key Key, req AcquireRequest, took []Key, leases []Lease) (Grant, error) {
	wctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	lost := make(chan Key, 1)
	done := make(chan struct{})
	defer close(done)
	go func() {
		tick := time.NewTicker(lossCheck)
		defer tick.Stop()
		for {
			select {
			case <-done:
				return
			case <-wctx.Done():
				return
			case <-tick.C:
			}
			for i, k := range took {
				info, err := s.Grants.Inspect(wctx, k)
				if errors.Is(err, ErrNotHeld) || (err == nil && info.FencingToken != leases[i].FencingToken) {
					lost <- k
					cancel(errSetLost)
					return
				}
			}
		}
	}()
	g, err := s.Grants.Acquire(wctx, key, req)
	if err != nil && errors.Is(context.Cause(wctx), errSetLost) {
		k := <-lost
		return Grant{}, fmt.Errorf("%s was lost while the set waited: %w", k, s.heldNow(ctx, k))
	}
	return g, err
}

// heldNow is the refusal of a set by key, a lock it had and lost: when
// its holder's lease ends, if it has one (a millisecond if the lock is
// free, or the backend does not say: the set may be retried at once).
func (s *SetEngine) heldNow(ctx context.Context, key Key) *HeldError {
	info, err := s.Grants.Inspect(ctx, key)
	if err != nil {
		return &HeldError{RetryAfter: time.Millisecond} // free now, or unknown: retry at once
	}
	return &HeldError{RetryAfter: max(info.TTL, time.Millisecond)}
}

// rollback releases the set's grants of keys, whoever waits for the
// answer: the caller gets none of them. It returns why, the set's answer,
// unless a release failed: then a lock of the set may stay held until its
// lease ends, so the outcome is unknown (ErrUnavailable), whatever why
// says. A grant that had ended already (ErrNotHolder) is given back.
func (s *SetEngine) rollback(ctx context.Context, keys []Key, owners []string, why error) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	errs := make([]error, len(keys))
	fanOut(len(keys), func(i int) {
		if _, err := s.Grants.Release(ctx, keys[i], owners[i]); !errors.Is(err, ErrNotHolder) {
			errs[i] = err
		}
	})
	err := errors.Join(errs...)
	switch {
	case err == nil:
		return why
	case !errors.Is(err, ErrUnavailable):
		err = fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	// why only in words: its code (a refusal's) is not the answer.
	return fmt.Errorf("%v; giving back the locks taken: %w", why, err)
}

// RenewSet implements LockSets.
func (s *SetEngine) RenewSet(ctx context.Context, keys []Key, token string, ttl time.Duration) ([]SetLock, error) {
	if err := ValidateRenewTTL(ttl); err != nil {
		return nil, err
	}
	if err := CheckSet(keys); err != nil {
		return nil, err
	}
	out := make([]SetLock, len(keys))
	errs := make([]error, len(keys))
	todo := make([]int, 0, len(keys))
	if ttl == 0 {
		// The TTL the locks were acquired with is the set's for the last
		// lock in the set's order only: one taken before it, by a set that
		// waited, was acquired with a longer lease (see inOrder). So the
		// last one goes first, and its TTL is the others'.
		last := lastInOrder(keys)
		out[last].Key = keys[last]
		out[last].Lease, errs[last] = s.Grants.Renew(ctx, keys[last], setOwner(token, keys[last]), 0)
		if errs[last] != nil {
			return out, fmt.Errorf("renew set: %w", errs[last])
		}
		ttl = max(out[last].TTL.Round(time.Millisecond), time.Millisecond)
		for i := range keys {
			if i != last {
				todo = append(todo, i)
			}
		}
	} else {
		for i := range keys {
			todo = append(todo, i)
		}
	}
	fanOut(len(todo), func(j int) {
		i := todo[j]
		out[i].Key = keys[i]
		out[i].Lease, errs[i] = s.Grants.Renew(ctx, keys[i], setOwner(token, keys[i]), ttl)
	})
	// A lock that is gone (ErrNotHolder) ends the set, whatever another
	// lock's renewal answered: that answer, which is certain, goes before
	// one whose outcome is unknown, in whatever order the set names them.
	var first error
	for _, err := range errs {
		if errors.Is(err, ErrNotHolder) {
			return out, fmt.Errorf("renew set: %w", err)
		}
		if first == nil {
			first = err
		}
	}
	if first != nil {
		return out, fmt.Errorf("renew set: %w", first)
	}
	return out, nil
}

// lastInOrder is the index in keys of the lock a set takes last.
func lastInOrder(keys []Key) int {
	last := 0
	for i, k := range keys {
		if compareKeys(k, keys[last]) > 0 {
			last = i
		}
	}
	return last
}

// ReleaseSet implements LockSets.
func (s *SetEngine) ReleaseSet(ctx context.Context, keys []Key, token string) (SetReleased, error) {
	if err := CheckSet(keys); err != nil {
		return SetReleased{}, err
	}
	errs := make([]error, len(keys))
	fanOut(len(keys), func(i int) {
		_, errs[i] = s.Grants.Release(ctx, keys[i], setOwner(token, keys[i]))
	})
	var (
		rel      SetReleased
		notHeld  error
		failures []error
	)
	for i, err := range errs {
		switch {
		case err == nil:
			rel.Released = append(rel.Released, keys[i])
		case errors.Is(err, ErrNotHolder):
			rel.Gone = append(rel.Gone, keys[i])
			if notHeld == nil {
				notHeld = err
			}
		default:
			failures = append(failures, err)
		}
	}
	if len(failures) > 0 {
		// Their leases end them: nobody renews a set being released.
		return rel, fmt.Errorf("release set: %w", failures[0])
	}
	if len(rel.Released) == 0 {
		return rel, fmt.Errorf("release set: %w", notHeld)
	}
	return rel, nil
}
