package ratelimit

import (
	"errors"
	"hash/maphash"
	"math"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/lockgate/lockgate/auth"
)

// ErrTooManyRequests means a subject is over its share of the gateway.
// Errors that match it are *Error values.
var ErrTooManyRequests = errors.New("too many requests")

// SubjectLimiter keeps each subject (an auth.Identity: a token's iss and
// sub) to its share of this gateway: a token bucket of requests per
// second, and a cap on its waiting acquirers. A subject's limits are
// those of the policy rules its token matched (auth.Limits), field by
// field, and the gateway's where no rule sets one; a rule that sets a
// rate without a burst gets a burst of that rate.
//
// Memory is bounded without a background goroutine: a subject whose
// bucket has refilled and who has no waiter is exactly a new subject, so
// such entries are dropped whenever a shard has doubled since its last
// sweep. Past maxSubjects (more subjects active within one refill time
// than that), entries without waiters are dropped even before their
// bucket refilled; those subjects start again with a full bucket.
type SubjectLimiter struct {
	defaults auth.Limits
	epoch    time.Time
	now      func() int64 // nanoseconds since epoch, monotonic; tests replace it
	seed     maphash.Seed
	shards   [subjectShards]subjectShard
}

const (
	subjectShards = 32
	// maxSubjects bounds the subjects remembered at once, about 200 bytes
	// each.
	maxSubjects   = 64 << 10
	maxPerShard   = maxSubjects / subjectShards
	minSweepAfter = 64
)

type subjectShard struct {
	mu         sync.Mutex
	m          map[auth.Identity]*subject
	sweepAfter int // sweep when len(m) reaches it
}

// subject is one subject's bucket and waiters, guarded by its shard's mu.
type subject struct {
	rate, burst float64 // the limits the bucket runs under
	tokens      float64 // tokens in the bucket at nanosecond at
	at          int64
	maxWaiters  int
	waiting     int
}

// NewSubjectLimiter returns a limiter with the gateway's own limits, for
// subjects no policy rule sets limits for. It returns nil, which limits
// nothing, when neither defaults nor any rule of policy (which may be
// nil) sets a limit: requests then pay nothing for it.
func NewSubjectLimiter(defaults auth.Limits, policy *auth.Policy) *SubjectLimiter {
	if defaults == (auth.Limits{}) && !policy.HasLimits() {
		return nil
	}
	l := &SubjectLimiter{defaults: defaults, epoch: time.Now(), seed: maphash.MakeSeed()}
	l.now = func() int64 { return int64(time.Since(l.epoch)) }
	return l
}

// effective merges the limits of the rules a token matched (zero fields:
// no rule set them) with the gateway's.
func (l *SubjectLimiter) effective(rules auth.Limits) (rate, burst float64, maxWaiters int) {
	d := l.defaults
	switch {
	case rules.Rate > 0:
		rate, burst = rules.Rate, float64(rules.Burst)
	default:
		rate, burst = d.Rate, float64(d.Burst)
		if rules.Burst > 0 {
			burst = float64(rules.Burst)
		}
	}
	if rate > 0 && burst < 1 {
		burst = max(1, math.Ceil(rate))
	}
	maxWaiters = d.MaxWaiters
	if rules.MaxWaiters > 0 {
		maxWaiters = rules.MaxWaiters
	}
	return rate, burst, maxWaiters
}

// lookup returns c's subject, created with a full bucket if new, with its
// shard locked; the caller unlocks it.
func (l *SubjectLimiter) lookup(c auth.Claims, now int64) (*subjectShard, *subject) {
	rate, burst, maxWaiters := l.effective(c.Limits)
	sh := &l.shards[maphash.Comparable(l.seed, c.Identity)%subjectShards]
	sh.mu.Lock()
	s := sh.m[c.Identity]
	if s == nil {
		if len(sh.m) >= sh.sweepAfter {
			sh.sweep(now)
		}
		s = &subject{rate: rate, burst: burst, tokens: burst, at: now, maxWaiters: maxWaiters}
		sh.m[c.Identity] = s
		return sh, s
	}
	if s.rate != rate || s.burst != burst {
		// Another token of the same subject, under other rules: carry the
		// bucket over at its old rate, then run it under the new limits.
		s.refill(now)
		s.rate, s.burst = rate, burst
		s.tokens = min(s.tokens, burst)
	}
	s.maxWaiters = maxWaiters
	return sh, s
}

func (sh *subjectShard) sweep(now int64) {
	if sh.m == nil {
		sh.m = make(map[auth.Identity]*subject)
	}
	for k, s := range sh.m {
		if s.waiting == 0 && s.full(now) {
			delete(sh.m, k)
		}
	}
	for k, s := range sh.m {
		if len(sh.m) < maxPerShard {
			break
		}
		if s.waiting == 0 {
			delete(sh.m, k)
		}
	}
	sh.sweepAfter = max(2*len(sh.m), minSweepAfter)
}

// refill adds the tokens earned since s.at.
func (s *subject) refill(now int64) {
	if now > s.at {
		s.tokens = min(s.burst, s.tokens+float64(now-s.at)*s.rate/1e9)
		s.at = now
	}
}

// full reports whether s is as good as new: its bucket refilled.
func (s *subject) full(now int64) bool {
	return s.rate == 0 || s.tokens+float64(now-s.at)*s.rate/1e9 >= s.burst
}

// Allow takes one request from c's subject's bucket. It returns nil, or a
// *Error when the subject is over its rate. A nil l allows
// everything.
func (l *SubjectLimiter) Allow(c auth.Claims) error {
	if l == nil || (l.defaults.Rate == 0 && c.Limits.Rate == 0) {
		return nil
	}
	now := l.now()
	sh, s := l.lookup(c, now)
	defer sh.mu.Unlock()
	if s.rate == 0 {
		return nil
	}
	s.refill(now)
	if s.tokens >= 1 {
		s.tokens--
		return nil
	}
	return &Error{policy: ratePolicy, quota: int(s.burst), window: seconds(s.burst / s.rate), retryAfter: seconds((1 - s.tokens) / s.rate)}
}

// Charge takes n more requests from c's subject's bucket, for a request
// that cost as much as n more (a page of a listing, after the fact): the
// bucket may go below empty, and the subject's next requests are refused
// until it has refilled. A nil l charges nothing.
func (l *SubjectLimiter) Charge(c auth.Claims, n int) {
	if l == nil || n <= 0 || (l.defaults.Rate == 0 && c.Limits.Rate == 0) {
		return
	}
	now := l.now()
	sh, s := l.lookup(c, now)
	defer sh.mu.Unlock()
	s.refill(now)
	s.tokens -= float64(n)
}

// Waiting is a waiter counted against its subject's cap, until Done.
type Waiting struct {
	sh *subjectShard
	s  *subject
}

// Counted reports whether the waiter counts against a cap: false when
// its subject has none (nor does the gateway), and Done does nothing.
func (w Waiting) Counted() bool { return w.s != nil }

// Done stops counting the waiter. Call it once, when it stops waiting.
func (w Waiting) Done() {
	if w.s == nil {
		return
	}
	w.sh.mu.Lock()
	w.s.waiting--
	w.sh.mu.Unlock()
}

// StartWait counts one more waiting acquirer of c's subject, or returns a
// *Error when the subject has its cap of waiters already. A nil l
// counts nothing.
func (l *SubjectLimiter) StartWait(c auth.Claims) (Waiting, error) {
	if l == nil || (l.defaults.MaxWaiters == 0 && c.Limits.MaxWaiters == 0) {
		return Waiting{}, nil
	}
	sh, s := l.lookup(c, l.now())
	defer sh.mu.Unlock()
	if s.maxWaiters > 0 && s.waiting >= s.maxWaiters {
		return Waiting{}, &Error{policy: waitersPolicy, quota: s.maxWaiters, retryAfter: 1}
	}
	s.waiting++
	return Waiting{sh: sh, s: s}, nil
}

// The names of the quota policies in RateLimit-Policy and RateLimit.
const (
	ratePolicy    = "rate"
	waitersPolicy = "waiters"
)

// Error says which share a subject is over, and when to retry.
type Error struct {
	policy     string
	quota      int   // requests per window, or waiters at once
	window     int64 // seconds the bucket takes to refill from empty; 0 for waiters
	retryAfter int64 // seconds until a token is back; a guess of 1 for waiters
}

func (e *Error) Error() string {
	return "too many requests: over the subject's " + e.policy + " limit"
}

// Is makes errors.Is(err, ErrTooManyRequests) true.
func (e *Error) Is(target error) bool { return target == ErrTooManyRequests }

// Detail is shown to the caller as the problem detail.
func (e *Error) Detail() string {
	if e.policy == waitersPolicy {
		return "this subject has " + strconv.Itoa(e.quota) + " acquirers waiting on this gateway already, its limit; nothing was changed: retry later, or without wait_ms"
	}
	return "this subject is over its share of " + strconv.Itoa(e.quota) + " requests per " + strconv.FormatInt(e.window, 10) +
		" s on this gateway; nothing was changed: retry after Retry-After seconds"
}

// SetHeaders sets Retry-After and the RateLimit-Policy and RateLimit
// fields of draft-ietf-httpapi-ratelimit-headers-11 (sections 3 and 4):
// the quota q of the policy over the window w, and the quota r left now
// (none) until t seconds from now. The bucket's policy is its burst over
// the time it takes to refill from empty (q=100;w=1 for 100 per second),
// the waiters' q of the quota unit "concurrent-requests", with no window.
// There is no partition key (pk): it would be the subject.
func (e *Error) SetHeaders(h http.Header) {
	retry := strconv.FormatInt(e.retryAfter, 10)
	h.Set("Retry-After", retry)
	name := `"` + e.policy + `"`
	if e.policy == waitersPolicy {
		h.Set("RateLimit-Policy", name+";q="+strconv.Itoa(e.quota)+`;qu="concurrent-requests"`)
		h.Set("RateLimit", name+";r=0")
		return
	}
	h.Set("RateLimit-Policy", name+";q="+strconv.Itoa(e.quota)+";w="+strconv.FormatInt(e.window, 10))
	h.Set("RateLimit", name+";r=0;t="+retry)
}

// seconds is a number of seconds rounded up to a whole one, from 1 to a
// year: a rate so small that its bucket would take longer is no use.
func seconds(s float64) int64 {
	return int64(min(max(1, math.Ceil(s)), 365*24*3600))
}
