package locks

import (
	"context"
	"crypto/aes"
	"crypto/cipher"
	"crypto/hkdf"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"strconv"
	"time"
)

// Idempotent is what backends offer for acquires that callers may retry
// (the IETF httpapi Idempotency-Key draft): the same idempotency key, from
// the same subject, for the same lock (semaphore) and request, yields the
// same grant while it lives, however many times and through whichever
// gateway on the same store it is sent.
//
// The first call with a key acquires as Acquire (AcquirePermit) does, and
// the backend remembers the key from then on: while the call still runs
// (waiting, say), another one with the key gets an *InProgressError; once
// it is granted, another one gets the same grant (Grant.Replayed) with
// what remains of its lease, until that lease ends; then ErrGrantEnded,
// until the key is forgotten, IdempotencyGrace after the lease (as last
// renewed) would have ended. A call that was not granted (held, full, cut
// off) leaves no trace: a retry runs afresh. A call granted as its caller
// left (ctx done by then, say a client that timed out) still records and
// returns its grant, which Acquire would release: the caller's retry gets
// it. The same key with another request (TTL, wait, owner label or limit)
// gets ErrIdempotencyMismatch.
//
// The store never holds a usable owner token: a record keeps the token
// encrypted with a key derived from the idempotency key, the subject and
// the lock's path, under an id derived (apart) from the idempotency key and
// the subject. So the token is as safe in the store as the idempotency key
// is hard to guess: send random keys (a UUID v4).
type Idempotent interface {
	// AcquireOnce is Acquire with an idempotency key.
	AcquireOnce(ctx context.Context, key Key, req AcquireRequest, idemKey string) (Grant, error)
	// AcquirePermitOnce is AcquirePermit with an idempotency key.
	AcquirePermitOnce(ctx context.Context, key Key, req SemaphoreRequest, idemKey string) (Grant, error)
}

// IdempotencyGrace is how long a key is remembered after its grant's lease
// ends (or would have ended, for a grant released earlier), with the lease
// as last renewed. Until then a retry gets ErrGrantEnded.
const IdempotencyGrace = time.Minute // 60000 in lua/renew.lua, reenter.lua, sem_renew.lua

// MaxIdempotencyKeyLen is the longest idempotency key.
const MaxIdempotencyKeyLen = 255

// ValidIdempotencyKey reports whether k is 1 to MaxIdempotencyKeyLen
// visible ASCII characters ('!' to '~').
func ValidIdempotencyKey(k string) bool {
	if len(k) < 1 || len(k) > MaxIdempotencyKeyLen {
		return false
	}
	for i := 0; i < len(k); i++ {
		if k[i] < '!' || k[i] > '~' {
			return false
		}
	}
	return true
}

// idemRetry is the longest RetryAfter of an *InProgressError: the first
// call may wait for minutes, and its retries should learn the outcome soon
// after it is known.
const idemRetry = time.Second

// IdemPendingSlack is how much longer than its wait a pending record lives,
// besides the backend's own time bounds.
const IdemPendingSlack = 10 * time.Second

// IdemCall is one acquire with an idempotency key.
type IdemCall struct {
	ID          string // the record's id: from the key and the subject
	Fingerprint string // of the request
	Nonce       string // this attempt's
	aead        cipher.AEAD
	aad         []byte // binds a ciphertext to its record
	// Unknown is the call id of the step whose outcome is unknown, for
	// abort to fence off (see lua/once.lua); "" when none is.
	Unknown string
	// GaveBack is the token hash of the grant this call made and gave
	// back, for abort to forget a record of it; "" when none.
	GaveBack string
}

// Labels of the values derived from an idempotency key; each is used for
// one thing only.
const (
	idemIDLabel  = "lockgate idempotency record id v1"
	idemKeyLabel = "lockgate idempotency token key v1"
)

// NewIdemCall derives what an acquire of key with idemKey needs. path is
// the resource's path in the API ("/locks/ns/name"); limit is 0 for a lock.
func NewIdemCall(path string, req AcquireRequest, limit int, idemKey string) (*IdemCall, error) {
	if !ValidIdempotencyKey(idemKey) {
		return nil, fmt.Errorf("%w: the idempotency key must be 1 to %d visible ASCII characters", ErrInvalid, MaxIdempotencyKeyLen)
	}
	id, err := hkdf.Key(sha256.New, []byte(idemKey), nil, string(fields(idemIDLabel, req.Subject)), 32)
	if err != nil {
		return nil, err
	}
	key, err := hkdf.Key(sha256.New, []byte(idemKey), nil, string(fields(idemKeyLabel, req.Subject, path)), 32)
	if err != nil {
		return nil, err
	}
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, err
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return nil, err
	}
	c := &IdemCall{ID: base64.RawURLEncoding.EncodeToString(id), Nonce: NewToken(), aead: aead}
	c.aad = fields(path, c.ID)
	parts := []string{"POST", path,
		strconv.FormatInt(req.TTL.Milliseconds(), 10), strconv.FormatInt(req.Wait.Milliseconds(), 10),
		req.Owner, strconv.Itoa(limit), req.Mode.String()}
	if req.Value != "" {
		// Only when set, so that a request without one keeps the
		// fingerprint gateways of the release before gave it.
		parts = append(parts, req.Value)
	}
	if req.MaxHold > 0 {
		// As the value: only when set. A retry that asks for another cap
		// is another request.
		parts = append(parts, "max_hold", strconv.FormatInt(req.MaxHold.Milliseconds(), 10))
	}
	if req.MinHold > 0 { // only when set, as the value
		parts = append(parts, "min_hold_ms", strconv.FormatInt(req.MinHold.Milliseconds(), 10))
	}
	if req.Priority > 0 { // only when set, as the value
		parts = append(parts, "priority", strconv.Itoa(req.Priority))
	}
	sum := sha256.Sum256(fields(parts...))
	c.Fingerprint = base64.RawURLEncoding.EncodeToString(sum[:])
	return c, nil
}

// fields encodes strings so that no two lists encode alike: each one's
// length, then its bytes.
func fields(ss ...string) []byte {
	var b []byte
	for _, s := range ss {
		b = binary.AppendUvarint(b, uint64(len(s)))
		b = append(b, s...)
	}
	return b
}

// Seal encrypts an owner token for the record.
func (c *IdemCall) Seal(token string) string {
	nonce := make([]byte, c.aead.NonceSize())
	rand.Read(nonce)
	return base64.RawURLEncoding.EncodeToString(c.aead.Seal(nonce, nonce, []byte(token), c.aad))
}

// Open decrypts what seal made.
func (c *IdemCall) open(sealed string) (string, error) {
	b, err := base64.RawURLEncoding.DecodeString(sealed)
	if err != nil || len(b) < c.aead.NonceSize() {
		return "", errors.New("idempotency record: malformed ciphertext")
	}
	n := c.aead.NonceSize()
	token, err := c.aead.Open(nil, b[:n], b[n:], c.aad)
	if err != nil {
		return "", errors.New("idempotency record: the token does not decrypt")
	}
	return string(token), nil
}

// idemOutcome is what a backend found for a key when a call began.
type idemOutcome int

const (
	IdemBegun      idemOutcome = iota // no record: this call is pending now
	IdemLive                          // the key's grant is live
	IdemInProgress                    // another call with the key runs
	IdemMismatch                      // the key was used for another request
	IdemEnded                         // the key's grant has ended
)

// IdemFound is the outcome of idemStore.begin.
type IdemFound struct {
	Outcome idemOutcome
	Sealed  string        // idemLive: the encrypted owner token
	Fence   int64         // idemLive
	TTL     time.Duration // idemLive: what remains of the lease; idemInProgress: of the pending record
	Holds   int           // idemLive
	// Capped is set for a live grant with a hard cap (AcquireRequest.MaxHold),
	// which ends it HoldLeft from now: a replay states it as the first
	// answer did.
	Capped   bool
	HoldLeft time.Duration
}

// idemStore is how a backend keeps the records of idempotency keys, for
// the locks (sem false) or the semaphores (sem true).
type idemStore interface {
	// Begin finds the record of c, or makes it, pending, for c; the
	// pending record lives for pending at most.
	Begin(ctx context.Context, c *IdemCall, pending time.Duration) (IdemFound, error)
	// Done records g, the grant of c, and attaches the record to it. It
	// returns errIdemTaken when another call holds the record.
	Done(ctx context.Context, c *IdemCall, g Grant) error
	// Abort forgets c's pending record, if it is still c's; in the
	// background unless wait is set.
	Abort(ctx context.Context, c *IdemCall, wait bool)
}

// ErrIdemTaken: a call outlived its pending record and another call with
// the key began meanwhile.
var ErrIdemTaken = errors.New("idempotency record taken by another call")

// AcquireOnce runs acquire under the idempotency record of c. release gives
// back a grant that could not be recorded.
func AcquireOnce(ctx context.Context, what string, st idemStore, c *IdemCall, pending time.Duration,
	acquire func(context.Context) (Grant, error), release func(context.Context, string)) (Grant, error) {
	start := time.Now()
	found, err := st.Begin(ctx, c, pending)
	if err != nil {
		st.Abort(context.WithoutCancel(ctx), c, false) // it may have begun
		return Grant{}, err
	}
	switch found.Outcome {
	case IdemLive:
		token, err := c.open(found.Sealed)
		if err != nil {
			return Grant{}, fmt.Errorf("acquire %s: %w", what, err)
		}
		g := Grant{Token: token, Holds: found.Holds, Replayed: true,
			Lease: Lease{FencingToken: found.Fence, TTL: found.TTL, ExpiresAt: start.Add(found.TTL)}}
		if found.Capped {
			g.HoldUntil = start.Add(found.HoldLeft)
			g.Lease = g.Lease.WithinHold()
		}
		return g, nil
	case IdemInProgress:
		return Grant{}, fmt.Errorf("acquire %s: %w", what,
			&InProgressError{RetryAfter: min(max(found.TTL, time.Millisecond), idemRetry)})
	case IdemMismatch:
		return Grant{}, fmt.Errorf("acquire %s: %w", what, ErrIdempotencyMismatch)
	case IdemEnded:
		return Grant{}, fmt.Errorf("acquire %s: %w", what, ErrGrantEnded)
	}
	g, err := acquire(ctx)
	if err != nil {
		// Done before the answer, so that a retry right after it runs
		// afresh; unless the store is in trouble.
		st.Abort(context.WithoutCancel(ctx), c, !errors.Is(err, ErrUnavailable))
		return Grant{}, err
	}
	if err := st.Done(ctx, c, g); err != nil {
		// Unrecorded, the grant would be out of reach of the retries the
		// key promises: give it back, and say the outcome is unknown.
		ctx := context.WithoutCancel(ctx)
		release(ctx, g.Token)
		if errors.Is(err, ErrIdemTaken) {
			return Grant{}, fmt.Errorf("acquire %s: %w", what, &InProgressError{RetryAfter: idemRetry})
		}
		// The record may have been written after all (the reply lost):
		// it must not tell the retry that the key's grant ended.
		// Before the answer, so that a retry right after it finds no such
		// record.
		c.GaveBack = TokenHash(g.Token)
		st.Abort(ctx, c, true)
		return Grant{}, err
	}
	return g, nil
}

// APIPath is the path of res in the API, which the records are bound to.
func APIPath(sem bool, key Key) string {
	if sem {
		return "/semaphores/" + key.String()
	}
	return "/locks/" + key.String()
}
