package redisbackend

import (
	"context"
	"time"

	"github.com/lockgate/lockgate/locks"
)

// The typed calls of the idempotency scripts (see scripts_lock.go, and
// idempotency.go for the protocol).

// idemKeys are the keys of one idempotency record (see lua/idem_lib.lua):
// the record, and its grant's keys, a lock's hash or a semaphore's holders
// and leases.
type idemKeys struct {
	record          string
	lock            string // for a lock's record
	holders, leases string // for a permit's record
}

// idemKeys are the keys of the record of idempotency key id for res.
func (r *Backend) idemKeys(res resource, id string) idemKeys {
	if res.kind == semaphoreKind {
		k := r.semKeys(res.key)
		return idemKeys{record: k.holders + ":idem:" + id, holders: k.holders, leases: k.leases}
	}
	k := r.lockKeys(res.key)
	return idemKeys{record: k.lock + ":idem:" + id, lock: k.lock}
}

// All is KEYS of lua/idem_begin.lua and lua/idem_done.lua: the record, then
// the grant's keys.
func (k idemKeys) all() []string {
	if k.lock != "" {
		return []string{k.record, k.lock}
	}
	return []string{k.record, k.holders, k.leases}
}

// idemBeginArgs are ARGV of lua/idem_begin.lua.
type idemBeginArgs struct {
	fingerprint, nonce string
	pending            time.Duration // how long a pending record lives
}

// callIdemBegin runs lua/idem_begin.lua as call id. ackErr says the
// replicas did not acknowledge it (see exec): a live grant it found must not
// be answered.
func (r *Backend) callIdemBegin(ctx context.Context, k idemKeys, id string, a idemBeginArgs) (found locks.IdemFound, ackErr, err error) {
	cmd, ackErr := r.exec(ctx, idemBeginScript, id, "", k.all(), a.fingerprint, a.nonce, a.pending.Milliseconds())
	out, err := cmd.Slice()
	if err != nil {
		return locks.IdemFound{}, ackErr, err
	}
	n := func(i int) int64 {
		if i >= len(out) {
			return 0
		}
		v, _ := out[i].(int64)
		return v
	}
	switch n(0) {
	case idemCodeBegun:
		return locks.IdemFound{Outcome: locks.IdemBegun}, ackErr, nil
	case idemCodeLive:
		sealed, _ := out[1].(string)
		found := locks.IdemFound{Outcome: locks.IdemLive, Sealed: sealed, Fence: n(2), TTL: millis(max(n(3), 0)), Holds: int(n(4))}
		if len(out) > 5 {
			found.Capped, found.HoldLeft = true, millis(max(n(5), 0))
		}
		return found, ackErr, nil
	case idemCodeRunning:
		return locks.IdemFound{Outcome: locks.IdemInProgress, TTL: millis(max(n(1), 0))}, ackErr, nil
	case idemCodeOtherRequest:
		return locks.IdemFound{Outcome: locks.IdemMismatch}, ackErr, nil
	case idemCodeEnded:
		return locks.IdemFound{Outcome: locks.IdemEnded}, ackErr, nil
	}
	return locks.IdemFound{}, ackErr, unexpectedReply(out)
}

// idemDoneArgs are ARGV of lua/idem_done.lua.
type idemDoneArgs struct {
	fingerprint, nonce string
	tokHash            string // the grant's
	sealed             string // its owner token, encrypted
	fence              int64
	grace              time.Duration // how long the record outlives the lease
}

// callIdemDone runs lua/idem_done.lua as call id, and says whether it
// recorded the grant (otherwise another attempt holds the record).
func (r *Backend) callIdemDone(ctx context.Context, k idemKeys, id string, a idemDoneArgs) (recorded bool, err error) {
	cmd, _ := r.exec(ctx, idemDoneScript, id, "", k.all(), a.fingerprint, a.nonce, a.tokHash, a.sealed, a.fence, a.grace.Milliseconds())
	out, err := cmd.Int64Slice()
	if err != nil {
		return false, err
	}
	if len(out) < 1 {
		return false, unexpectedReply(out)
	}
	return out[0] == codeGranted, nil
}

// idemAbortArgs are ARGV of lua/idem_abort.lua.
type idemAbortArgs struct {
	nonce    string
	gaveBack string // the token hash of the grant the attempt gave back, or ""
}

// callIdemAbort runs lua/idem_abort.lua, fencing off the call fence (see
// exec). Its reply changes nothing for the caller.
func (r *Backend) callIdemAbort(ctx context.Context, k idemKeys, fence string, a idemAbortArgs) {
	r.exec(ctx, idemAbortScript, newCallID(), fence, []string{k.record}, a.nonce, a.gaveBack)
}
