package redisbackend

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/lockgate/lockgate/locks"

	"github.com/redis/go-redis/v9"
)

// The session scripts (lua/session_*.lua, lua/lib_session.lua for the
// layout), and their typed calls: each builds its script's KEYS and ARGV
// in the order the script's header states, and reads its reply.
var (
	sessionOpenScript    = newScript("session_open")
	sessionJoinScript    = newScript("session_join")
	sessionConfirmScript = newScript("session_confirm")
	sessionKeepScript    = newScript("session_keep")
	sessionDropScript    = newScript("session_drop")
	sessionAcquireScript = newScript("session_acquire")
	// sessionSemAcquireScript is session_acquire.lua around sem_acquire.lua.
	sessionSemAcquireScript = newScript("session_sem_acquire")
	sessionEndScript        = newScript("session_end")
	sessionGetScript        = newScript("session_get")
	sessionsOfScript        = newScript("sessions_of")
)

// redisSessionCount counts each subject's live sessions
// (locks.SessionCounter, lua/sessions_of.lua).
type redisSessionCount struct{ r *Backend }

var _ locks.SessionCounter = redisSessionCount{}

// key is the subject's count: the subject's hash names it, so that no
// subject's text reaches a key name.
func (n redisSessionCount) key(subject string) []string {
	return []string{n.r.opts.Prefix + "sessions-of:{" + locks.TokenHash("subject:" + subject)[:22] + "}"}
}

func (n redisSessionCount) call(ctx context.Context, subject string, args ...any) error {
	cmd, _ := n.r.run(ctx, sessionsOfScript, n.key(subject), args...)
	code, err := cmd.Int64()
	switch {
	case err != nil:
		return locks.Unavailable("count sessions", stringer("of a subject"), err)
	case code == codeSessionFull:
		return locks.ErrTooManySessions
	}
	return nil
}

func (n redisSessionCount) Add(ctx context.Context, subject, id string, ttl time.Duration, max int) error {
	return n.call(ctx, subject, "add", id, ttl.Milliseconds(), max)
}

func (n redisSessionCount) Extend(ctx context.Context, subject, id string, ttl time.Duration) error {
	return n.call(ctx, subject, "extend", id, ttl.Milliseconds())
}

func (n redisSessionCount) Remove(ctx context.Context, subject, id string) error {
	return n.call(ctx, subject, "remove", id)
}

// Live reads the subject's zset with two plain reads, no script: the
// Redis clock (the scores are on it), then the sessions that end after it.
// One key, so one slot on Cluster.
func (n redisSessionCount) Live(ctx context.Context, subject string) ([]locks.SessionSummary, error) {
	redisNow, err := n.r.client.Time(ctx).Result()
	if err != nil {
		return nil, locks.Unavailable("list sessions", stringer("of a subject"), err)
	}
	now := time.Now()
	zs, err := n.r.client.ZRangeByScoreWithScores(ctx, n.key(subject)[0], &redis.ZRangeBy{
		Min: "(" + strconv.FormatInt(redisNow.UnixMilli(), 10), Max: "+inf"}).Result()
	if err != nil {
		return nil, locks.Unavailable("list sessions", stringer("of a subject"), err)
	}
	out := make([]locks.SessionSummary, 0, len(zs))
	for _, z := range zs {
		id, _ := z.Member.(string)
		left := time.Duration(int64(z.Score)-redisNow.UnixMilli()) * time.Millisecond
		out = append(out, locks.SessionSummary{ID: id, ExpiresAt: now.Add(left)})
	}
	return out, nil
}

// redisSessions is the Redis backend's store of sessions.
type redisSessions struct{ r *Backend }

var _ locks.SessionStore = redisSessions{}

// sessionKey is the session's record: a hash tag of its own, so that on
// Redis Cluster it lives wherever its id hashes, apart from its locks.
func (s redisSessions) sessionKey(c locks.SessionCaller) []string {
	return []string{s.r.opts.Prefix + "session:{" + c.ID + "}"}
}

// sessionReply reads {GRANTED, ...} or {code}: the rest of a grant, or
// the refusal as an error.
func sessionReply(op string, c locks.SessionCaller, cmd *redis.Cmd) ([]any, error) {
	out, err := cmd.Slice()
	if err != nil {
		return nil, locks.Unavailable(op+" session", stringer(c.ID), err)
	}
	if len(out) == 0 {
		return nil, unexpectedReply(out)
	}
	code, _ := out[0].(int64)
	if code == codeGranted {
		return out[1:], nil
	}
	if err := sessionRefusal(op, c, code); err != nil {
		return nil, err
	}
	return nil, unexpectedReply(out)
}

// sessionRefusal is the error of a session script's refusal code, nil for
// any other code.
func sessionRefusal(op string, c locks.SessionCaller, code int64) error {
	switch code {
	case codeSessionEnded:
		return locks.SessionError(op, c, locks.ErrSessionEnded)
	case codeSessionNotYour:
		return locks.SessionError(op, c, locks.ErrSessionNotYours)
	case codeSessionFull:
		return locks.SessionError(op, c, locks.ErrSessionFull)
	}
	return nil
}

// stringer names a session in errors.
type stringer string

func (s stringer) String() string { return string(s) }

// membersOf reads {nonce, 'p'|'c' .. member, ...}.
func membersOf(out []any) []locks.SessionMember {
	ms := make([]locks.SessionMember, 0, len(out)/2)
	for i := 0; i+1 < len(out); i += 2 {
		nonce, _ := out[i].(string)
		v, _ := out[i+1].(string)
		if len(v) < 1 {
			continue
		}
		h, ok := locks.DecodeHold(v[1:])
		if !ok {
			continue
		}
		ms = append(ms, locks.SessionMember{Nonce: nonce, Hold: h, Pending: v[0] == 'p', Released: v[0] == 'g'})
	}
	return ms
}

func leftOf(out []any) time.Duration {
	if len(out) == 0 {
		return 0
	}
	ms, _ := out[0].(int64)
	return millis(max(ms, 0))
}

func (s redisSessions) Open(ctx context.Context, c locks.SessionCaller, ttl time.Duration) error {
	keys, args := s.counted(c, s.sessionKey(c), c.TokHash, c.Subject, ttl.Milliseconds())
	if s.r.SessionEngine.StoreCounts {
		args = append(args, s.r.SessionEngine.MaxPerSubject)
	}
	cmd, ackErr := s.r.run(ctx, sessionOpenScript, keys, args...)
	if code, _ := cmd.Slice(); len(code) == 1 && code[0] == int64(codeSessionFull) {
		return fmt.Errorf("open session: %w", locks.ErrTooManySessions)
	}
	if _, err := sessionReply("open", c, cmd); err != nil {
		return err
	}
	if ackErr != nil {
		return locks.Unavailable("open session", stringer(c.ID), ackErr)
	}
	return nil
}

func (s redisSessions) Join(ctx context.Context, c locks.SessionCaller, m locks.SessionMember, maxHolds int, pendingFor time.Duration) (time.Duration, error) {
	cmd, _ := s.r.run(ctx, sessionJoinScript, s.sessionKey(c), c.TokHash, c.Subject, m.Nonce, locks.EncodeHold(m.Hold), maxHolds,
		max(pendingFor.Milliseconds(), 1))
	out, err := sessionReply("join", c, cmd)
	return leftOf(out), err
}

func (s redisSessions) Confirm(ctx context.Context, c locks.SessionCaller, m locks.SessionMember) (time.Duration, error) {
	cmd, _ := s.r.run(ctx, sessionConfirmScript, s.sessionKey(c), c.TokHash, c.Subject, m.Nonce, locks.EncodeHold(m.Hold))
	out, err := sessionReply("join", c, cmd)
	return leftOf(out), err
}

func (s redisSessions) Keep(ctx context.Context, c locks.SessionCaller, ttl time.Duration) (time.Duration, []locks.SessionMember, error) {
	keys, args := s.counted(c, s.sessionKey(c), c.TokHash, c.Subject, ttl.Milliseconds())
	cmd, ackErr := s.r.run(ctx, sessionKeepScript, keys, args...)
	out, err := sessionReply("keep", c, cmd)
	if err != nil {
		return 0, nil, err
	}
	if ackErr != nil {
		return 0, nil, locks.Unavailable("keep session", stringer(c.ID), locks.Renewed(ackErr))
	}
	return leftOf(out), membersOf(out[1:]), nil
}

// counted is a session script's keys and arguments, and when the script
// moves the subject's count of sessions in the same call
// (SessionEngine.StoreCounts), the count's key after the keys and the
// session's id after the arguments.
func (s redisSessions) counted(c locks.SessionCaller, keys []string, args ...any) ([]string, []any) {
	if s.r.SessionEngine.StoreCounts {
		keys = append(keys, redisSessionCount(s).key(c.Subject)...)
		args = append(args, c.ID)
	}
	return keys, args
}

func (s redisSessions) Drop(ctx context.Context, c locks.SessionCaller, nonces []string) error {
	args := make([]any, 0, 1+len(nonces))
	args = append(args, c.TokHash)
	for _, n := range nonces {
		args = append(args, n)
	}
	cmd, _ := s.r.run(ctx, sessionDropScript, s.sessionKey(c), args...)
	if err := cmd.Err(); err != nil {
		return locks.Unavailable("drop from session", stringer(c.ID), err)
	}
	return nil
}

func (s redisSessions) End(ctx context.Context, c locks.SessionCaller) ([]locks.SessionMember, error) {
	keys, args := s.counted(c, s.sessionKey(c), c.TokHash, c.Subject)
	cmd, _ := s.r.run(ctx, sessionEndScript, keys, args...)
	out, err := sessionReply("end", c, cmd)
	if err != nil {
		return nil, err
	}
	return membersOf(out), nil
}

func (s redisSessions) Describe(ctx context.Context, c locks.SessionCaller) (time.Duration, time.Duration, []locks.SessionMember, error) {
	cmd, _ := s.r.run(ctx, sessionGetScript, s.sessionKey(c), c.TokHash, c.Subject)
	out, err := sessionReply("describe", c, cmd)
	if err != nil || len(out) < 2 {
		return 0, 0, nil, err
	}
	ttl, _ := out[1].(int64)
	return leftOf(out), millis(ttl), membersOf(out[2:]), nil
}

// ReleaseEnded implements sessionGrants.
func (r *Backend) ReleaseEnded(ctx context.Context, h locks.SessionHold, token, sessionID string) (locks.Released, error) {
	if h.Semaphore {
		return r.ReleasePermit(ctx, h.Key, token)
	}
	return r.releaseFor(ctx, resource{lockKind, h.Key}, token, allHolds, sessionID)
}

// allHolds, as the hold to release, ends every hold of the grant
// (ALL_HOLDS in lua/holds.lua): a session's end does. No caller's hold id
// is it.
const allHolds = "*"

// RenewMember implements the session engine's grants.
func (r *Backend) RenewMember(ctx context.Context, h locks.SessionHold, token string, ttl time.Duration) (locks.Lease, error) {
	if h.Semaphore {
		return r.renewPermit(ctx, h.Key, token, ttl)
	}
	return r.renew(ctx, h.Key, token, ttl)
}

// AcquireInSessionAtOnce implements locks.SessionAcquirer: it runs
// lua/session_acquire.lua, on a single Redis only (New sets it as the
// session engine's AtOnce there).
func (r *Backend) AcquireInSessionAtOnce(ctx context.Context, c locks.SessionCaller, m locks.SessionMember, maxHolds int, owner string, req locks.AcquireRequest) (locks.Grant, error) {
	return r.acquireInSession(ctx, resource{lockKind, m.Hold.Key}, c, m, maxHolds, owner, req, 0)
}

// AcquirePermitInSessionAtOnce implements locks.SessionAcquirer: a
// permit, as AcquireInSessionAtOnce takes a lock.
func (r *Backend) AcquirePermitInSessionAtOnce(ctx context.Context, c locks.SessionCaller, m locks.SessionMember, maxHolds int, owner string, req locks.SemaphoreRequest) (locks.Grant, error) {
	return r.acquireInSession(ctx, resource{semaphoreKind, m.Hold.Key}, c, m, maxHolds, owner, req.AcquireRequest, req.Limit)
}

// acquireInSession takes res in c's session as member m in one script
// (the kind's sessionAcquire). Its grant is delivered, and an outcome that
// is unknown cleaned up, as an acquire's that does not wait.
func (r *Backend) acquireInSession(ctx context.Context, res resource, c locks.SessionCaller, m locks.SessionMember, maxHolds int, owner string, req locks.AcquireRequest, limit int) (locks.Grant, error) {
	a := acquireArgs{tokHash: locks.TokenHash(owner), subject: req.Subject, owner: req.Owner, mode: req.Mode, value: req.Value, minHold: req.MinHold, limit: limit, positional: true}
	_, keys, args := res.kind.acquireCall(r, res.key, a)
	keys = append(keys, redisSessions{r}.sessionKey(c)...)
	args = append(args, c.TokHash, c.Subject, m.Nonce, locks.EncodeHold(m.Hold), maxHolds)
	start := time.Now()
	cmd, ackErr := r.exec(ctx, res.kind.sessionAcquire(), newCallID(), "", keys, args...)
	if out, err := cmd.Int64Slice(); err == nil && len(out) == 1 {
		if err := sessionRefusal("join", c, out[0]); err != nil {
			return locks.Grant{}, err
		}
	}
	// The TTL asked for is not the lease here: the script cuts it to what is
	// left of the session's, and answers it (lua/lib_grant.lua granted_now),
	// never a bare fencing token, which 0 would read as a lease of nothing.
	rp, err := res.kind.acquireReply(r, cmd, 0)
	if rp, err = r.acquired(ctx, res, "", a.tokHash, rp, ackErr, err); err != nil {
		return locks.Grant{}, err
	}
	if !rp.granted {
		return locks.Grant{}, res.kind.held(rp)
	}
	return r.deliver(ctx, res, owner, rp.lease(start, 0), 0, req.Keep)
}
