package locks

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"
)

// Code is the kind of an engine error, in one word. Every user of the
// engine (the HTTP problem table, metrics, traces, the benchmark) sorts
// errors by ErrorCode alone and maps the codes in a small table of its own,
// so a new error is classified once, here.
type Code string

// The codes, in the order ErrorCode tries them.
const (
	CodeOK                    Code = ""                         // no error
	CodeHeld                  Code = "held"                     // ErrHeld: someone else holds the lock
	CodeFull                  Code = "full"                     // ErrFull: every permit is taken
	CodeLimitMismatch         Code = "limit_mismatch"           // ErrLimitMismatch
	CodeIdempotencyMismatch   Code = "idempotency_key_mismatch" // ErrIdempotencyMismatch
	CodeIdempotencyInProgress Code = "idempotency_in_progress"  // ErrIdempotencyInProgress
	CodeGrantEnded            Code = "grant_ended"              // ErrGrantEnded
	CodeNotHolder             Code = "not_holder"               // ErrNotHolder
	CodeTicketNotFound        Code = "ticket_not_found"         // ErrTicketNotFound
	CodeSessionEnded          Code = "session_ended"            // ErrSessionEnded
	CodeSessionNotYours       Code = "session_not_yours"        // ErrSessionNotYours
	CodeSessionFull           Code = "session_full"             // ErrSessionFull
	CodeTooManySessions       Code = "too_many_sessions"        // ErrTooManySessions
	CodeNotHeld               Code = "not_held"                 // ErrNotHeld
	CodeInvalidPriority       Code = "invalid_priority"         // ErrInvalidPriority
	CodeInvalid               Code = "invalid"                  // ErrInvalid: the arguments were refused
	CodeUnavailable           Code = "unavailable"              // ErrUnavailable: the outcome is unknown
	CodeCancelled             Code = "cancelled"                // the call's context ended
	CodeInternal              Code = "internal"                 // anything else: a bug, or an error of another package
)

// codes are the sentinel errors behind each code, in the order they are
// tried: an error that matches two has the first. A backend call that
// failed because its caller left (ErrUnavailable around context.Canceled)
// is a cancellation, not a failure, or any caller could set off alerts on
// the error rate by hanging up; one that ran out of the backend's own time
// (ErrUnavailable around context.DeadlineExceeded) is a failure.
var codes = []struct {
	err  error
	code Code
}{
	{ErrHeld, CodeHeld},
	{ErrFull, CodeFull},
	{ErrLimitMismatch, CodeLimitMismatch},
	{ErrIdempotencyMismatch, CodeIdempotencyMismatch},
	{ErrIdempotencyInProgress, CodeIdempotencyInProgress},
	{ErrGrantEnded, CodeGrantEnded},
	{ErrNotHolder, CodeNotHolder},
	{ErrTicketNotFound, CodeTicketNotFound},
	{ErrSessionEnded, CodeSessionEnded},
	{ErrSessionNotYours, CodeSessionNotYours},
	{ErrSessionFull, CodeSessionFull},
	{ErrTooManySessions, CodeTooManySessions},
	{ErrNotHeld, CodeNotHeld},
	{ErrInvalidPriority, CodeInvalidPriority},
	{ErrInvalid, CodeInvalid},
	{context.Canceled, CodeCancelled},
	{ErrUnavailable, CodeUnavailable},
	{context.DeadlineExceeded, CodeCancelled},
}

// ErrorCode returns the code of err: CodeOK for nil, CodeInternal for an
// error that is none of the engine's.
func ErrorCode(err error) Code {
	if err == nil {
		return CodeOK
	}
	for _, c := range codes {
		if errors.Is(err, c.err) {
			return c.code
		}
	}
	return CodeInternal
}

var (
	// ErrHeld means the lock is held by someone else; errors.As it into a
	// *HeldError for the holder's remaining TTL.
	ErrHeld = errors.New("lock held")
	// ErrNotHolder means the token does not hold the lock: it was released,
	// it expired, or another grant holds the lock now.
	ErrNotHolder = errors.New("not the lock holder")
	// ErrNotHeld means nobody holds the lock.
	ErrNotHeld = errors.New("lock not held")
	// ErrInvalid means the arguments were invalid.
	ErrInvalid = errors.New("invalid argument")
	// ErrInvalidPriority means a priority out of range (see
	// AcquireRequest.Priority). It matches ErrInvalid too.
	ErrInvalidPriority = fmt.Errorf("%w: a priority is 0 to %d", ErrInvalid, MaxPriority)
	// ErrUnavailable means the backend failed or did not answer in time. The
	// outcome of the operation is unknown to the caller.
	ErrUnavailable = errors.New("lock backend unavailable")
	// ErrTookNothing comes wrapped in an ErrUnavailable: an acquire reached
	// the backend after its owner token's wait or grant had ended, and took
	// nothing. Only a late delivery should meet it; a call still waited for
	// meets it when another party ended the grant before its pick-up (a
	// session's end, see SessionEngine).
	ErrTookNothing = errors.New("a late delivery of an acquire took nothing")
	// ErrNotSent comes wrapped in an ErrUnavailable: the backend was not
	// ready for the call within its timeout (the Redis backend's
	// subscription to hand-offs, which a waiting acquire needs before it
	// queues), and never sent it. Nothing was done; a retry is safe.
	ErrNotSent = errors.New("the backend was not ready in time, and the call was not sent")

	// ErrFull means every permit of the semaphore is taken; errors.As it
	// into a *FullError for when the soonest lease ends.
	ErrFull = errors.New("semaphore full")
	// ErrLimitMismatch means the semaphore is in use with another limit;
	// errors.As it into a *LimitMismatchError for that limit.
	ErrLimitMismatch = errors.New("semaphore limit mismatch")

	// ErrIdempotencyMismatch means the idempotency key was used with
	// another request: another TTL, wait, owner label or limit.
	ErrIdempotencyMismatch = errors.New("idempotency key used for another request")
	// ErrIdempotencyInProgress means a call with the idempotency key still
	// runs; errors.As it into an *InProgressError for when to retry.
	ErrIdempotencyInProgress = errors.New("a call with this idempotency key is in progress")
	// ErrGrantEnded means the grant of the idempotency key was released or
	// its lease ended; the key is still remembered. Acquire with a new key.
	ErrGrantEnded = errors.New("the grant of this idempotency key has ended")

	// ErrTicketNotFound means there is no such ticket for this token: it was
	// never made, it left, it was not polled in time, its wait ran out, its
	// grant ended, or the token is another's.
	ErrTicketNotFound = errors.New("no such ticket")

	// ErrSessionEnded means there is no live session of the token: it
	// was ended, its lease ran out, or it never was.
	ErrSessionEnded = errors.New("no live session")
	// ErrSessionNotYours means the session was opened by another subject.
	ErrSessionNotYours = errors.New("the session belongs to another subject")
	// ErrSessionFull means the session holds its most grants
	// (DefaultSessionMaxHolds, or the backend's SessionMaxHolds).
	ErrSessionFull = errors.New("the session holds its most grants")
	// ErrTooManySessions means the subject has its most live sessions
	// (SessionEngine.MaxPerSubject): another is opened once one ends.
	ErrTooManySessions = errors.New("the caller has its most live sessions")
)

// Reason says why a token holds nothing (see NotHolderError).
type Reason string

// The reasons.
const (
	// ReasonReleased: the grant was released.
	ReasonReleased Reason = "released"
	// ReasonExpired: the grant's lease ended without a release.
	ReasonExpired Reason = "expired"
	// ReasonBroken: an administrator broke the lock (Breaker), which
	// ended the grant.
	ReasonBroken Reason = "broken"
	// ReasonUnknown: the token was never granted, or its grant ended
	// longer ago than the backend remembers (RecordTTL).
	ReasonUnknown Reason = "unknown"
)

// NotHolderError is ErrNotHolder with the reason the token holds nothing.
type NotHolderError struct {
	Reason Reason
}

func (e *NotHolderError) Error() string { return "not the holder (" + string(e.Reason) + ")" }

// Is makes errors.Is(err, ErrNotHolder) true.
func (e *NotHolderError) Is(target error) bool { return target == ErrNotHolder }

// HeldError is returned by Acquire when the lock is held.
type HeldError struct {
	// RetryAfter is the remaining TTL of the current holder.
	RetryAfter time.Duration
	// MinHold is set when nobody holds the lock, and a released grant's
	// min hold (AcquireRequest.MinHold) keeps it from others: RetryAfter
	// is then when that ends.
	MinHold bool
	// FreeAt, with MinHold, is until when the lock is kept from others,
	// on the backend's clock: RetryAfter from the backend's now, the min
	// hold's end (NotHeldError.FreeAt) unless a longer lock delay follows
	// it. Zero when the backend does not know it.
	FreeAt time.Time
	// SharedFull, when above 0, says that the lock is held shared by
	// SharedFull holders, the most it may have (MaxSharedHolders), and that
	// this is why a shared request that does not wait was refused;
	// RetryAfter is then when the soonest of their leases ends.
	SharedFull int
}

func (e *HeldError) Error() string {
	if e.SharedFull > 0 {
		return fmt.Sprintf("lock held by %d shared holders, its most, retry after %s", e.SharedFull, e.RetryAfter)
	}
	return fmt.Sprintf("lock held, retry after %s", e.RetryAfter)
}

// Is makes errors.Is(err, ErrHeld) true.
func (e *HeldError) Is(target error) bool { return target == ErrHeld }

// NotHeldError is ErrNotHeld from Inspect: nobody holds the lock, whose
// index (see Watcher) was Index, as Watch with an index below 0 reports
// it: a watch from it returns at the next change. FreeAt, when not zero,
// is until when a released grant's MinHold keeps the lock from new
// holders.
type NotHeldError struct {
	Key    Key
	Index  int64
	FreeAt time.Time
}

func (e *NotHeldError) Error() string {
	msg := "inspect " + e.Key.String() + ": " + ErrNotHeld.Error()
	if !e.FreeAt.IsZero() {
		msg += ", kept by its last grant's min hold until " + e.FreeAt.UTC().Format(time.RFC3339Nano)
	}
	return msg
}

// Is makes errors.Is(err, ErrNotHeld) true.
func (e *NotHeldError) Is(target error) bool { return target == ErrNotHeld }

// Unavailable wraps a backend failure so that it matches ErrUnavailable and
// still unwraps to its cause.
func Unavailable(op string, what fmt.Stringer, cause error) error {
	return fmt.Errorf("%s %s: %w: %w", op, what, ErrUnavailable, cause)
}

// FullError is returned by AcquirePermit when every permit is taken.
type FullError struct {
	// RetryAfter is the time until the soonest lease ends.
	RetryAfter time.Duration
}

func (e *FullError) Error() string {
	return fmt.Sprintf("semaphore full, retry after %s", e.RetryAfter)
}

// Is makes errors.Is(err, ErrFull) true.
func (e *FullError) Is(target error) bool { return target == ErrFull }

// LimitMismatchError is returned by AcquirePermit for a limit other than
// the one in force.
type LimitMismatchError struct {
	// Limit is the limit in force.
	Limit int
}

func (e *LimitMismatchError) Error() string {
	return fmt.Sprintf("semaphore in use with limit %d", e.Limit)
}

// Is makes errors.Is(err, ErrLimitMismatch) true.
func (e *LimitMismatchError) Is(target error) bool { return target == ErrLimitMismatch }

// InProgressError is returned while the first call with a key still runs.
type InProgressError struct {
	// RetryAfter is a good time to wait before trying again.
	RetryAfter time.Duration
}

func (e *InProgressError) Error() string {
	return fmt.Sprintf("a call with this idempotency key is in progress, retry after %s", e.RetryAfter)
}

// Is makes errors.Is(err, ErrIdempotencyInProgress) true.
func (e *InProgressError) Is(target error) bool { return target == ErrIdempotencyInProgress }

// ReplicaError says that fewer Redis replicas than the backend requires
// (RedisOptions.MinReplicas) acknowledged the writes of a grant or a renew
// within RedisOptions.ReplicaTimeout. It comes wrapped with ErrUnavailable:
// a grant was released again; a renewed lease is longer on the primary but
// perhaps not on the replicas.
type ReplicaError struct {
	Acked, Want int
	// Renew is set for a renew, whose lease may or may not be extended.
	Renew bool
	// Resize is set for a semaphore's resize, whose new limit may or may
	// not outlive a failover.
	Resize bool
	// Err is why the acknowledgements were not counted (a WAIT that timed
	// out on the client side, a broken connection), if that was the cause.
	Err error
}

func (e *ReplicaError) Error() string {
	s := fmt.Sprintf("%d of %d replicas acknowledged", e.Acked, e.Want)
	if e.Err != nil {
		s += ": " + e.Err.Error()
	}
	return s
}

func (e *ReplicaError) Unwrap() error { return e.Err }

// Detail words the error for the caller.
func (e *ReplicaError) Detail() string {
	acked := strconv.Itoa(e.Acked) + " of the " + strconv.Itoa(e.Want) + " Redis replicas this gateway requires acknowledged it"
	if e.Err != nil {
		acked = "the gateway could not count the acknowledgements of the Redis replicas it requires"
	}
	if e.Resize {
		return "the replicas did not acknowledge the new limit (" + acked + "): it is in force on the Redis primary, " +
			"and may or may not be on the replicas, so a failover now could bring back the old limit; resize again"
	}
	if e.Renew {
		return "the replicas did not acknowledge the renewed lease (" + acked + "): it is extended on the Redis primary, " +
			"and may or may not be on the replicas, so a failover now could bring back the old lease; renew again"
	}
	return "the replicas did not acknowledge the grant (" + acked + "); it was released and nothing is held: retry"
}

// Renewed marks a ReplicaError as a renew's.
func Renewed(err error) error {
	if re, ok := err.(*ReplicaError); ok {
		c := *re
		c.Renew = true
		return &c
	}
	return err
}

// Resized marks a ReplicaError as a resize's.
func Resized(err error) error {
	if re, ok := err.(*ReplicaError); ok {
		c := *re
		c.Resize = true
		return &c
	}
	return err
}

// EvictionError means a Redis node may evict keys, live locks included:
// its maxmemory-policy is not noeviction. The backend must not serve.
type EvictionError struct {
	// Policy is the node's maxmemory-policy, e.g. "allkeys-lru".
	Policy string
	// Addr is the node that reported it (host:port). It is left out of
	// Detail: callers of /readyz need not learn the Redis address.
	Addr string
}

func (e *EvictionError) Error() string {
	return e.Detail() + " (Redis at " + e.Addr + ")"
}

// Detail is the message without the node's address, safe to show a caller.
func (e *EvictionError) Detail() string {
	return "Redis maxmemory-policy is " + e.Policy + ": it may evict live locks; set maxmemory-policy " + SafePolicy
}

// PolicyUnknownError means a Redis node refused to say its maxmemory-policy,
// as managed services that rename or forbid CONFIG do. The node answers, so
// the backend can serve; whoever runs it must check the policy by other
// means (the provider's parameter group or console).
type PolicyUnknownError struct {
	Addr string
	// Err is the node's answer to CONFIG GET maxmemory-policy.
	Err error
}

func (e *PolicyUnknownError) Error() string {
	return fmt.Sprintf("Redis %s refused CONFIG GET maxmemory-policy (%v): lockgate cannot tell whether it may evict live locks; "+
		"make sure maxmemory-policy is %s (on a managed service, in its parameter group or settings), "+
		"or allow CONFIG GET to the gateway's user", e.Addr, e.Err, SafePolicy)
}

func (e *PolicyUnknownError) Unwrap() error { return e.Err }
