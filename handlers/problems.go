package handlers

import (
	"context"
	"encoding/json"
	"errors"
	"math"
	"net"
	"net/http"
	"strconv"
	"syscall"
	"time"

	"github.com/rs/zerolog"

	"github.com/lockgate/lockgate/auth"
	"github.com/lockgate/lockgate/locks"
	"github.com/lockgate/lockgate/ratelimit"
)

// problem is what the caller sees for one kind of error.
type problem struct {
	status int
	code   ProblemCode
	title  string
	// detail is shown when the error itself has no safe detail (see
	// detailer); detailOf, when set, words it from the error instead.
	detail   string
	detailOf func(err error) string
	// header adds headers that belong to this kind of error.
	header func(h http.Header, err error)
	// extend adds the fields that belong to this kind of error to the body.
	extend func(b *problemBody, err error)
}

// detailer is implemented by our own errors whose text is safe and useful to
// show a caller. Any other error's text (a library's, a Redis address) never
// reaches a response body.
type detailer interface{ Detail() string }

// engineProblems maps each code of the lock engine's errors (locks.ErrorCode)
// to its answer. A code that is not here is a 500.
var engineProblems = map[locks.Code]problem{
	locks.CodeHeld: {status: http.StatusConflict, code: ProblemCodeLockHeld, title: "Lock held",
		detail: "someone else holds the lock", header: retryAfterHeld, extend: lockHeld},
	locks.CodeLimitMismatch: {status: http.StatusConflict, code: ProblemCodeLimitMismatch, title: "Limit mismatch",
		detail: "the semaphore is in use with another limit", extend: limitMismatch},
	locks.CodeFull: {status: http.StatusConflict, code: ProblemCodeSemaphoreFull, title: "Semaphore full",
		detail: "every permit of the semaphore is taken", header: retryAfterFull, extend: semaphoreFull},
	locks.CodeIdempotencyMismatch: {status: http.StatusUnprocessableEntity, code: ProblemCodeIdempotencyKeyMismatch, title: "Idempotency key mismatch",
		detail: "this Idempotency-Key was used for a request with another body; nothing was acquired: send the first body, or use a new key"},
	locks.CodeIdempotencyInProgress: {status: http.StatusConflict, code: ProblemCodeIdempotencyInProgress, title: "Idempotent request in progress",
		detail: "a call with this Idempotency-Key is still running (waiting, perhaps); ask again after Retry-After", header: retryAfterInProgress, extend: inProgress},
	locks.CodeGrantEnded: {status: http.StatusConflict, code: ProblemCodeGrantEnded, title: "Grant ended",
		detail: "the grant of this Idempotency-Key was released or its lease ended; to acquire again, use a new key"},
	locks.CodeNotHolder: {status: http.StatusConflict, code: ProblemCodeNotHolder, title: "Not the holder",
		detail: "the Lock-Token does not hold this lock: it was released, it expired, or someone else holds the lock now", extend: notHolder},
	locks.CodeTicketNotFound: {status: http.StatusNotFound, code: ProblemCodeNotFound, title: "Ticket not found",
		detail: "no such ticket: its wait ran out, it was not polled in time, it was closed, its grant ended, or the Ticket-Token is not its token"},
	locks.CodeNotHeld: {status: http.StatusNotFound, code: ProblemCodeNotHeld, title: "Lock not held",
		detail: "nobody holds this lock", header: retryAfterNotHeld, extend: notHeld},
	locks.CodeSessionEnded: {status: http.StatusNotFound, code: ProblemCodeSessionEnded, title: "No live session",
		detail: "no live session of this Session-Token: it was ended, its lease ran out, or it never was; its grants ended with it: open a new session"},
	locks.CodeSessionNotYours: {status: http.StatusForbidden, code: ProblemCodeSessionNotYours, title: "Not your session",
		detail: "the session was opened by another caller; nothing was changed"},
	locks.CodeTooManySessions: {status: http.StatusTooManyRequests, code: ProblemCodeTooManySessions, title: "Too many sessions",
		detail: "the caller holds its most live sessions (the gateway's --subject-max-sessions); end one, or let one expire, before opening another"},
	locks.CodeSessionFull: {status: http.StatusConflict, code: ProblemCodeSessionFull, title: "Session full",
		detail: "the session holds its most grants (the gateway's --session-max-holds); nothing was acquired: release one, or open another session"},
	locks.CodeInvalidPriority: {status: http.StatusBadRequest, code: ProblemCodeInvalidPriority, title: "Invalid priority",
		detail: "priority must be an integer from 0 to 9"},
	locks.CodeInvalid: {status: http.StatusBadRequest, code: ProblemCodeInvalidRequest, title: "Invalid request",
		detail: "the request is invalid"},
	locks.CodeUnavailable: {status: http.StatusServiceUnavailable, code: ProblemCodeBackendUnavailable, title: "Backend unavailable",
		detail: "the lock backend did not answer in time; the outcome of the call is unknown", detailOf: unavailableDetail, header: retryAfter1},
	// A caller that left gets no answer (see clientLeft). This is a
	// cancellation the caller did not cause: the gateway's own.
	locks.CodeCancelled: {status: http.StatusServiceUnavailable, code: ProblemCodeBackendUnavailable, title: "Request cancelled",
		detail: "the request was cancelled before it completed", header: retryAfter1},
}

// timedOut is the answer to a call that ran out of its gateway's own time
// (locks.CodeCancelled from a deadline).
var timedOut = problem{status: http.StatusServiceUnavailable, code: ProblemCodeBackendUnavailable, title: "Request timed out",
	detail: "the request did not complete in time", header: retryAfter1}

// gatewayProblems are the answers to the gateway's own errors, which never
// wrap an engine error: the first whose error matches (errors.Is) wins.
var gatewayProblems = []struct {
	match error
	problem
}{
	{errInvalidRequest, problem{status: http.StatusBadRequest, code: ProblemCodeInvalidRequest, title: "Invalid request",
		detail: "the request is invalid"}},
	{errTooLarge, problem{status: http.StatusRequestEntityTooLarge, code: ProblemCodePayloadTooLarge, title: "Payload too large",
		detail: "the request body is larger than " + strconv.Itoa(MaxBodyBytes>>10) + " KiB"}},
	{errTooManyWaiters, problem{status: http.StatusTooManyRequests, code: ProblemCodeTooManyRequests, title: "Too many waiters",
		detail: "the gateway is at its limit of waiting acquirers; nothing was changed: retry later, or without wait_ms", header: retryAfter1}},
	{errTooManyWatchers, problem{status: http.StatusServiceUnavailable, code: ProblemCodeTooManyWatchers, title: "Too many watchers",
		detail: "the gateway serves its most watches at once (--max-watchers); retry later, perhaps through another gateway", header: retryAfter1}},
	{errTooManySubjectWatchers, problem{status: http.StatusTooManyRequests, code: ProblemCodeTooManyRequests, title: "Too many watchers",
		detail: "this subject holds its most watches at once on this gateway (--subject-max-watchers); close one, or retry later", header: retryAfter1}},
	{ratelimit.ErrTooManyRequests, problem{status: http.StatusTooManyRequests, code: ProblemCodeTooManyRequests, title: "Too many requests",
		detail: "this subject is over its share of the gateway; retry later", header: rateLimitHeaders}},
	{auth.ErrUnauthenticated, problem{status: http.StatusUnauthorized, code: ProblemCodeUnauthorized, title: "Unauthorized",
		detail: "a valid bearer token is required", header: wwwAuthenticate}},
	{auth.ErrForbidden, problem{status: http.StatusForbidden, code: ProblemCodeForbidden, title: "Forbidden",
		detail: "the token does not grant this namespace"}},
	{errNotFound, problem{status: http.StatusNotFound, code: ProblemCodeNotFound, title: "Not found",
		detail: "no such route; see /openapi.yaml"}},
	{errMethodNotAllowed, problem{status: http.StatusMethodNotAllowed, code: ProblemCodeMethodNotAllowed, title: "Method not allowed",
		detail: "this path does not support the method; see the Allow header"}},
	{errSessionTokenMismatch, problem{status: http.StatusForbidden, code: ProblemCodeSessionTokenMismatch, title: "Session token mismatch",
		detail: "the Session-Token is not the token of the session in the path; nothing was changed"}},
	{errDraining, problem{status: http.StatusServiceUnavailable, code: ProblemCodeBackendUnavailable, title: "Shutting down",
		detail: "the gateway is shutting down; retry, and you will reach another instance or this one restarted", header: retryAfter1}},
}

var internalProblem = problem{status: http.StatusInternalServerError, code: ProblemCodeInternal, title: "Internal error",
	detail: "an internal error occurred; the request id identifies it in the gateway's logs"}

var (
	errInvalidRequest   = errors.New("invalid request")
	errTooLarge         = errors.New("request body too large")
	errNotFound         = errors.New("route not found")
	errMethodNotAllowed = errors.New("method not allowed")
	errDraining         = errors.New("gateway shutting down")
	errTooManyWaiters   = errors.New("too many waiting acquirers")
)

// requestError is an invalid request, with a detail in our own words.
type requestError struct{ detail string }

func (e *requestError) Error() string        { return "invalid request: " + e.detail }
func (e *requestError) Detail() string       { return e.detail }
func (e *requestError) Is(target error) bool { return target == errInvalidRequest }

func invalid(detail string) error { return &requestError{detail: detail} }

// forbiddenError names the namespace a token does not grant, and those it
// does.
type forbiddenError struct {
	namespace string
	claims    auth.Claims
}

func (e *forbiddenError) Error() string        { return "forbidden: namespace " + e.namespace }
func (e *forbiddenError) Detail() string       { return e.claims.NotGranted(e.namespace) }
func (e *forbiddenError) Is(target error) bool { return target == auth.ErrForbidden }

// lookup is the one place that decides what an error answers.
func lookup(err error) problem {
	for _, g := range gatewayProblems {
		if errors.Is(err, g.match) {
			return g.problem
		}
	}
	code := locks.ErrorCode(err)
	if code == locks.CodeCancelled && errors.Is(err, context.DeadlineExceeded) {
		return timedOut
	}
	if p, ok := engineProblems[code]; ok {
		return p
	}
	return internalProblem
}

// problemBody is RFC 9457 problem details plus our extensions.
type problemBody struct {
	Problem
	RetryAfterMs *int64       `json:"retry_after_ms,omitempty"`
	Limit        *int         `json:"limit,omitempty"`
	Reason       locks.Reason `json:"reason,omitempty"`
	MinHoldUntil *time.Time   `json:"min_hold_until,omitempty"`
}

// statusClientClosedRequest is the status of a request whose caller hung up
// before its answer, in the access log and the metrics. 499 is nginx's
// "Client Closed Request", which log tooling and dashboards already know:
// it is below 500, so it counts against no error rate, and it is not a 4xx
// the gateway sent, since nobody received it.
const statusClientClosedRequest = 499

// clientLeft reports whether err is the cancellation of a request whose
// caller closed the connection (or the HTTP/2 stream). Any token holder can
// do that at will, while waiting for a lock: it must be neither a 503 nor a
// warning, or anyone could set off error-rate alerts.
func clientLeft(r *http.Request, err error) bool {
	return errors.Is(err, context.Canceled) && errors.Is(r.Context().Err(), context.Canceled)
}

// writeError answers the request with the problem that err maps to. It is the
// only place that turns an error into a response.
func writeError(w http.ResponseWriter, r *http.Request, err error) {
	if clientLeft(r, err) {
		// Nobody reads the answer: the status is for the access log and
		// the metrics, which log it at info level.
		w.WriteHeader(statusClientClosedRequest)
		return
	}
	p, body := problemOf(err)
	if p.header != nil {
		p.header(w.Header(), err)
	}
	logProblem(r.Context(), p, err)
	w.Header().Set("Content-Type", "application/problem+json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(p.status)
	json.NewEncoder(w).Encode(body) // a failed write means the client left
}

// problemOf is the problem that err maps to (lookup), and the body that
// tells the caller of it.
func problemOf(err error) (problem, problemBody) {
	p := lookup(err)
	body := problemBody{Problem: Problem{
		Type:   "urn:lockgate:problem:" + string(p.code),
		Title:  p.title,
		Status: p.status,
		Detail: p.detail,
		Code:   p.code,
	}}
	if p.detailOf != nil {
		body.Detail = p.detailOf(err)
	}
	var d detailer
	if errors.As(err, &d) {
		body.Detail = d.Detail()
	} else if locks.ErrorCode(err) == locks.CodeInvalid {
		// The engine's own words: it validates arguments and never wraps
		// anything but its own messages in ErrInvalid.
		body.Detail = err.Error()
	}
	if p.extend != nil {
		p.extend(&body, err)
	}
	return p, body
}

// logProblem logs a request's failure p, caused by err.
func logProblem(ctx context.Context, p problem, err error) {
	log := zerolog.Ctx(ctx)
	if p.status >= 500 {
		// The error text goes to the log only: it may name a Redis address
		// or carry a library's words. It never carries a token.
		log.Warn().Err(err).Str("code", string(p.code)).Msg("request failed")
	} else {
		log.Debug().Str("code", string(p.code)).Msg("request refused")
	}
}

// ceilDiv returns d/unit rounded up, never negative.
func ceilDiv(d, unit time.Duration) int64 {
	if d <= 0 {
		return 0
	}
	return int64(math.Ceil(float64(d) / float64(unit)))
}

func retryAfterHeld(h http.Header, err error) {
	var held *locks.HeldError
	if errors.As(err, &held) {
		h.Set("Retry-After", strconv.FormatInt(ceilDiv(held.RetryAfter, time.Second), 10))
	}
}

func lockHeld(b *problemBody, err error) {
	var held *locks.HeldError
	if errors.As(err, &held) {
		ms := ceilDiv(held.RetryAfter, time.Millisecond)
		b.RetryAfterMs = &ms
		b.Detail = "someone else holds the lock; its lease ends in " + strconv.FormatInt(ms, 10) + " ms unless renewed"
		if held.MinHold {
			// No lease: the released grant's min hold keeps the name, and
			// nothing renews or shortens that.
			until := held.FreeAt
			if until.IsZero() {
				until = time.Now().Add(held.RetryAfter).UTC()
			} else {
				b.MinHoldUntil = &until
			}
			b.Detail = "nobody holds the lock, but the name is kept until " +
				until.Format(time.RFC3339Nano) + " (" + strconv.FormatInt(ms, 10) +
				" ms from now) by a min hold: the min_hold_ms of the grant released last"
		}
		if held.SharedFull > 0 {
			b.Detail = "the lock has " + strconv.Itoa(held.SharedFull) + " shared holders, the most it may have (--max-shared-holders); " +
				"the soonest of their leases ends in " + strconv.FormatInt(ms, 10) + " ms unless renewed: retry then, or wait (wait_ms) for a place"
		}
	}
}

// retryAfterNotHeld and notHeld tell, of a lock nobody holds, until when a
// released grant's min hold keeps it from new holders, if one does.
func retryAfterNotHeld(h http.Header, err error) {
	var nh *locks.NotHeldError
	if errors.As(err, &nh) && !nh.FreeAt.IsZero() {
		h.Set("Retry-After", strconv.FormatInt(ceilDiv(time.Until(nh.FreeAt), time.Second), 10))
	}
}

func notHeld(b *problemBody, err error) {
	var nh *locks.NotHeldError
	if errors.As(err, &nh) && !nh.FreeAt.IsZero() {
		ms := ceilDiv(time.Until(nh.FreeAt), time.Millisecond)
		b.RetryAfterMs, b.MinHoldUntil = &ms, &nh.FreeAt
		b.Detail = "nobody holds this lock, and the last grant's min_hold_ms keeps it from new holders for " +
			strconv.FormatInt(ms, 10) + " ms more"
	}
}

func retryAfterFull(h http.Header, err error) {
	var full *locks.FullError
	if errors.As(err, &full) {
		h.Set("Retry-After", strconv.FormatInt(ceilDiv(full.RetryAfter, time.Second), 10))
	}
}

func semaphoreFull(b *problemBody, err error) {
	var full *locks.FullError
	if errors.As(err, &full) {
		ms := ceilDiv(full.RetryAfter, time.Millisecond)
		b.RetryAfterMs = &ms
		b.Detail = "every permit of the semaphore is taken; the soonest lease ends in " + strconv.FormatInt(ms, 10) + " ms unless renewed"
	}
}

func limitMismatch(b *problemBody, err error) {
	var lm *locks.LimitMismatchError
	if errors.As(err, &lm) {
		b.Limit = &lm.Limit
		b.Detail = "the semaphore is in use with limit " + strconv.Itoa(lm.Limit) + "; send that limit, or wait until nobody holds or waits for a permit"
	}
}

// notHolderDetails word each reason a token holds nothing.
var notHolderDetails = map[locks.Reason]string{
	locks.ReasonReleased: "the Lock-Token's grant was released",
	locks.ReasonExpired:  "the Lock-Token's lease ended before it was renewed or released; someone else may hold the lock now",
	locks.ReasonBroken:   "an administrator of the namespace broke the lock, which ended the Lock-Token's grant; someone else may hold the lock now",
	locks.ReasonUnknown:  "the Lock-Token holds nothing here: it was never granted, or its grant ended more than a minute ago",
}

func notHolder(b *problemBody, err error) {
	b.Reason = locks.ReasonUnknown
	var nh *locks.NotHolderError
	if errors.As(err, &nh) {
		b.Reason = nh.Reason
	}
	if d, ok := notHolderDetails[b.Reason]; ok {
		b.Detail = d
	}
}

func retryAfterInProgress(h http.Header, err error) {
	var ip *locks.InProgressError
	if errors.As(err, &ip) {
		h.Set("Retry-After", strconv.FormatInt(ceilDiv(ip.RetryAfter, time.Second), 10))
	}
}

func inProgress(b *problemBody, err error) {
	var ip *locks.InProgressError
	if errors.As(err, &ip) {
		ms := ceilDiv(ip.RetryAfter, time.Millisecond)
		b.RetryAfterMs = &ms
	}
}

func retryAfter1(h http.Header, _ error) { h.Set("Retry-After", "1") }

func rateLimitHeaders(h http.Header, err error) {
	var le *ratelimit.Error
	if errors.As(err, &le) {
		le.SetHeaders(h)
	}
}

func wwwAuthenticate(h http.Header, err error) {
	v := `Bearer realm="lockgate"`
	var ae *auth.Error
	if errors.As(err, &ae) && ae.Presented {
		v += `, error="invalid_token"`
	}
	h.Set("WWW-Authenticate", v)
}

// unavailableDetail tells the caller of a failed backend call whether it
// can have taken effect. The engine wraps the client's error with %w, so
// the network error underneath says what happened: a connection that was
// never made (refused, unreachable, or its dial timed out) carried nothing,
// and a retry is safe; a call that was sent and not answered in time may
// have run.
func unavailableDetail(err error) string {
	var op *net.OpError
	var ne net.Error
	var replicas *locks.ReplicaError
	switch {
	case errors.As(err, &replicas): // the call ran; its grant did not stand
		return replicas.Detail()
	case errors.Is(err, locks.ErrNotSent):
		return "the lock backend did not answer in time; nothing was done"
	case errors.As(err, &op) && op.Op == "dial",
		errors.Is(err, syscall.ECONNREFUSED), errors.Is(err, syscall.EHOSTUNREACH), errors.Is(err, syscall.ENETUNREACH):
		return "could not reach the lock backend (connection refused or unreachable); nothing was done"
	case errors.Is(err, context.DeadlineExceeded), errors.As(err, &ne) && ne.Timeout():
		return "the lock backend did not answer in time; the outcome of the call is unknown"
	}
	return "the lock backend failed; the outcome of the call is unknown"
}
