package handlers

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"

	"github.com/lockgate/lockgate/auth"
	"github.com/lockgate/lockgate/callbacks"
	"github.com/lockgate/lockgate/grantsig"
	"github.com/lockgate/lockgate/internal/tracing"
	"github.com/lockgate/lockgate/locks"
	"github.com/lockgate/lockgate/middleware"
	"github.com/lockgate/lockgate/ratelimit"
)

// Config configures a Server.
type Config struct {
	// Backend holds the locks. Required.
	Backend locks.Backend
	// Auth verifies bearer tokens. Required.
	Auth *auth.Authenticator
	// DefaultTTL is the lease of an acquire without ttl_ms. Default 30s.
	DefaultTTL time.Duration
	// MaxTTL bounds ttl_ms on acquire and renew. Default 1h.
	MaxTTL time.Duration
	// MaxHold, when not 0, is the operator's hard cap on every grant of a
	// lock, a lock set or a permit (locks.AcquireRequest.MaxHold): an
	// acquire without max_hold_ms gets it, and one with more is refused.
	// Default 0: none.
	MaxHold time.Duration
	// MaxWait bounds wait_ms of an acquire that waits in the call. Default
	// 60s.
	MaxWait time.Duration
	// MaxTicketWait bounds wait_ms of an acquire answered with a ticket
	// (Prefer: respond-async, with Tickets): a ticket holds no connection
	// while it waits, so it may wait far longer. Default 1h.
	MaxTicketWait time.Duration
	// MaxWaiters bounds the acquirers (wait_ms > 0) this process keeps
	// waiting at once; one more is refused with 429 too_many_requests and
	// changes nothing. Each waiter holds a connection, a goroutine and a
	// wake-up registration until it is served. Default 10000.
	MaxWaiters int
	// MaxWatchers bounds the watches (long-polls and event streams of
	// locks) this process serves at once; one more is refused with 503
	// too_many_watchers. Each holds a connection and a goroutine. Default
	// 10000.
	MaxWatchers int
	// MaxSubjectWatchers bounds the watches one subject holds open at once
	// on this process; one more is refused with 429 too_many_requests.
	// Default a tenth of MaxWatchers (at least 1), so that no caller holds
	// them all.
	MaxSubjectWatchers int
	// MaxWatchLifetime bounds how long a watch (an event stream or a
	// long-poll) stays open, whatever its token's exp, which bounds it too.
	// Default 1h.
	MaxWatchLifetime time.Duration
	// Subjects keeps each subject to its share of the gateway: requests
	// per second and waiters at once (429 too_many_requests past them).
	// Default nil: no per-subject limits.
	Subjects *ratelimit.SubjectLimiter
	// ReleaseTimeout bounds the release of a grant whose caller left before
	// it could receive it. Default 5s.
	ReleaseTimeout time.Duration
	// Logger receives the access log and errors. Default: discard.
	Logger zerolog.Logger
	// History is how many events of each lock the backend keeps (the
	// backend's own setting, shown to callers of the history). Default 0.
	History int
	// Tickets, when set, answers acquires with Prefer: respond-async (see
	// locks.Tickets). Default nil: the preference is ignored, and ticket
	// URLs answer 404.
	Tickets locks.Tickets
	// Tracing, when set, traces each request (see internal/tracing).
	// Default: none, at no cost per request.
	Tracing *tracing.Tracing
	// Signer, when set, signs the grants and renewals whose calls ask
	// (signed_grant) and serves its keys. Default: none, no signed grants,
	// and a call that asks for one is a 400.
	Signer *grantsig.Signer
	// SignAll, with a Signer, signs the grant or renewal of every call
	// that does not say "signed": false (--sign-grants always). Default
	// false: only those that say "signed": true (on-request).
	SignAll bool
	// Callbacks, when set, accepts a ticket's callback_url on its
	// allow-list and sends the notification when the lock is handed to the
	// ticket. Default nil: every callback_url is a 400.
	Callbacks *callbacks.Notifier
	// UI, when set, is the dashboard (package ui), served under /ui/ with
	// GET /ui/api/whoami beside it. Default nil: no /ui.
	UI http.Handler
	// MCP serves the lock calls as tools of the Model Context Protocol at
	// POST /mcp (MCPPath), for AI agents, with the same tokens. Default
	// false: no /mcp.
	MCP bool
}

func (c Config) withDefaults() Config {
	if c.DefaultTTL <= 0 {
		c.DefaultTTL = 30 * time.Second
	}
	if c.MaxTTL <= 0 {
		c.MaxTTL = time.Hour
	}
	if c.MaxWait <= 0 {
		c.MaxWait = time.Minute
	}
	if c.MaxTicketWait <= 0 {
		c.MaxTicketWait = time.Hour
	}
	if c.MaxWaiters <= 0 {
		c.MaxWaiters = 10000
	}
	if c.MaxWatchers <= 0 {
		c.MaxWatchers = 10000
	}
	if c.MaxSubjectWatchers <= 0 {
		c.MaxSubjectWatchers = max(c.MaxWatchers/10, 1)
	}
	if c.MaxWatchLifetime <= 0 {
		c.MaxWatchLifetime = time.Hour
	}
	if c.ReleaseTimeout <= 0 {
		c.ReleaseTimeout = 5 * time.Second
	}
	return c
}

// Server implements the API of openapi.yaml on a locks.Backend.
type Server struct {
	cfg     Config
	metrics *metrics
	// draining is cancelled when the process starts to shut down, to turn
	// waiting acquirers away with a 503.
	draining context.Context
	drain    context.CancelFunc
	// waiting counts the acquirers waiting now, against MaxWaiters.
	waiting atomic.Int64
	// watchers counts the watches open now, against MaxWatchers.
	watchers atomic.Int64
	// subjectWatchers counts them by subject, against MaxSubjectWatchers.
	subjectWatchers counts
	// ticketWaiters counts open tickets against their subjects' caps.
	ticketWaiters ticketWaiters
	// locks and permits are the grantors of grantCalls.
	locks, permits grantor
	// contention and namespaces are what the dashboard shows beside the
	// API (ui_api.go).
	contention contention
	namespaces namespaceCache
}

var _ StrictServerInterface = (*Server)(nil)

// Healthz implements StrictServerInterface: the process is up.
func (s *Server) Healthz(context.Context, HealthzRequestObject) (HealthzResponseObject, error) {
	return Healthz200JSONResponse{Status: "ok"}, nil
}

// Readyz implements StrictServerInterface: the backend answers, and the
// authenticator has the keys it was told to fetch.
func (s *Server) Readyz(ctx context.Context, _ ReadyzRequestObject) (ReadyzResponseObject, error) {
	if err := s.cfg.Auth.Check(); err != nil {
		return nil, fmt.Errorf("%w: %w", locks.ErrUnavailable, err)
	}
	if err := s.cfg.Backend.Check(ctx); err != nil {
		if !errors.Is(err, locks.ErrUnavailable) {
			err = fmt.Errorf("%w: %w", locks.ErrUnavailable, err)
		}
		return nil, err
	}
	return Readyz200JSONResponse{Status: "ok"}, nil
}

// AcquireLock implements StrictServerInterface: it builds the one engine
// call the request asks for (lockCall), and makes it with the gateway's
// rules: a re-entry answers at once, a ticket counts against its subject's
// waiters, any other wait against the gateway's too (obtain).
func (s *Server) AcquireLock(ctx context.Context, req AcquireLockRequestObject) (AcquireLockResponseObject, error) {
	c, err := s.lockCall(ctx, req)
	if err != nil {
		s.metrics.acquires.WithLabelValues(outcomeInvalid).Inc()
		return nil, err
	}
	switch {
	case c.call.Reenter != "":
		return s.reenter(ctx, c)
	case c.call.TicketApplies():
		return s.openTicket(ctx, c)
	}
	grant, err := s.obtain(ctx, c)
	if err != nil {
		return nil, err
	}
	g := &granted{s: s, ctx: ctx, c: c, grant: grant}
	g.lock = s.grantBody(ctx, c.call.Key, &g.grant, c.call.Req.Mode, c.signed)
	return g, nil
}

// lockCall is the engine's call for an acquire of a lock: each header and
// field of the request is a field of it, and locks.Call.Check refuses what
// does not go together.
func (s *Server) lockCall(ctx context.Context, req AcquireLockRequestObject) (grantCall, error) {
	p := req.Params
	// A ticket's wait has its own limit: only a fresh acquire with the
	// preference, on a backend with tickets, gets one.
	ticket := p.LockToken == nil && s.cfg.Tickets != nil && parsePrefer(p.Prefer).respondAsync
	wk := lockWait
	if ticket {
		wk = ticketWait
	}
	key, ar, err := s.acquireRequest(ctx, req, wk)
	if err != nil {
		return grantCall{}, err
	}
	if p.LockToken != nil && req.Body != nil && req.Body.MaxHoldMs != nil {
		return grantCall{}, invalid("max_hold_ms is the acquire's: a re-entry keeps the grant's cap")
	}
	var asked *bool
	if req.Body != nil {
		asked = req.Body.Signed
	}
	sign, err := s.signs(asked)
	if err != nil {
		return grantCall{}, err
	}
	call := locks.Call{Key: key, Req: ar, Reenter: deref(p.LockToken), Session: deref(p.SessionToken), Ticket: ticket}
	var dest callbacks.Destination
	if req.Body != nil && req.Body.CallbackUrl != nil {
		notifier, subject := s.cfg.Callbacks, ar.Subject
		call.Req.Handed = func(h locks.TicketHanded) {
			notifier.Notify(callbacks.Handed{Dest: dest, Subject: subject, Lock: key.String(), Ticket: h.ID, PollURL: ticketPath(key, h.ID), PickUpBy: h.PickUpBy})
		}
	}
	if call.IdempotencyKey, err = s.idempotencyKey(call, p.IdempotencyKey); err != nil {
		return grantCall{}, err
	}
	if call.Req.Handed != nil {
		if dest, err = s.callback(*req.Body.CallbackUrl); err != nil {
			return grantCall{}, err
		}
	}
	return grantCall{grantor: s.locks, call: call, outcomes: s.metrics.acquires, signed: sign}, nil
}

// deref is *p, or "" for nil.
func deref(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}

// grantBody is the body that tells the caller of grant g of key, with a
// signed grant when sign.
func (s *Server) grantBody(ctx context.Context, key locks.Key, g *locks.Grant, mode locks.Mode, sign bool) Grant {
	lock := key.String()
	return Grant{
		Lock:         lock,
		Token:        g.Token,
		FencingToken: g.FencingToken,
		TtlMs:        g.TTL.Milliseconds(),
		RenewAfterMs: renewAfterMs(g.TTL),
		ExpiresAt:    timestamp(g.ExpiresAt),
		HoldUntil:    holdUntil(g.HoldUntil),
		Holds:        &g.Holds,
		Mode:         grantMode(mode),
		SignedGrant:  s.signedGrant(ctx, sign, lock, "", g.FencingToken, signedMode(mode), g.ExpiresAt),
	}
}

// reenter takes the lock once more for the holder of the call's token: a
// 200 with the grant and its count of holds, never a wait.
func (s *Server) reenter(ctx context.Context, c grantCall) (AcquireLockResponseObject, error) {
	o, err := locks.Obtain(ctx, s.cfg.Backend, c.call)
	if err != nil {
		outcome := acquireOutcome(err)
		if errors.Is(err, locks.ErrNotHolder) {
			outcome = outcomeHeld
		}
		s.metrics.acquires.WithLabelValues(outcome).Inc()
		return nil, err
	}
	s.metrics.acquires.WithLabelValues(outcomeReentered).Inc()
	body := s.grantBody(ctx, c.call.Key, &o.Grant, c.call.Req.Mode, c.signed)
	body.Hold = &o.Grant.Hold
	return AcquireLock200JSONResponse(body), nil
}

// The API's names of the modes, made once: a grant's body points at them.
var (
	exclusiveGrant = GrantModeExclusive
	sharedGrant    = GrantModeShared
)

func grantMode(m locks.Mode) *GrantMode {
	if m == locks.Shared {
		return &sharedGrant
	}
	return &exclusiveGrant
}

// acquireOutcomes are the outcome labels of failed acquires, locks' and
// semaphores', by their error's code; any other code is outcomeError.
var acquireOutcomes = map[locks.Code]string{
	locks.CodeHeld:                  outcomeHeld,
	locks.CodeFull:                  outcomeFull,
	locks.CodeLimitMismatch:         outcomeLimitMismatch,
	locks.CodeInvalid:               outcomeInvalid,
	locks.CodeIdempotencyMismatch:   outcomeRetryRefused,
	locks.CodeIdempotencyInProgress: outcomeRetryRefused,
	locks.CodeGrantEnded:            outcomeRetryRefused,
	locks.CodeCancelled:             outcomeCancelled,
}

// acquireOutcome is the outcome label of an acquire that failed with err.
func acquireOutcome(err error) string {
	if o, ok := acquireOutcomes[locks.ErrorCode(err)]; ok {
		return o
	}
	return outcomeError
}

// waitKind says how an acquire waits, which sets the limit of its wait_ms.
type waitKind int

const (
	lockWait   waitKind = iota // a lock's, in the call: --max-wait; a ticket could wait longer
	ticketWait                 // a ticket's: --max-ticket-wait
	permitWait                 // a semaphore's, in the call: --max-wait, and no tickets
)

// acquireRequest checks the request against the configured limits.
func (s *Server) acquireRequest(ctx context.Context, req AcquireLockRequestObject, wk waitKind) (locks.Key, locks.AcquireRequest, error) {
	key, err := locks.ParseKey(req.Namespace, req.Name)
	if err != nil {
		return locks.Key{}, locks.AcquireRequest{}, err
	}
	claims, _ := middleware.ClaimsFromContext(ctx)
	ar := locks.AcquireRequest{TTL: min(s.cfg.DefaultTTL, s.maxTTL(ctx)), Subject: claims.Identity.String()}
	if b := req.Body; b != nil {
		if b.TtlMs != nil {
			if ar.TTL, err = s.ttl(ctx, *b.TtlMs); err != nil {
				return key, ar, err
			}
		}
		if b.WaitMs != nil {
			if ar.Wait, err = s.wait(*b.WaitMs, wk); err != nil {
				return key, ar, err
			}
		}
		if b.Owner != nil {
			ar.Owner = *b.Owner
		}
		if b.Mode != nil && *b.Mode == AcquireRequestModeShared {
			ar.Mode = locks.Shared
		}
		if b.Value != nil {
			ar.Value = *b.Value
		}
		if b.MinHoldMs != nil {
			if ar.MinHold, err = s.minHold(ctx, *b.MinHoldMs); err != nil {
				return key, ar, err
			}
		}
		if ar.Priority, err = priority(b.Priority); err != nil {
			return key, ar, err
		}
	}
	var ttlMs, maxHoldMs *int64
	if b := req.Body; b != nil {
		ttlMs, maxHoldMs = b.TtlMs, b.MaxHoldMs
	}
	if err := s.capHold(ctx, ttlMs, maxHoldMs, &ar); err != nil {
		return key, ar, err
	}
	return key, ar, nil
}

// priority is a body's priority (nil: 0), refused out of range with its
// own code (invalid_priority), never the generic invalid_request: a lock's
// acquire and a lock set's share it.
func priority(p *int) (int, error) {
	if p == nil {
		return 0, nil
	}
	if *p < 0 || *p > locks.MaxPriority {
		return 0, fmt.Errorf("%w: got %d", locks.ErrInvalidPriority, *p)
	}
	return *p, nil
}

// capHold sets ar's hard cap: the body's max_hold_ms (askedMs), or the
// caller's bound (see maxHold) when the body has none. A ttl_ms (ttlMs)
// past the cap, or a max_hold_ms past the bound, is refused; without a
// ttl_ms, the default TTL is cut to the cap. A lock's acquire and a lock
// set's share it.
func (s *Server) capHold(ctx context.Context, ttlMs, askedMs *int64, ar *locks.AcquireRequest) error {
	bound, by := s.maxHold(ctx)
	capped := bound
	if askedMs != nil {
		ms := *askedMs
		switch {
		case ms < 1:
			return invalid("max_hold_ms must be at least 1")
		case bound > 0 && ms > bound.Milliseconds():
			return invalid(fmt.Sprintf("max_hold_ms must be at most %d (%s)", bound.Milliseconds(), by))
		case ms > maxHoldMs:
			return invalid(fmt.Sprintf("max_hold_ms must be at most %d", int64(maxHoldMs)))
		}
		capped = time.Duration(ms) * time.Millisecond
	}
	if capped == 0 {
		return nil
	}
	if ttlMs == nil {
		ar.TTL = min(ar.TTL, capped)
	} else if ar.TTL > capped {
		if askedMs != nil {
			return invalid(fmt.Sprintf("max_hold_ms (%d) must be at least ttl_ms (%d)", capped.Milliseconds(), ar.TTL.Milliseconds()))
		}
		return invalid(fmt.Sprintf("ttl_ms must be at most %d: %s caps every grant", capped.Milliseconds(), by))
	}
	ar.MaxHold = capped
	return nil
}

// maxHoldMs is the longest max_hold_ms a gateway without a bound takes:
// about 292 years, as long as a time.Duration lasts.
const maxHoldMs = math.MaxInt64 / int64(time.Millisecond)

// maxHold is the caller's bound on a grant's hard cap, and what sets it:
// the gateway's MaxHold, or less when the policy rules that granted its
// token say so; 0 for none.
func (s *Server) maxHold(ctx context.Context) (time.Duration, string) {
	bound, by := s.cfg.MaxHold, "the gateway's --max-hold"
	if c, _ := middleware.ClaimsFromContext(ctx); c.MaxHold > 0 && (bound == 0 || c.MaxHold < bound) {
		bound, by = c.MaxHold, "the max_hold of the policy rules that grant this token"
	}
	return bound, by
}

// wait checks a wait_ms against its limit before converting it, so that
// no value can overflow a time.Duration. Its error names the flag that
// sets the limit, and the way to wait longer.
func (s *Server) wait(ms int64, wk waitKind) (time.Duration, error) {
	if wk == ticketWait {
		if maxMs := s.cfg.MaxTicketWait.Milliseconds(); ms < 0 || ms > maxMs {
			return 0, invalid(fmt.Sprintf("wait_ms must be between 0 and %d for a ticket (the gateway's --max-ticket-wait)", maxMs))
		}
	} else if maxMs := s.cfg.MaxWait.Milliseconds(); ms < 0 || ms > maxMs {
		longer := ""
		if wk == lockWait && s.cfg.Tickets != nil {
			longer = fmt.Sprintf("; to wait longer, ask for a ticket with Prefer: respond-async (up to %d ms, --max-ticket-wait)",
				s.cfg.MaxTicketWait.Milliseconds())
		}
		return 0, invalid(fmt.Sprintf("wait_ms must be between 0 and %d (the gateway's --max-wait)%s", maxMs, longer))
	}
	return time.Duration(ms) * time.Millisecond, nil
}

// ttl checks a ttl_ms against the caller's maximum before converting it,
// so that no value can overflow a time.Duration. Its error names what
// sets the maximum: the gateway's flag, or the caller's policy rules.
func (s *Server) ttl(ctx context.Context, ms int64) (time.Duration, error) {
	if maxTTL := s.maxTTL(ctx); ms < 1 || ms > maxTTL.Milliseconds() {
		by := "the gateway's --max-ttl"
		if maxTTL < s.cfg.MaxTTL {
			by = "the max_ttl of the policy rules that grant this token"
		}
		return 0, invalid(fmt.Sprintf("ttl_ms must be between 1 and %d (%s)", maxTTL.Milliseconds(), by))
	}
	return time.Duration(ms) * time.Millisecond, nil
}

// minHold checks a min_hold_ms against the caller's TTL cap before
// converting it: a min hold is a lease the holder cannot end early.
func (s *Server) minHold(ctx context.Context, ms int64) (time.Duration, error) {
	if maxTTL := s.maxTTL(ctx); ms < 0 || ms > maxTTL.Milliseconds() {
		return 0, invalid(fmt.Sprintf("min_hold_ms must be between 0 and %d (the longest ttl_ms this caller may ask for)", maxTTL.Milliseconds()))
	}
	return time.Duration(ms) * time.Millisecond, nil
}

// maxTTL is the longest lease the caller may ask for: MaxTTL, or less when
// the policy rules that granted its token say so.
func (s *Server) maxTTL(ctx context.Context) time.Duration {
	if c, _ := middleware.ClaimsFromContext(ctx); c.MaxTTL > 0 {
		return min(c.MaxTTL, s.cfg.MaxTTL)
	}
	return s.cfg.MaxTTL
}

// granted is the 201 of an acquire: a lock's grant, a permit, or a
// ticket's grant on a free lock. It flushes the response itself so that it
// learns whether the grant reached the caller, and gives the grant back
// (see undelivered) if not. It is one allocation for the answer, its body
// and what giving the grant back needs, rather than one for each.
type granted struct {
	s     *Server
	ctx   context.Context
	c     grantCall // the call that got the grant: how to give it back
	grant locks.Grant
	// lock is the body of a lock's grant; permit of a semaphore's, when
	// its Semaphore is set.
	lock   Grant
	permit SemaphoreGrant
}

// VisitAcquireLockResponse implements AcquireLockResponseObject.
func (g *granted) VisitAcquireLockResponse(w http.ResponseWriter) error {
	var body any = &g.lock
	if g.permit.Semaphore != "" {
		body = &g.permit
	}
	data, err := json.Marshal(body)
	if err != nil {
		g.release()
		return fmt.Errorf("encode grant: %w", err)
	}
	return deliverGrant(w, data, g.release)
}

// VisitAcquireSemaphoreResponse implements AcquireSemaphoreResponseObject.
func (g *granted) VisitAcquireSemaphoreResponse(w http.ResponseWriter) error {
	return g.VisitAcquireLockResponse(w)
}

func (g *granted) release() { g.s.undelivered(g.ctx, g.c, g.grant.Token) }

// deliverGrant writes data, an encoded grant, and a newline as a 201 and
// flushes it, so that it learns whether the grant reached the caller; it
// calls release if not.
func deliverGrant(w http.ResponseWriter, data []byte, release func()) error {
	data = append(data, '\n')
	h := w.Header()
	h["Content-Type"], h["Cache-Control"] = jsonContentType, noStore
	// With its length known, the flushed response goes out in one write,
	// not as chunks with a terminator written after the handler returns.
	h["Content-Length"] = []string{strconv.Itoa(len(data))}
	w.WriteHeader(http.StatusCreated)
	_, err := w.Write(data)
	if err == nil {
		err = http.NewResponseController(w).Flush()
		if errors.Is(err, http.ErrNotSupported) {
			err = nil // cannot tell; the engine and the ctx check cover the rest
		}
	}
	if err != nil {
		release()
		return fmt.Errorf("deliver grant: %w", err)
	}
	return nil
}

// ReleaseLock implements StrictServerInterface.
func (s *Server) ReleaseLock(ctx context.Context, req ReleaseLockRequestObject) (ReleaseLockResponseObject, error) {
	key, err := locks.ParseKey(req.Namespace, req.Name)
	if err != nil {
		return nil, err
	}
	var hold string
	if req.Params.Hold != nil {
		hold = *req.Params.Hold
	}
	rel, err := s.cfg.Backend.ReleaseHold(ctx, key, req.Params.LockToken, hold)
	s.metrics.lease.released("lock", rel, err)
	if err != nil {
		return nil, err
	}
	if rel.Holds > 0 {
		return ReleaseLock200JSONResponse{Holds: rel.Holds}, nil
	}
	return ReleaseLock204Response{}, nil
}

// RenewLease implements StrictServerInterface.
func (s *Server) RenewLease(ctx context.Context, req RenewLeaseRequestObject) (RenewLeaseResponseObject, error) {
	key, err := locks.ParseKey(req.Namespace, req.Name)
	if err != nil {
		return nil, err
	}
	ttl, sign, err := s.renewRequest(ctx, req.Body)
	if err != nil {
		return nil, err
	}
	lease, err := s.cfg.Backend.Renew(ctx, key, req.Params.LockToken, ttl)
	if err != nil {
		s.metrics.lease.renewFailed("lock", err)
		return nil, err
	}
	lock := key.String()
	return RenewLease200JSONResponse{
		Lock:         lock,
		FencingToken: lease.FencingToken,
		TtlMs:        lease.TTL.Milliseconds(),
		RenewAfterMs: renewAfterMs(lease.TTL),
		ExpiresAt:    timestamp(lease.ExpiresAt),
		HoldUntil:    holdUntil(lease.HoldUntil),
		SignedGrant:  s.signedGrant(ctx, sign, lock, "", lease.FencingToken, signedMode(lease.Mode), lease.ExpiresAt),
	}, nil
}

// renewRequest is what a renewal's body asks for: the new lease's length
// (0: the TTL the grant was acquired with), and whether its answer is
// signed (see signs). A body that asks for what the gateway will not give
// renews nothing.
func (s *Server) renewRequest(ctx context.Context, b *RenewRequest) (ttl time.Duration, sign bool, err error) {
	if b == nil {
		sign, _ = s.signs(nil)
		return 0, sign, nil
	}
	if b.TtlMs != nil {
		if ttl, err = s.ttl(ctx, *b.TtlMs); err != nil {
			return 0, false, err
		}
	}
	sign, err = s.signs(b.Signed)
	return ttl, sign, err
}

// InspectLock implements StrictServerInterface.
func (s *Server) InspectLock(ctx context.Context, req InspectLockRequestObject) (InspectLockResponseObject, error) {
	key, err := locks.ParseKey(req.Namespace, req.Name)
	if err != nil {
		return nil, err
	}
	if stream, _ := ctx.Value(eventStreamKey{}).(bool); stream || req.Params.Index != nil || req.Params.Wait != nil {
		return s.watchLock(ctx, key, req.Params, stream)
	}
	info, err := s.cfg.Backend.Inspect(ctx, key)
	var free *locks.NotHeldError
	if errors.As(err, &free) {
		return freshInspect{index: free.Index, free: err}, nil
	}
	if err != nil {
		return nil, err
	}
	return freshInspect{InspectLock200JSONResponse: InspectLock200JSONResponse{Body: lockInfo(key, info)}, index: info.Index}, nil
}

// freshInspect is a plain GET's answer: its 200, or, when free is set
// (ErrNotHeld), its 404 problem, which the one error table writes; both
// with the lock's index in Lockgate-Index, set here for both, which a
// long-poll starts from (#39). No cache may keep the 200, as none keeps
// the 404 (a problem) or a watch's answers, which say the same.
type freshInspect struct {
	InspectLock200JSONResponse
	index int64
	free  error
}

// VisitInspectLockResponse implements InspectLockResponseObject.
func (r freshInspect) VisitInspectLockResponse(w http.ResponseWriter) error {
	return writeIndexed(w, r.index, r.free, r.InspectLock200JSONResponse.VisitInspectLockResponse)
}

// writeIndexed writes a plain GET's answer with its index in
// Lockgate-Index: the problem free (which the one error table writes),
// or the 200 that ok writes, which no cache may keep.
func writeIndexed(w http.ResponseWriter, index int64, free error, ok func(http.ResponseWriter) error) error {
	h := w.Header()
	h["Lockgate-Index"] = []string{strconv.FormatInt(index, 10)}
	if free != nil {
		return free
	}
	h["Cache-Control"] = noStore
	return ok(w)
}

// lockInfo describes the holders of a held lock.
func lockInfo(key locks.Key, info locks.Info) LockInfo {
	return LockInfo{Lock: key.String(),
		Held:            true,
		FencingToken:    info.FencingToken,
		TtlMs:           info.TTL.Milliseconds(),
		ExpiresAt:       timestamp(info.ExpiresAt),
		AcquiredAt:      timestamp(info.AcquiredAt),
		HoldUntil:       holdUntil(info.HoldUntil),
		Subject:         info.Subject,
		Owner:           info.Owner,
		Waiters:         info.Waiters,
		Holds:           &info.Holds,
		Mode:            LockInfoMode(info.Mode.String()),
		Holders:         holdersOf(info.Holders),
		HoldersTotal:    info.HoldersTotal,
		Value:           valueOf(info.Value),
		QueuePriorities: queuePriorities(info.QueuePriorities),
	}
}

// queuePriorities is a lock's queue's priorities as an answer states them:
// nil (absent) when nobody waits.
func queuePriorities(ps []int) *[]int {
	if len(ps) == 0 {
		return nil
	}
	return &ps
}

// holdersOf describes the holders of a lock or a semaphore.
func holdersOf(hs []locks.Holder) []Holder {
	holders := make([]Holder, len(hs))
	for i, h := range hs {
		holders[i] = Holder{
			Subject:      h.Subject,
			Owner:        h.Owner,
			FencingToken: h.FencingToken,
			TtlMs:        h.TTL.Milliseconds(),
			ExpiresAt:    timestamp(h.ExpiresAt),
			AcquiredAt:   timestamp(h.AcquiredAt),
			HoldUntil:    holdUntil(h.HoldUntil),
			Holds:        &hs[i].Holds,
			Value:        valueOf(h.Value),
		}
		if h.HoldIDs != nil {
			holders[i].HoldIds = &hs[i].HoldIDs
		}
	}
	return holders
}

// renewAfterMs is when a grant's holder should renew: after a third of
// the lease, which leaves two thirds for a renew that fails and its
// retries. The ttl_ms of the same answer, divided by 3, rounded down.
func renewAfterMs(ttl time.Duration) int64 { return ttl.Milliseconds() / 3 }

// holdUntil is a grant's hard cap as an answer states it (see timestamp),
// or nil for a grant without one.
func holdUntil(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	t = timestamp(t)
	return &t
}

// timestamp is t in UTC, cut to the millisecond: RFC 3339 as clients parse
// it. Cutting down keeps "expires_at is never later than the real expiry".
func timestamp(t time.Time) time.Time { return t.UTC().Truncate(time.Millisecond) }
