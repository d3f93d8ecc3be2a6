package redisbackend

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/lockgate/lockgate/locks"
	"github.com/redis/go-redis/v9"
)

// The typed calls of the lock scripts: each builds its script's KEYS and
// ARGV, in the order the script's header states, and reads its reply. No
// other code puts them in order.

// lockKeys are the keys of one lock (see lua/lib_keys.lua). They share the
// hash tag {ns/name}, so that one script can touch them all on Redis
// Cluster.
type lockKeys struct {
	lock, fence, queue, alive, waiters, readers, delay string
	// record is the key of the record of the grant of the caller's token
	// (see withToken); "" for a call without a token.
	record string
}

func (r *Backend) lockKeys(key locks.Key) lockKeys {
	lock := r.opts.Prefix + "{" + key.Namespace + "/" + key.Name + "}"
	// One string holds the other six, each key a slice of it: two
	// allocations per call where there were ten (they were a sixth of the
	// gateway's allocations per call).
	all := lock + ":fence" + lock + ":queue" + lock + ":alive" + lock + ":waiters" + lock + ":readers" +
		lock + ":delay"
	next := func(suffix string) string {
		k := all[:len(lock)+len(suffix)]
		all = all[len(k):]
		return k
	}
	return lockKeys{lock: lock, fence: next(":fence"), queue: next(":queue"), alive: next(":alive"),
		waiters: next(":waiters"), readers: next(":readers"), delay: next(":delay")}
}

// withToken is k with the record of the grant of the token whose hash is
// tokHash.
func (k lockKeys) withToken(tokHash string) lockKeys {
	k.record = k.lock + ":t:" + tokHash
	return k
}

// All is KEYS of the lock scripts that take a lock's keys: the lock, and
// the record, if k has one. The scripts name the lock's other keys from
// the first (lua/lib_keys.lua lock_keys), each as k names it here.
func (k lockKeys) all() []string {
	if k.record != "" {
		return []string{k.lock, k.record}
	}
	return []string{k.lock}
}

// lockType is the kind of a lock (lockKind): its typed calls of the steps
// locks and semaphores share (see kind).
type lockType struct{}

func (lockType) String() string { return "lock" }

func (lockType) held(rp reply) error {
	held := &locks.HeldError{RetryAfter: rp.ttl, MinHold: rp.resting}
	if rp.resting && rp.ttl > 0 {
		// The kept name's end, on the Redis clock (as inspect's); a
		// waiter behind the head of the queue is told no retry, and so
		// no end.
		held.FreeAt = time.UnixMilli(rp.now + rp.ttl.Milliseconds()).UTC()
	}
	return held
}

// acquireCall is lua/acquire.lua's call.
func (lockType) acquireCall(r *Backend, key locks.Key, a acquireArgs) (*script, []string, []any) {
	args := append(make([]any, 0, 19), a.tokHash, a.ttl.Milliseconds(), a.subject, a.owner, r.arg.opts)
	// A call pays for the arguments it sends (about 1 300 Redis
	// instructions each): one that does not wait sends no waiter's
	// arguments, nor one without a min hold, a hard cap or a priority
	// those, and an exclusive one without a value, with none of those
	// after it, neither mode nor value (the script reads their absence as
	// 'x' and no value).
	prio := a.priority > 0 && a.waiterID != ""
	if a.mode == locks.Shared || a.value != "" || a.positional || a.waiterID != "" || a.minHold > 0 || a.maxHold > 0 {
		args = append(args, modeArg(a.mode), a.value)
	}
	if a.waiterID != "" || a.minHold > 0 || a.maxHold > 0 {
		args = append(args, a.waiterID, a.wait.Milliseconds(), a.arrival)
	}
	if a.minHold > 0 || a.maxHold > 0 || prio {
		args = append(args, optionalMs(a.minHold))
	}
	if a.maxHold > 0 || prio {
		args = append(args, optionalMs(a.maxHold))
	}
	if prio {
		args = append(args, a.priority, r.headStart(a.priority))
	}
	return acquireScript, r.lockKeys(key).withToken(a.tokHash).all(), args
}

func (lockType) sessionAcquire() *script { return sessionAcquireScript }

// acquireReply reads lua/acquire.lua's reply: a bare fencing token is a
// grant made now with the TTL asked for, ttl.
func (lockType) acquireReply(r *Backend, cmd *redis.Cmd, ttl time.Duration) (reply, error) {
	if rp, ok := grantedNow(cmd, ttl); ok {
		return rp, nil
	}
	out, err := cmd.Int64Slice()
	if err != nil {
		return reply{}, err
	}
	if len(out) >= 2 && out[0] == codeSharedFull {
		return reply{refused: &locks.HeldError{RetryAfter: millis(out[1]), SharedFull: r.opts.MaxSharedHolders}}, nil
	}
	return parseReply(out)
}

// callLeave runs lua/leave.lua.
func (lockType) callLeave(ctx context.Context, r *Backend, key locks.Key, id, fence string, a leaveArgs) (rp reply, ackErr, err error) {
	k := r.lockKeys(key).withToken(a.tokHash)
	cmd, ackErr := r.exec(ctx, leaveScript, id, fence, k.all(), append(a.argv(r), r.arg.opts)...)
	rp, err = parseLeave(cmd.Int64Slice())
	return rp, ackErr, err
}

// callRelease runs lua/release.lua. It hands the lock on, in full to a
// waiter of this gateway if one is next (see releaseReply.near).
func (lockType) callRelease(ctx context.Context, r *Backend, key locks.Key, id, fence string, a releaseArgs) (rp releaseReply, ackErr, err error) {
	k := r.lockKeys(key).withToken(a.tokHash)
	args := append(make([]any, 0, 7), a.tokHash, r.arg.opts, a.hold)
	if a.session != "" || a.member {
		args = append(args, a.session)
	}
	if a.member {
		args = append(args, "1")
	}
	cmd, ackErr := r.exec(ctx, releaseScript, id, fence, k.all(), args...)
	rp, err = parseRelease(cmd.Result())
	return rp, ackErr, err
}

// beat is the call of lua/heartbeat.lua.
func (lockType) beat(r *Backend, key locks.Key, ids []string) beatCall {
	return beatCall{script: heartbeatScript, keys: r.lockKeys(key).all(), args: r.beatArgs(ids, r.arg.opts)}
}

// modeArg is how the lock scripts name a mode.
func modeArg(m locks.Mode) string {
	if m == locks.Shared {
		return modeShared
	}
	return modeExclusive
}

// renewArgs are ARGV of lua/renew.lua and lua/sem_renew.lua.
type renewArgs struct {
	tokHash string
	ttl     time.Duration // 0: the TTL the grant was acquired with
	// callID is the call's id, and fence the id of an earlier renew of
	// the grant whose outcome is unknown, to fence off ("" for none): see
	// renewFencing.
	callID, fence string
}

// renewReply is a renew script's reply: the lease it set, or why the token
// holds nothing.
type renewReply struct {
	fence     int64
	ttl       time.Duration
	mode      locks.Mode
	capLeft   time.Duration         // how long until the grant's hard cap; -1: none
	notHolder *locks.NotHolderError // nil when renewed
}

// parseRenew reads {GRANTED, fence, ttl[, shared[, cap]]} or {NOT_GRANTED,
// why}. A semaphore's renewal says shared 0, and only with a cap.
func parseRenew(out []int64, err error) (renewReply, error) {
	switch {
	case err != nil:
		return renewReply{}, err
	case len(out) >= 3 && out[0] == codeGranted:
		rp := renewReply{fence: out[1], ttl: millis(out[2]), capLeft: -1}
		if len(out) >= 4 && out[3] == 1 {
			rp.mode = locks.Shared
		}
		if len(out) >= 5 {
			rp.capLeft = millis(max(out[4], 0))
		}
		return rp, nil
	case len(out) >= 1 && out[0] != codeGranted:
		return renewReply{notHolder: notHolder(out)}, nil
	}
	return renewReply{}, unexpectedReply(out)
}

// callRenew runs lua/renew.lua on key's lock. ackErr says the replicas did
// not acknowledge it (see exec).
func (r *Backend) callRenew(ctx context.Context, key locks.Key, a renewArgs) (rp renewReply, ackErr, err error) {
	k := r.lockKeys(key).withToken(a.tokHash)
	cmd, ackErr := r.exec(ctx, renewScript, a.callID, a.fence, k.all(), a.tokHash, a.ttl.Milliseconds(), r.arg.opts)
	rp, err = parseRenew(cmd.Int64Slice())
	return rp, ackErr, err
}

// valueReply is lua/value.lua's reply.
type valueReply struct {
	fence     int64
	notHolder *locks.NotHolderError // the token holds nothing
	shared    bool                  // the token holds a shared hold
}

// callValue runs lua/value.lua on key's lock: value becomes the value of
// the grant of the token whose hash is tokHash.
func (r *Backend) callValue(ctx context.Context, key locks.Key, tokHash, value string) (valueReply, error) {
	k := r.lockKeys(key).withToken(tokHash)
	cmd, _ := r.run(ctx, valueScript, k.all(), tokHash, value, r.arg.opts) // not acked: no error
	out, err := cmd.Int64Slice()
	switch {
	case err != nil:
		return valueReply{}, err
	case len(out) >= 2 && out[0] == codeGranted:
		return valueReply{fence: out[1]}, nil
	case len(out) >= 1 && out[0] == codeOtherMode:
		return valueReply{shared: true}, nil
	case len(out) >= 1 && out[0] == codeNotGranted:
		return valueReply{notHolder: notHolder(out)}, nil
	}
	return valueReply{}, unexpectedReply(out)
}

// reenterArgs are ARGV of lua/reenter.lua.
type reenterArgs struct {
	tokHash string
	ttl     time.Duration
	mode    locks.Mode
	hold    string // the new hold's id
}

// reenterReply is lua/reenter.lua's reply.
type reenterReply struct {
	granted   bool
	fence     int64
	ttl       time.Duration
	holds     int
	capLeft   time.Duration         // how long until the grant's hard cap; -1: none
	notHolder *locks.NotHolderError // the token holds nothing
	// otherMode: the caller holds the lock in the other mode, whose lease
	// ends in retry.
	otherMode bool
	retry     time.Duration
}

// callReenter runs lua/reenter.lua on key's lock as call id.
func (r *Backend) callReenter(ctx context.Context, key locks.Key, id string, a reenterArgs) (rp reenterReply, ackErr, err error) {
	k := r.lockKeys(key).withToken(a.tokHash)
	cmd, ackErr := r.exec(ctx, reenterScript, id, "", k.all(), a.tokHash, a.ttl.Milliseconds(), modeArg(a.mode), r.arg.opts, a.hold)
	out, err := cmd.Int64Slice()
	switch {
	case err != nil:
		return reenterReply{}, ackErr, err
	case len(out) >= 4 && out[0] == codeGranted:
		rp := reenterReply{granted: true, fence: out[1], ttl: millis(out[2]), holds: int(out[3]), capLeft: -1}
		if len(out) >= 5 {
			rp.capLeft = millis(max(out[4], 0))
		}
		return rp, ackErr, nil
	case len(out) >= 2 && out[0] == codeOtherMode:
		return reenterReply{otherMode: true, retry: millis(max(out[1], 0))}, ackErr, nil
	case len(out) >= 1 && out[0] == codeNotGranted:
		return reenterReply{notHolder: notHolder(out)}, ackErr, nil
	}
	return reenterReply{}, ackErr, unexpectedReply(out)
}

// ticketArgs are ARGV of lua/ticket.lua.
type ticketArgs struct {
	op      string // ticketNew, ticketPoll or ticketCancel
	id      string // the ticket's
	tokHash string
	// For ticketNew only: how long the ticket waits, and the request.
	wait, ttl      time.Duration
	subject, owner string
	mode           locks.Mode
	value          string
	maxHold        time.Duration // the grant's hard cap, 0 for none
	priority       int           // see locks.AcquireRequest.Priority
}

// ticketReply is lua/ticket.lua's reply.
type ticketReply struct {
	reply
	found   bool          // false: no such ticket with this token
	shared  bool          // the grant is of a shared hold
	capLeft time.Duration // how long until the grant's hard cap; -1: none
}

// callTicket runs lua/ticket.lua on key's lock as call id. ackErr says the
// replicas did not acknowledge it (see exec): a grant in its reply must not
// be answered.
func (r *Backend) callTicket(ctx context.Context, key locks.Key, id string, a ticketArgs) (rp ticketReply, ackErr, err error) {
	k := r.lockKeys(key).withToken(a.tokHash)
	args := append(make([]any, 0, 14), a.op, a.id, a.tokHash, r.arg.channel, r.opts.TicketLiveness.Milliseconds(),
		r.arg.retention, r.arg.checkHeard, r.arg.opts)
	if a.op == ticketNew {
		args = append(args, a.wait.Milliseconds(), a.ttl.Milliseconds(), a.subject, a.owner, modeArg(a.mode), a.value)
		if a.maxHold > 0 || a.priority > 0 {
			args = append(args, optionalMs(a.maxHold))
		}
		if a.priority > 0 {
			args = append(args, a.priority, r.headStart(a.priority))
		}
	}
	cmd, ackErr := r.exec(ctx, ticketScript, id, "", k.all(), args...)
	out, err := cmd.Int64Slice()
	switch {
	case err != nil:
		return ticketReply{}, ackErr, err
	case len(out) >= 1 && out[0] == codeNotFound:
		return ticketReply{reply: reply{rank: -1}}, ackErr, nil
	case len(out) >= 1 && out[0] == codeGaveBack:
		return ticketReply{reply: reply{rank: -1}, found: true}, ackErr, nil
	}
	rp.reply, err = parseReply(out)
	rp.found, rp.shared, rp.capLeft = true, len(out) > grantFields && out[grantFields] == 1, -1
	if len(out) > grantFields+1 {
		rp.capLeft = millis(max(out[grantFields+1], 0))
	}
	return rp, ackErr, err
}

// callInspect runs lua/inspect.lua on key's lock: its holders, as many as
// MaxHoldersShown, counted from start, and its index (Info.Index, also
// when nobody holds it); held is false when nobody holds it, and freeAt,
// then, until when a released grant's min hold keeps it from others (zero
// for none).
func (r *Backend) callInspect(ctx context.Context, key locks.Key, start time.Time) (info locks.Info, held bool, freeAt time.Time, err error) {
	k := r.lockKeys(key)
	history := "0"
	if r.opts.History > 0 {
		history = "1"
	}
	cmd, _ := r.run(ctx, inspectScript, []string{k.lock, k.queue, k.readers, k.fence}, locks.MaxHoldersShown, history)
	res, err := cmd.Slice()
	if err != nil {
		return locks.Info{}, false, time.Time{}, err
	}
	if len(res) == 0 {
		return locks.Info{}, false, time.Time{}, fmt.Errorf("inspect: an empty reply, where the index comes last")
	}
	last := res[len(res)-1]
	index, ok := last.(int64)
	if !ok {
		return locks.Info{}, false, time.Time{}, fmt.Errorf("inspect: index %v (%T), want an integer", last, last)
	}
	res = res[:len(res)-1]
	var prios []int
	res, prios = splitPriorities(res)
	if len(res) == 2 && res[0] == modeResting {
		until, _ := res[1].(int64)
		return locks.Info{Index: index}, false, time.UnixMilli(until).UTC(), nil
	}
	info, held = parseHolders(res, start)
	info.Index, info.QueuePriorities = index, prios
	return info, held, time.Time{}, nil
}

// splitPriorities splits the queue's priorities off a lock's holders as
// lua/inspect.lua and lua/watch.lua describe them: the digits after the
// holders, when anyone waits (nil when nobody does).
func splitPriorities(res []any) (holders []any, prios []int) {
	if n := len(res); n >= 4 && (n-4)%holderFields == 1 {
		return res[:n-1], parsePriorities(res[n-1])
	}
	return res, nil
}

// parsePriorities reads a queue's priorities as lua/prios.lua answers
// them: one digit per waiter.
func parsePriorities(v any) []int {
	digits, _ := v.(string)
	var prios []int
	for _, d := range digits {
		prios = append(prios, int(d-'0'))
	}
	return prios
}

// parseHolders reads the holders of a lock as lua/lib_describe.lua
// describes them, their leases counted from start; held is false when
// nobody holds it.
func parseHolders(res []any, start time.Time) (info locks.Info, held bool) {
	const fields = holderFields // per holder, after mode, waiters, now and holders (see lua/inspect.lua)
	if len(res) < 4+fields {
		return locks.Info{}, false
	}
	info.Mode = locks.Exclusive
	if m, _ := res[0].(string); m == modeShared {
		info.Mode = locks.Shared
	}
	waiting, _ := res[1].(int64)
	now, _ := res[2].(int64)
	total, _ := res[3].(int64)
	info.Waiters, info.HoldersTotal = int(waiting), int(total)
	for i := 4; i+fields <= len(res); i += fields {
		fence, _ := res[i].(int64)
		pttl, _ := res[i+1].(int64)
		subject, _ := res[i+2].(string)
		owner, _ := res[i+3].(string)
		at, _ := res[i+4].(int64)
		holds, _ := res[i+5].(int64)
		ids, _ := res[i+6].(string)
		value, _ := res[i+7].(string)
		capAt, _ := res[i+8].(int64)
		ttl := millis(max(pttl, 0))
		lease := locks.Lease{FencingToken: fence, TTL: ttl, ExpiresAt: start.Add(ttl)}
		if capAt > 0 {
			lease.HoldUntil = start.Add(millis(max(capAt-now, 0)))
			lease = lease.WithinHold()
		}
		info.Holders = append(info.Holders, locks.Holder{
			Lease:      lease,
			Subject:    subject,
			Owner:      owner,
			AcquiredAt: time.UnixMilli(at).UTC(),
			Holds:      int(max(holds, 1)),
			HoldIDs:    strings.Fields(ids),
			Value:      value,
		})
	}
	return info, true
}

// callHistory runs lua/history.lua on key's lock: its last events, as many
// as the backend keeps, newest first.
func (r *Backend) callHistory(ctx context.Context, key locks.Key) ([]locks.Event, error) {
	k := r.lockKeys(key)
	cmd, _ := r.run(ctx, historyScript, []string{k.fence}, r.opts.History)
	out, err := cmd.StringSlice()
	if err != nil {
		return nil, err
	}
	return decodeEvents(out)
}

// decodeEvents reads events as lua/lib_history.lua event writes them:
// JSON, the numbers as strings.
func decodeEvents(out []string) ([]locks.Event, error) {
	events := make([]locks.Event, 0, len(out))
	for _, s := range out {
		var e struct {
			E, S, O, B, V, SS string
			T, F, I           int64 `json:",string"`
		}
		if err := json.Unmarshal([]byte(s), &e); err != nil {
			return nil, fmt.Errorf("an event Redis holds does not decode: %w", err)
		}
		events = append(events, locks.Event{Kind: e.E, At: time.UnixMilli(e.T).UTC(), Subject: e.S, Owner: e.O, FencingToken: e.F, By: e.B, Value: e.V, Session: e.SS, Index: e.I})
	}
	return events, nil
}
