package redisbackend

import (
	"context"
	"time"

	"github.com/lockgate/lockgate/locks"
	"github.com/redis/go-redis/v9"
)

// The typed calls of the semaphore scripts (see scripts_lock.go).

// semKeys are the keys of one semaphore (see lua/semlib.lua): the same hash
// tag as a lock of the same name, under a prefix of their own ("sem:"), so
// the two never meet.
type semKeys struct {
	holders, leases, fence, queue, alive, waiters string
	// record is the key of the record of the permit of the caller's token
	// (see withToken); "" for a call without a token.
	record string
}

func (r *Backend) semKeys(key locks.Key) semKeys {
	s := r.opts.Prefix + "sem:{" + key.String() + "}"
	return semKeys{holders: s, leases: s + ":leases", fence: s + ":fence", queue: s + ":queue", alive: s + ":alive", waiters: s + ":waiters"}
}

// withToken is k with the record of the permit of the token whose hash is
// tokHash.
func (k semKeys) withToken(tokHash string) semKeys {
	k.record = k.holders + ":t:" + tokHash
	return k
}

// all is KEYS of the semaphore scripts that take a semaphore's keys: the
// holders key, then the record, if k has one. The scripts name the other
// keys from the first (lua/semlib.lua sem_keys_of): each key Redis takes
// as an argument costs it more than a concatenation in Lua.
func (k semKeys) all() []string {
	if k.record != "" {
		return []string{k.holders, k.record}
	}
	return []string{k.holders}
}

// semaphoreType is the kind of a semaphore (semaphoreKind): its typed calls
// of the steps locks and semaphores share (see kind).
type semaphoreType struct{}

func (semaphoreType) String() string { return "semaphore" }

func (semaphoreType) held(rp reply) error { return &locks.FullError{RetryAfter: rp.ttl} }

// acquireCall is lua/sem_acquire.lua's call.
func (semaphoreType) acquireCall(r *Backend, key locks.Key, a acquireArgs) (*script, []string, []any) {
	args := append(a.argv(r), a.limit)
	// A permit without a cap or a priority sends neither.
	prio := a.priority > 0 && a.waiterID != ""
	if a.maxHold > 0 || prio {
		args = append(args, optionalMs(a.maxHold))
	}
	if prio {
		args = append(args, a.priority, r.headStart(a.priority))
	}
	return semAcquireScript, r.semKeys(key).withToken(a.tokHash).all(), args
}

func (semaphoreType) sessionAcquire() *script { return sessionSemAcquireScript }

// acquireReply reads lua/sem_acquire.lua's reply: a bare fencing token
// is a permit taken now with the TTL asked for, ttl.
func (semaphoreType) acquireReply(_ *Backend, cmd *redis.Cmd, ttl time.Duration) (reply, error) {
	if rp, ok := grantedNow(cmd, ttl); ok {
		return rp, nil
	}
	out, err := cmd.Int64Slice()
	if err != nil {
		return reply{}, err
	}
	if len(out) >= 2 && out[0] == codeNotFound { // in use with another limit
		return reply{refused: &locks.LimitMismatchError{Limit: int(out[1])}}, nil
	}
	return parseReply(out)
}

// callLeave runs lua/sem_leave.lua.
func (semaphoreType) callLeave(ctx context.Context, r *Backend, key locks.Key, id, fence string, a leaveArgs) (rp reply, ackErr, err error) {
	k := r.semKeys(key).withToken(a.tokHash)
	cmd, ackErr := r.exec(ctx, semLeaveScript, id, fence, k.all(), a.argv(r)...)
	rp, err = parseLeave(cmd.Int64Slice())
	return rp, ackErr, err
}

// callRelease runs lua/sem_release.lua.
func (semaphoreType) callRelease(ctx context.Context, r *Backend, key locks.Key, id, fence string, a releaseArgs) (rp releaseReply, ackErr, err error) {
	k := r.semKeys(key).withToken(a.tokHash)
	args := []any{a.tokHash, r.arg.retention, r.arg.checkHeard}
	if a.member {
		args = append(args, "1")
	}
	cmd, ackErr := r.exec(ctx, semReleaseScript, id, fence, k.all(), args...)
	rp, err = parseRelease(cmd.Result())
	return rp, ackErr, err
}

// beat is the call of lua/sem_heartbeat.lua.
func (semaphoreType) beat(r *Backend, key locks.Key, ids []string) beatCall {
	return beatCall{script: semHeartbeatScript, keys: r.semKeys(key).all(), args: r.beatArgs(ids)}
}

// callSemRenew runs lua/sem_renew.lua on key's semaphore. ackErr says the
// replicas did not acknowledge it (see exec).
func (r *Backend) callSemRenew(ctx context.Context, key locks.Key, a renewArgs) (rp renewReply, ackErr, err error) {
	k := r.semKeys(key).withToken(a.tokHash)
	cmd, ackErr := r.exec(ctx, semRenewScript, a.callID, a.fence, []string{k.holders, k.leases, k.record}, a.tokHash, a.ttl.Milliseconds(), r.arg.retention)
	rp, err = parseRenew(cmd.Int64Slice())
	return rp, ackErr, err
}

// callSemInspect runs lua/sem_inspect.lua on key's semaphore: its index,
// its holders, counted from start, and its queue's priorities; held is
// false when nobody holds a permit (info has the index alone then).
func (r *Backend) callSemInspect(ctx context.Context, key locks.Key, start time.Time) (info locks.SemaphoreInfo, held bool, err error) {
	const fields = 6 // per holder, after index, limit, waiters and now
	k := r.semKeys(key)
	cmd, _ := r.run(ctx, semInspectScript, []string{k.holders, k.leases, k.queue, k.waiters})
	out, err := cmd.Slice()
	if err != nil {
		return locks.SemaphoreInfo{}, false, err
	}
	if len(out) == 0 {
		return locks.SemaphoreInfo{}, false, unexpectedReply(out)
	}
	index, _ := out[0].(int64)
	if len(out) < 4 {
		return locks.SemaphoreInfo{Index: index}, false, nil
	}
	limit, _ := out[1].(int64)
	waiting, _ := out[2].(int64)
	now, _ := out[3].(int64)
	info = locks.SemaphoreInfo{Index: index, Limit: int(limit), Waiters: int(waiting)}
	if (len(out)-4)%fields == 1 {
		info.QueuePriorities = parsePriorities(out[len(out)-1])
		out = out[:len(out)-1]
	}
	for h := out[4:]; len(h) >= fields; h = h[fields:] {
		fence, _ := h[0].(int64)
		pttl, _ := h[1].(int64)
		subject, _ := h[2].(string)
		owner, _ := h[3].(string)
		at, _ := h[4].(int64)
		capAt, _ := h[5].(int64)
		ttl := millis(pttl)
		lease := locks.Lease{FencingToken: fence, TTL: ttl, ExpiresAt: start.Add(ttl)}
		if capAt > 0 {
			lease.HoldUntil = start.Add(millis(max(capAt-now, 0)))
			lease = lease.WithinHold()
		}
		info.Holders = append(info.Holders, locks.Holder{Holds: 1,
			Lease:   lease,
			Subject: subject, Owner: owner, AcquiredAt: time.UnixMilli(at).UTC(),
		})
	}
	return info, len(info.Holders) > 0, nil
}

// callSemResize runs lua/sem_resize.lua on key's semaphore; inUse is false
// when nobody holds or waits (and nothing changed). ackErr says the
// replicas did not acknowledge it (see exec).
func (r *Backend) callSemResize(ctx context.Context, key locks.Key, limit int) (size locks.SemaphoreSize, inUse bool, ackErr, err error) {
	cmd, ackErr := r.run(ctx, semResizeScript, r.semKeys(key).all(), limit, r.arg.retention, r.arg.checkHeard)
	out, err := cmd.Int64Slice()
	switch {
	case err != nil:
		return locks.SemaphoreSize{}, false, ackErr, err
	case len(out) == 4 && out[0] == codeGranted:
		return locks.SemaphoreSize{Limit: int(out[1]), Holders: int(out[2]), Waiters: int(out[3])}, true, ackErr, nil
	case len(out) == 1 && out[0] == codeNotGranted:
		return locks.SemaphoreSize{}, false, ackErr, nil
	}
	return locks.SemaphoreSize{}, false, ackErr, unexpectedReply(out)
}
