package redisbackend

import (
	"fmt"
	"time"

	"github.com/lockgate/lockgate/locks"

	"github.com/redis/go-redis/v9"

	"github.com/lockgate/lockgate/lua"
)

// script is one of package lua's scripts, ready to run: only through
// Redis.exec (or the heartbeat's pipeline), by the typed call of it that
// builds its KEYS and ARGV.
type script struct {
	*redis.Script
	// writes, once, keyed and acked are lua.Script's Writes, Once, Keyed
	// and Acked.
	writes, once, keyed, acked bool
	// function and library are lua.Script's Function and Library: the
	// engine calls the function, and loads the library where Redis lacks it.
	function, library string
}

// wrapped are the scripts that newScript made, by name.
var wrapped = map[string]*script{}

// newScript wraps the script called name. A name package lua does not have
// is a mistake in this package, found when it loads.
func newScript(name string) *script {
	s, ok := lua.Named(name)
	if !ok {
		panic("locks: package lua has no script " + name)
	}
	w := &script{Script: redis.NewScript(s.Source), writes: s.Writes, once: s.Once, keyed: s.Keyed, acked: s.Acked,
		function: s.Function, library: s.Library}
	wrapped[name] = w
	return w
}

// The scripts.
var (
	acquireScript   = newScript("acquire")
	releaseScript   = newScript("release")
	leaveScript     = newScript("leave")
	heartbeatScript = newScript("heartbeat")
	renewScript     = newScript("renew")
	breakScript     = newScript("break")
	reenterScript   = newScript("reenter")
	valueScript     = newScript("value")
	ticketScript    = newScript("ticket")
	inspectScript   = newScript("inspect")
	historyScript   = newScript("history")
	indexScript     = newScript("index")
	indexedScript   = newScript("indexed")
	listScript      = newScript("list")
	watchScript     = newScript("watch")
	watchingScript  = newScript("watching")

	semAcquireScript   = newScript("sem_acquire")
	semReleaseScript   = newScript("sem_release")
	semLeaveScript     = newScript("sem_leave")
	semHeartbeatScript = newScript("sem_heartbeat")
	semRenewScript     = newScript("sem_renew")
	semInspectScript   = newScript("sem_inspect")
	semResizeScript    = newScript("sem_resize")

	idemBeginScript = newScript("idem_begin")
	idemDoneScript  = newScript("idem_done")
	idemAbortScript = newScript("idem_abort")
)

// reply is what the acquire and leave scripts say about the caller's grant.
type reply struct {
	granted bool
	fence   int64
	ttl     time.Duration // the grant's remaining lease, or when to retry
	now     int64         // ms on the Redis clock when the script ran
	at      int64         // ms on the Redis clock when the grant was made
	handed  bool          // the grant was made before the call: handed over
	rank    int64         // the waiter's place in the queue, -1 if not queued
	arrival int64         // the waiter's arrival number
	resting bool          // refused: nobody holds it, a released grant's min hold keeps it
	// refused is why an acquire script refused the request without
	// changing anything (a semaphore's other limit, a lock's most shared
	// holders), or nil.
	refused error
}

// parseReply reads {GRANTED, fence, ttl, now, at, handed, ...},
// {GRANTED, fence, ttl} (a grant made now, whose lease is counted from
// when the call was sent, as a bare fencing token's is: see grantedNow) or
// {NOT_GRANTED, retry, now, [rank, arrival]}.
func parseReply(res []int64) (reply, error) {
	switch {
	case len(res) >= grantFields && res[0] == codeGranted:
		return reply{granted: true, fence: res[1], ttl: millis(res[2]), now: res[3], at: res[4], handed: res[5] == 1}, nil
	case len(res) == grantedNowFields && res[0] == codeGranted:
		return reply{granted: true, fence: res[1], ttl: millis(res[2])}, nil
	case len(res) == 1 && res[0] == codeFencedOff:
		return reply{}, errFencedOff
	case len(res) >= 3 && res[0] == codeNotGranted:
		rp := reply{ttl: millis(max(res[1], 0)), now: res[2], rank: -1}
		if len(res) >= queuedFields {
			rp.rank, rp.arrival = res[3], res[4]
		}
		rp.resting = len(res) > queuedFields && res[queuedFields] == 1
		return rp, nil
	}
	return reply{}, unexpectedReply(res)
}

// grantedNow reads an acquire script's reply that is a bare fencing
// token: a grant made now with the TTL asked for, ttl, which the script
// answers with nothing more (lua/lib_grant.lua granted_now). ok is false
// for any other reply.
func grantedNow(cmd *redis.Cmd, ttl time.Duration) (rp reply, ok bool) {
	fence, err := cmd.Int64()
	if err != nil {
		return reply{}, false
	}
	return reply{granted: true, fence: fence, ttl: millis(ttl.Milliseconds())}, true
}

// errFencedOff is an acquire's reply when Redis received the call only
// after its token's wait ended, or after its grant ended (lua/acquire.lua):
// it took nothing. Only a late delivery, which nobody waits for, gets it.
var errFencedOff = fmt.Errorf("fenced off: %w", locks.ErrTookNothing)

// lease is the granted lease, counted from start, when the call was sent:
// never later than the lease Redis keeps. maxHold is the grant's hard cap
// (0: none), which ends it at its acquisition plus maxHold, as Redis keeps
// it (K.lock's cap): counted from start, as the lease is.
func (rp reply) lease(start time.Time, maxHold time.Duration) locks.Lease {
	l := locks.Lease{FencingToken: rp.fence, TTL: rp.ttl, ExpiresAt: start.Add(rp.ttl)}
	if maxHold > 0 {
		l.HoldUntil = start.Add(millis(max(rp.at+maxHold.Milliseconds()-rp.now, 0)))
	}
	return l.WithinHold()
}

// handoffDelay is, for a grant handed over before this call picked it up,
// at most how long passed from the hand-off until now.
func (rp reply) handoffDelay(start time.Time) time.Duration {
	if !rp.handed {
		return 0
	}
	return millis(max(rp.now-rp.at, 0)) + time.Since(start)
}

// notHolder reads a script's {NOT_GRANTED, why} (see lua/lib_record.lua).
func notHolder(out []int64) *locks.NotHolderError {
	reason := locks.ReasonUnknown
	if len(out) > 1 {
		switch out[1] {
		case whyReleased:
			reason = locks.ReasonReleased
		case whyExpired:
			reason = locks.ReasonExpired
		case whyBroken:
			reason = locks.ReasonBroken
		}
	}
	return &locks.NotHolderError{Reason: reason}
}

// unexpectedReply is the error for a reply of a shape no script gives.
func unexpectedReply(out any) error {
	return fmt.Errorf("unexpected reply of a script: %v", out)
}

// optionalMs is an optional duration as a script argument: in ms, or the
// empty string for none (0), as the scripts read an argument they may go
// without.
func optionalMs(d time.Duration) any {
	if d > 0 {
		return d.Milliseconds()
	}
	return ""
}
