package grantsig

import (
	"crypto/ed25519"
	"encoding/base64"
	"encoding/json"
	"errors"
	"strconv"
	"sync/atomic"
	"time"
)

// Type is the JWS header's typ: a resource that checks it never takes
// another kind of JWT signed by the same key for a grant (RFC 8725 3.11).
const Type = "lockgate-grant+jwt"

// Modes of a signed grant.
const (
	ModeExclusive = "exclusive"
	ModeShared    = "shared"
	ModePermit    = "permit"
)

// Grant is what a signature vouches for.
type Grant struct {
	// Lock is "namespace/name" of a lock; Semaphore of a semaphore (one of
	// the two is set).
	Lock, Semaphore string
	// Subject is the holder's identity, as the gateway knows it
	// (issuer#subject of its bearer token).
	Subject      string
	FencingToken int64
	// Mode is ModeExclusive, ModeShared or ModePermit.
	Mode string
	// IssuedAt is when the gateway signed; LeaseEnd when the lease ends
	// unless renewed (a renewal is signed anew).
	IssuedAt, LeaseEnd time.Time
}

// payload is a Grant's JWT claims. iat and exp are NumericDates with
// milliseconds (RFC 7519 allows fractions): a lease is in milliseconds.
type payload struct {
	Iss          string      `json:"iss"`
	Sub          string      `json:"sub"`
	Lock         string      `json:"lock,omitempty"`
	Semaphore    string      `json:"semaphore,omitempty"`
	FencingToken int64       `json:"fencing_token"`
	Mode         string      `json:"mode"`
	Iat          json.Number `json:"iat"`
	Exp          json.Number `json:"exp"`
}

func numericDate(t time.Time) json.Number {
	return json.Number(strconv.FormatFloat(float64(t.UnixMilli())/1000, 'f', 3, 64))
}

// Signer signs grants with the first of its keys and publishes them all.
type Signer struct {
	issuer string
	keys   []Key
	header string // the signing key's encoded JWS header, and the dot
	jwks   []byte
	signed atomic.Uint64 // grants signed since NewSigner
}

// NewSigner returns a Signer that signs with keys[0], a private key, and
// names issuer in every grant's iss.
func NewSigner(issuer string, keys []Key) (*Signer, error) {
	if len(keys) == 0 || !keys[0].CanSign() {
		return nil, errors.New("grantsig: the first key must be a private key")
	}
	h, _ := json.Marshal(struct {
		Alg string `json:"alg"`
		Typ string `json:"typ"`
		Kid string `json:"kid"`
	}{"EdDSA", Type, keys[0].ID})
	return &Signer{issuer: issuer, keys: keys, header: b64(h) + ".", jwks: jwkSet(keys)}, nil
}

// Keys returns the published keys; the first signs.
func (s *Signer) Keys() []Key { return s.keys }

// JWKS returns the published keys as a JWK Set document.
func (s *Signer) JWKS() []byte { return s.jwks }

// Signed returns how many grants s has signed: what signing has cost,
// in Ed25519 signatures.
func (s *Signer) Signed() uint64 { return s.signed.Load() }

// Sign returns g as a compact JWS.
func (s *Signer) Sign(g Grant) string {
	s.signed.Add(1)
	p, _ := json.Marshal(payload{Iss: s.issuer, Sub: g.Subject, Lock: g.Lock, Semaphore: g.Semaphore,
		FencingToken: g.FencingToken, Mode: g.Mode, Iat: numericDate(g.IssuedAt), Exp: numericDate(g.LeaseEnd)})
	n := len(s.header) + base64.RawURLEncoding.EncodedLen(len(p))
	out := make([]byte, 0, n+1+base64.RawURLEncoding.EncodedLen(ed25519.SignatureSize))
	out = append(out, s.header...)
	out = base64.RawURLEncoding.AppendEncode(out, p)
	sig := ed25519.Sign(s.keys[0].private, out)
	out = append(out, '.')
	out = base64.RawURLEncoding.AppendEncode(out, sig)
	return string(out)
}
