package safety

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockgate/lockgate/locks"
)

// The one place in this package that knows how the Redis backend keeps a
// grant (lua/lib_keys.lua for a lock, lua/semlib.lua for a semaphore):
// the lease check (matrix_leases_test.go) reads Redis through readHold
// alone, and its own test shortens a lease through shortenHold. When the
// layout changes, these two functions change, and nothing else.
//
// Today, for a lock ns/name, with the gateway's default prefix:
//   - lockgate:{ns/name} is a hash: 'tok' is the SHA-256 (hex) of the
//     exclusive holder's owner token, 'fence' its fencing token; the key's
//     PEXPIRE is its lease. Held shared, 'tok' is empty and each holder
//     has a field 'r:<token hash>', JSON {f: fencing token, ...};
//   - lockgate:{ns/name}:readers is a zset, token hash of a shared holder
//     -> ms (Redis clock) when its lease ends;
//   - lockgate:sem:{ns/name} is a semaphore's hash, token hash -> JSON
//     {f: fencing token, ...}, and lockgate:sem:{ns/name}:leases its zset
//     of lease ends, as for shared holders.
//
// A lock set's locks, and a session's grants, are ordinary grants of their
// locks; a set's owner token of each lock is derived from the set's token
// (setOwnerToken).

// holdKind is how a grant holds its name.
type holdKind int

const (
	exclusiveHold holdKind = iota // a lock, exclusively
	sharedHold                    // a lock, shared
	permitHold                    // a permit of a semaphore
)

func (k holdKind) String() string {
	return [...]string{"exclusive", "shared", "permit"}[k]
}

// redisHold is what Redis held for one owner token of a name, at one
// moment on Redis's clock.
type redisHold struct {
	// at and after are Redis's clock (TIME) before and after the read's
	// other commands: one transaction, but Redis may stall inside it (a
	// pause, the machine's scheduler), so its reads happened some time
	// between the two.
	at, after time.Time
	held      bool  // the token held the name
	fence     int64 // its fencing token, when held
	// end is when its lease ends on Redis's clock, when held: the
	// earliest of the expiries that would drop it.
	end time.Time
	// other says what Redis held instead, when not held.
	other string
	// provisional: the grant is still a hand-off's, which its waiter has
	// not picked up (its lease is the pick-up's window, not its TTL).
	provisional bool
	// raw is what the read found, as Redis keeps it, for a finding's
	// message: the grant's fields, its lease's score, the keys' expiries
	// and the token's record (see lib_record.lua).
	raw string
}

// redisKeys are the keys of name's grants of kind (see above).
func redisKeys(kind holdKind, name string) (main, leases string) {
	if kind == permitHold {
		s := "lockgate:sem:{" + name + "}"
		return s, s + ":leases"
	}
	k := "lockgate:{" + name + "}"
	return k, k + ":readers"
}

// readHold reads, in one transaction on c (the node that serves name),
// what Redis holds for the owner token whose hash is tokHash. Every end
// it reads is absolute (a lease's score, a key's PEXPIRETIME): a PTTL
// counts from the moment Redis runs it, which a stall inside the
// transaction moves away from its TIME, and TIME plus PTTL then reads a
// lease as ending early by the stall.
func readHold(ctx context.Context, c redis.Cmdable, kind holdKind, name, tokHash string) (redisHold, error) {
	main, leases := redisKeys(kind, name)
	var (
		now, after         *redis.TimeCmd
		fields             *redis.SliceCmd
		member             *redis.StringCmd
		score              *redis.FloatCmd
		mainEnd, leasesEnd *redis.DurationCmd // PEXPIRETIME
		record             *redis.StringCmd
		recordEnd          *redis.DurationCmd
		all                *redis.ZSliceCmd // every lease of the name, for raw
	)
	_, err := c.TxPipelined(ctx, func(p redis.Pipeliner) error {
		now = p.Time(ctx)
		switch kind {
		case exclusiveHold:
			fields = p.HMGet(ctx, main, "tok", "fence", "p")
		case sharedHold:
			member = p.HGet(ctx, main, "r:"+tokHash)
			score = p.ZScore(ctx, leases, tokHash)
			leasesEnd = p.PExpireTime(ctx, leases)
			all = p.ZRangeWithScores(ctx, leases, 0, -1)
		case permitHold:
			member = p.HGet(ctx, main, tokHash)
			score = p.ZScore(ctx, leases, tokHash)
			leasesEnd = p.PExpireTime(ctx, leases)
			all = p.ZRangeWithScores(ctx, leases, 0, -1)
		}
		mainEnd = p.PExpireTime(ctx, main)
		record, recordEnd = p.Get(ctx, main+":t:"+tokHash), p.PExpireTime(ctx, main+":t:"+tokHash)
		after = p.Time(ctx)
		return nil
	})
	if err != nil && !errors.Is(err, redis.Nil) {
		return redisHold{}, err
	}
	h := redisHold{at: now.Val(), after: after.Val()}
	// expiry is when a key whose PEXPIRETIME is d goes: never for -1,
	// already for -2 (no key).
	expiry := func(d time.Duration) time.Time {
		switch {
		case d == -1:
			return h.after.Add(time.Hour)
		case d < 0:
			return h.at
		}
		return time.UnixMilli(d.Milliseconds())
	}
	h.raw = fmt.Sprintf("%s ends %s, token record %q (ends %s)", main, stamp(expiry(mainEnd.Val())), record.Val(), stamp(expiry(recordEnd.Val())))
	if kind == exclusiveHold {
		v := fields.Val()
		h.raw = fmt.Sprintf("tok %.12v..., fence %v, provisional %v; ", v[0], v[1], v[2] != nil) + h.raw
		tok, _ := v[0].(string)
		fence, _ := v[1].(string)
		if tok != tokHash {
			h.other = fmt.Sprintf("holder %.12s..., fencing token %s", tok, fence)
			if tok == "" {
				h.other = fmt.Sprintf("no exclusive holder (key ends %s)", stamp(expiry(mainEnd.Val())))
			}
			return h, nil
		}
		h.held, h.end = true, expiry(mainEnd.Val())
		h.fence, _ = strconv.ParseInt(fence, 10, 64)
		h.provisional = v[2] != nil
		return h, nil
	}
	var others []string
	for _, z := range all.Val() {
		m, _ := z.Member.(string)
		others = append(others, fmt.Sprintf("%.8s=%.0f", m, z.Score))
	}
	h.raw = fmt.Sprintf("hold %q, lease score %.0f, %s ends %s (its leases: %s); ", member.Val(), score.Val(), leases, stamp(expiry(leasesEnd.Val())), strings.Join(others, " ")) + h.raw
	if member.Err() != nil || score.Err() != nil {
		h.other = fmt.Sprintf("no %s hold of the token", kind)
		return h, nil
	}
	var rec struct {
		F json.RawMessage `json:"f"` // a number, or its digits in a string
		P any             `json:"p"`
	}
	if err := json.Unmarshal([]byte(member.Val()), &rec); err != nil {
		return redisHold{}, fmt.Errorf("%s hold of %s: %w", kind, name, err)
	}
	h.held, h.provisional = true, rec.P != nil
	h.fence, _ = strconv.ParseInt(strings.Trim(string(rec.F), `"`), 10, 64)
	h.end = time.UnixMilli(int64(score.Val()))
	for _, d := range []time.Duration{mainEnd.Val(), leasesEnd.Val()} {
		if e := expiry(d); e.Before(h.end) {
			h.end = e
		}
	}
	return h, nil
}

// shortenHold makes the lease of tokHash's grant of name end in d, as
// Redis keeps it: TestLeaseCheckSeesAShortLease's stand-in for a script
// that cuts a lease short.
func shortenHold(ctx context.Context, c redis.Cmdable, kind holdKind, name, tokHash string, d time.Duration) error {
	main, leases := redisKeys(kind, name)
	if kind == exclusiveHold {
		return c.PExpire(ctx, main, d).Err()
	}
	now, err := c.Time(ctx).Result()
	if err != nil {
		return err
	}
	return c.ZAddXX(ctx, leases, redis.Z{Score: float64(now.Add(d).UnixMilli()), Member: tokHash}).Err()
}

// tokenHash is what Redis keeps of an owner token.
func tokenHash(token string) string { return locks.TokenHash(token) }

// setOwnerToken is the owner token of lock name's grant in the lock set
// whose token is setToken (locks.setOwner): an HMAC of the lock's name
// under the set's token.
func setOwnerToken(setToken, name string) string {
	mac := hmac.New(sha256.New, []byte(setToken))
	mac.Write([]byte("set:" + name))
	return base64.RawURLEncoding.EncodeToString(mac.Sum(nil)[:16])
}
