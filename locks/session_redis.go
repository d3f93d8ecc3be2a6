package locks

import (
	"context"
	"time"

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
	sessionEndScript     = newScript("session_end")
	sessionGetScript     = newScript("session_get")
)

// redisSessions is the Redis backend's store of sessions.
type redisSessions struct{ r *Redis }

var _ sessionStore = redisSessions{}

// sessionKey is the session's record: a hash tag of its own, so that on
// Redis Cluster it lives wherever its id hashes, apart from its locks.
func (s redisSessions) sessionKey(c sessionCaller) []string {
	return []string{s.r.opts.Prefix + "session:{" + c.id + "}"}
}

// sessionReply reads {GRANTED, ...} or {code}: the rest of a grant, or
// the refusal as an error.
func sessionReply(op string, c sessionCaller, cmd *redis.Cmd) ([]any, error) {
	out, err := cmd.Slice()
	if err != nil {
		return nil, unavailable(op+" session", stringer(c.id), err)
	}
	if len(out) == 0 {
		return nil, unexpectedReply(out)
	}
	code, _ := out[0].(int64)
	switch code {
	case codeGranted:
		return out[1:], nil
	case codeSessionEnded:
		return nil, sessionError(op, c, ErrSessionEnded)
	case codeSessionNotYour:
		return nil, sessionError(op, c, ErrSessionNotYours)
	case codeSessionFull:
		return nil, sessionError(op, c, ErrSessionFull)
	}
	return nil, unexpectedReply(out)
}

// stringer names a session in errors.
type stringer string

func (s stringer) String() string { return string(s) }

// membersOf reads {nonce, 'p'|'c' .. member, ...}.
func membersOf(out []any) []sessionMember {
	ms := make([]sessionMember, 0, len(out)/2)
	for i := 0; i+1 < len(out); i += 2 {
		nonce, _ := out[i].(string)
		v, _ := out[i+1].(string)
		if len(v) < 1 {
			continue
		}
		h, ok := decodeHold(v[1:])
		if !ok {
			continue
		}
		ms = append(ms, sessionMember{nonce: nonce, hold: h, pending: v[0] == 'p'})
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

func (s redisSessions) open(ctx context.Context, c sessionCaller, ttl time.Duration) error {
	cmd, ackErr := s.r.run(ctx, sessionOpenScript, s.sessionKey(c), c.tokHash, c.subject, ttl.Milliseconds())
	if _, err := sessionReply("open", c, cmd); err != nil {
		return err
	}
	if ackErr != nil {
		return unavailable("open session", stringer(c.id), ackErr)
	}
	return nil
}

func (s redisSessions) join(ctx context.Context, c sessionCaller, m sessionMember, maxHolds int) (time.Duration, error) {
	cmd, _ := s.r.run(ctx, sessionJoinScript, s.sessionKey(c), c.tokHash, c.subject, m.nonce, encodeHold(m.hold), maxHolds)
	out, err := sessionReply("join", c, cmd)
	return leftOf(out), err
}

func (s redisSessions) confirm(ctx context.Context, c sessionCaller, m sessionMember) (time.Duration, error) {
	cmd, _ := s.r.run(ctx, sessionConfirmScript, s.sessionKey(c), c.tokHash, c.subject, m.nonce, encodeHold(m.hold))
	out, err := sessionReply("join", c, cmd)
	return leftOf(out), err
}

func (s redisSessions) keep(ctx context.Context, c sessionCaller, ttl time.Duration) (time.Duration, []sessionMember, error) {
	cmd, ackErr := s.r.run(ctx, sessionKeepScript, s.sessionKey(c), c.tokHash, c.subject, ttl.Milliseconds())
	out, err := sessionReply("keep", c, cmd)
	if err != nil {
		return 0, nil, err
	}
	if ackErr != nil {
		return 0, nil, unavailable("keep session", stringer(c.id), renewed(ackErr))
	}
	return leftOf(out), membersOf(out[1:]), nil
}

func (s redisSessions) drop(ctx context.Context, c sessionCaller, nonces []string) error {
	args := make([]any, 0, 1+len(nonces))
	args = append(args, c.tokHash)
	for _, n := range nonces {
		args = append(args, n)
	}
	cmd, _ := s.r.run(ctx, sessionDropScript, s.sessionKey(c), args...)
	if err := cmd.Err(); err != nil {
		return unavailable("drop from session", stringer(c.id), err)
	}
	return nil
}

func (s redisSessions) end(ctx context.Context, c sessionCaller) ([]sessionMember, error) {
	cmd, _ := s.r.run(ctx, sessionEndScript, s.sessionKey(c), c.tokHash, c.subject)
	out, err := sessionReply("end", c, cmd)
	if err != nil {
		return nil, err
	}
	return membersOf(out), nil
}

func (s redisSessions) describe(ctx context.Context, c sessionCaller) (time.Duration, time.Duration, []sessionMember, error) {
	cmd, _ := s.r.run(ctx, sessionGetScript, s.sessionKey(c), c.tokHash, c.subject)
	out, err := sessionReply("describe", c, cmd)
	if err != nil || len(out) < 2 {
		return 0, 0, nil, err
	}
	ttl, _ := out[1].(int64)
	return leftOf(out), millis(ttl), membersOf(out[2:]), nil
}

// releaseEnded implements sessionGrants.
func (r *Redis) releaseEnded(ctx context.Context, h SessionHold, token, sessionID string) (Released, error) {
	if h.Semaphore {
		return r.ReleasePermit(ctx, h.Key, token)
	}
	return r.releaseFor(ctx, resource{lockKind, h.Key}, token, "", sessionID)
}
