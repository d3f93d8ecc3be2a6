package auth

import (
	"context"
	"crypto"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// MaxTokenLen bounds the bearer token we are willing to parse. Real tokens
// are a few hundred bytes; the header limit (64 KiB) would let through
// megabyte-scale work for base64 and JSON decoding otherwise.
const MaxTokenLen = 8 << 10

// Config says which tokens to trust. Set at most one of Secret and
// PublicKeys, with or without JWKS, and at least one of the three.
//
// Keys belong to issuers: a JWK Set's keys verify the tokens of its
// issuer only (see JWKSConfig.Sets), and the gateway's own keys (Secret or
// PublicKeys) those of Issuers. A token whose iss no key belongs to is
// refused.
type Config struct {
	// Secret verifies HS256 tokens. At least 32 bytes; see CheckSecret.
	Secret []byte
	// PublicKeys verify RS256 (RSA, 2048 bits or more), ES256 (ECDSA P-256)
	// and EdDSA (Ed25519) tokens; see ParsePublicKeys.
	PublicKeys []crypto.PublicKey
	// JWKS verifies RS256, ES256 and EdDSA tokens whose key is in one of
	// the sets of their iss, by kid (or any key of those sets for a token
	// without one). Only the algorithms above are accepted, and only with a
	// key of their type: a set's "alg" or an "oct" (symmetric) key widens
	// nothing. It needs an Audience.
	JWKS *JWKS
	// NSClaim names the claim that holds a token's namespace globs, an
	// array of strings. Default "ns".
	NSClaim string
	// Policy, when set, grants namespaces to tokens without the NSClaim
	// claim. Without it such tokens are granted nothing.
	Policy *Policy
	// Issuers are the iss values of the tokens Secret or PublicKeys
	// verify. Empty: a token with no iss, or with one that no JWK Set
	// belongs to. An issuer here and in JWKS has its tokens verified by
	// either.
	Issuers []string
	// Audience, when set, must be among the token's aud. It is required
	// with JWKS: providers sign tokens for many relying parties, and one
	// meant for another must not pass here.
	Audience string
}

// Authenticator verifies bearer JWTs. It accepts only the algorithms its keys
// are for, so an HS256 token signed with a public key as the secret, or an
// "alg: none" token, never verifies.
type Authenticator struct {
	parser  *jwt.Parser
	keys    map[string]jwt.VerificationKeySet // the gateway's own, by alg
	issuers []string                          // the iss values they sign; nil: any no set belongs to
	jwks    *JWKS                             // or nil
	nsClaim string
	policy  *Policy // or nil
	cache   verified
}

// NewAuthenticator checks cfg and returns an Authenticator for it.
func NewAuthenticator(cfg Config) (*Authenticator, error) {
	keys := make(map[string]jwt.VerificationKeySet)
	switch {
	case len(cfg.Secret) > 0 && len(cfg.PublicKeys) > 0:
		return nil, errors.New("configure either a JWT secret or JWT public keys, not both")
	case len(cfg.Secret) > 0:
		if err := CheckSecret(cfg.Secret); err != nil {
			return nil, err
		}
		keys[jwt.SigningMethodHS256.Alg()] = jwt.VerificationKeySet{Keys: []jwt.VerificationKey{cfg.Secret}}
	case len(cfg.PublicKeys) > 0:
		for _, k := range cfg.PublicKeys {
			alg, err := algFor(k)
			if err != nil {
				return nil, err
			}
			set := keys[alg]
			set.Keys = append(set.Keys, k)
			keys[alg] = set
		}
	case cfg.JWKS == nil:
		return nil, errors.New("no JWT key configured")
	}
	if cfg.JWKS != nil && cfg.Audience == "" {
		return nil, errors.New("tokens verified with a JWK Set need an audience: providers sign tokens for many relying parties, " +
			"and one meant for another would pass")
	}
	for _, iss := range cfg.Issuers {
		if err := CheckIssuer(iss); err != nil {
			return nil, fmt.Errorf("issuer %q: %w", iss, err)
		}
		if len(keys) == 0 && !cfg.JWKS.has(iss) {
			return nil, fmt.Errorf("issuer %q: no key verifies its tokens: no JWK Set belongs to it, and no secret or public key is configured", iss)
		}
	}
	algs := make([]string, 0, len(keys)+len(jwksAlgs))
	for alg := range keys {
		algs = append(algs, alg)
	}
	if cfg.JWKS != nil {
		algs = append(algs, jwksAlgs...)
	}
	slices.Sort(algs)
	algs = slices.Compact(algs)
	opts := []jwt.ParserOption{jwt.WithValidMethods(algs), jwt.WithExpirationRequired()}
	if cfg.Audience != "" {
		opts = append(opts, jwt.WithAudience(cfg.Audience))
	}
	nsClaim := cfg.NSClaim
	if nsClaim == "" {
		nsClaim = "ns"
	}
	return &Authenticator{parser: jwt.NewParser(opts...), keys: keys, issuers: slices.Clone(cfg.Issuers), jwks: cfg.JWKS,
		nsClaim: nsClaim, policy: cfg.Policy}, nil
}

// jwksAlgs are the algorithms a JWKS key may verify: the asymmetric ones
// of the allow-list. Never HS256: a JWK Set is public, so a symmetric key
// in one is no secret.
var jwksAlgs = []string{jwt.SigningMethodRS256.Alg(), jwt.SigningMethodES256.Alg(), jwt.SigningMethodEdDSA.Alg()}

// Check reports whether the Authenticator can verify every kind of token
// it is configured for: whether each JWK Set has been fetched.
func (a *Authenticator) Check() error {
	if a.jwks == nil {
		return nil
	}
	return a.jwks.Ready()
}

// JWKSStatus describes the JWK Sets, for metrics; nil without any.
func (a *Authenticator) JWKSStatus() []JWKSStatus {
	if a.jwks == nil {
		return nil
	}
	return a.jwks.Status()
}

// generation changes whenever a JWK Set does.
func (a *Authenticator) generation() uint64 {
	if a.jwks == nil {
		return 0
	}
	return a.jwks.gen.Load()
}

// Authenticate verifies the request's "Authorization: Bearer" token. Its
// errors are *Error values.
func (a *Authenticator) Authenticate(r *http.Request) (Claims, error) {
	header := r.Header.Get("Authorization")
	scheme, token, ok := strings.Cut(header, " ")
	if header == "" {
		return Claims{}, &Error{Reason: "missing Authorization: Bearer token"}
	}
	if strings.EqualFold(strings.TrimSpace(header), "Bearer") || ok && strings.EqualFold(scheme, "Bearer") && strings.TrimSpace(token) == "" {
		// Authorization: Bearer $TOKEN, with $TOKEN unset.
		return Claims{}, &Error{Reason: "the Authorization header says Bearer but carries no token: is the variable that holds it empty?", Presented: true}
	}
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return Claims{}, &Error{Reason: "the Authorization header must be \"Bearer <JWT>\"", Presented: true}
	}
	token = strings.TrimSpace(token)
	// Refuse absurd tokens before any decoding work.
	if len(token) > MaxTokenLen || strings.Count(token, ".") != 2 {
		return Claims{}, &Error{Reason: "the bearer token is not a JWT", Presented: true}
	}
	now, gen := time.Now(), a.generation()
	if c, ok := a.cache.get(token, now, gen); ok {
		return c, nil
	}
	c := tokenClaims{nsClaim: a.nsClaim}
	if _, err := a.parser.ParseWithClaims(token, &c, a.keyFunc(r.Context())); err != nil {
		return Claims{}, &Error{Reason: reason(err), Presented: true}
	}
	if c.Subject == "" {
		return Claims{}, &Error{Reason: "the token has no sub claim", Presented: true}
	}
	claims := Claims{Identity: Identity{Issuer: c.Issuer, Subject: c.Subject}, Namespaces: c.ns, AdminNamespaces: c.admin,
		grants: grants{claim: a.nsClaim, hasClaim: c.hasNS}}
	if c.ExpiresAt != nil {
		claims.ExpiresAt = c.ExpiresAt.Time
	}
	if !c.hasNS && a.policy != nil {
		g := a.policy.grant(c.all)
		claims.Namespaces, claims.AdminNamespaces, claims.MaxTTL, claims.MaxHold, claims.Limits = g.namespaces, g.admin, g.maxTTL, g.maxHold, g.limits
		claims.grants.policy = true
	}
	// Only a token already valid is cached (a future nbf verifies later);
	// exp is required, so every entry ends.
	if c.ExpiresAt != nil && (c.NotBefore == nil || !c.NotBefore.After(now)) {
		a.cache.put(token, claims, c.ExpiresAt.Time, gen)
	}
	return claims, nil
}

// keyFunc returns the keys that may verify a token: those of its issuer,
// for its algorithm. golang-jwt has decoded the claims when it calls it,
// and verifies the signature with each key in turn.
func (a *Authenticator) keyFunc(ctx context.Context) jwt.Keyfunc {
	return func(t *jwt.Token) (any, error) {
		if _, ok := t.Header["crit"]; ok {
			return nil, errCritHeader
		}
		iss := t.Claims.(*tokenClaims).Issuer
		own, fromSet := a.ownKeysFor(iss), a.jwks.has(iss)
		if !own && !fromSet || strings.Contains(iss, "#") {
			return nil, jwt.ErrTokenInvalidIssuer
		}
		// WithValidMethods has already refused other algorithms; the
		// lookups keep the key type tied to the algorithm all the same.
		alg := t.Method.Alg()
		var set jwt.VerificationKeySet
		if own {
			set.Keys = slices.Clone(a.keys[alg].Keys)
		}
		if fromSet && slices.Contains(jwksAlgs, alg) {
			kid, _ := t.Header["kid"].(string)
			for _, k := range a.jwks.keys(ctx, iss, kid, alg) {
				set.Keys = append(set.Keys, k)
			}
		}
		if len(set.Keys) == 0 {
			return nil, jwt.ErrTokenSignatureInvalid
		}
		return set, nil
	}
}

// ownKeysFor reports whether the gateway's own keys (Secret, PublicKeys)
// verify tokens of iss.
func (a *Authenticator) ownKeysFor(iss string) bool {
	switch {
	case len(a.keys) == 0:
		return false
	case len(a.issuers) > 0:
		return slices.Contains(a.issuers, iss)
	}
	return !a.jwks.has(iss)
}
