package auth

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/lockgate/lockgate/internal/jsonkeys"
)

// errDuplicateClaim means a token's payload names a key twice.
var errDuplicateClaim = errors.New("a key appears twice in the token's payload")

// tokenClaims is a token's payload, read claim by claim under exact names.
// Decoding into a struct would not do: encoding/json matches field names
// case-insensitively (and folds "ſ" to "s"), so "NS" or "nſ" would grant
// namespaces and "EXP" would stand for exp; and it keeps the last of
// duplicate keys, which another parser in the chain may read differently.
type tokenClaims struct {
	jwt.RegisteredClaims
	// nsClaim names the claim that holds namespace globs; set it before
	// decoding.
	nsClaim string
	// ns is that claim's value, and hasNS whether the token carries it (a
	// JSON null counts as absent).
	ns    []string
	hasNS bool
	// admin is the value of the claim named nsClaim+"_admin": the
	// namespaces the bearer administers (see Claims.Administers).
	admin []string
	// all is every claim by its exact name, for policy rules.
	all map[string]json.RawMessage
}

// UnmarshalJSON implements json.Unmarshaler; golang-jwt decodes the payload
// with it.
func (c *tokenClaims) UnmarshalJSON(data []byte) error {
	if key, dup := jsonkeys.Duplicate(data); dup {
		return fmt.Errorf("%w: %q", errDuplicateClaim, key)
	}
	if err := json.Unmarshal(data, &c.all); err != nil {
		return err
	}
	for name, dst := range map[string]any{
		"iss": &c.Issuer,
		"sub": &c.Subject,
		"aud": &c.Audience,
		"exp": &c.ExpiresAt,
		"nbf": &c.NotBefore,
		"iat": &c.IssuedAt,
		"jti": &c.ID,
	} {
		if raw, ok := c.all[name]; ok {
			if err := json.Unmarshal(raw, dst); err != nil {
				return fmt.Errorf("claim %s: %w", name, err)
			}
		}
	}
	if raw, ok := c.all[c.nsClaim]; ok && string(raw) != "null" {
		if err := json.Unmarshal(raw, &c.ns); err != nil {
			return fmt.Errorf("claim %s: %w", c.nsClaim, err)
		}
		c.hasNS = true
	}
	adminClaim := c.nsClaim + "_admin"
	if raw, ok := c.all[adminClaim]; ok && string(raw) != "null" {
		if err := json.Unmarshal(raw, &c.admin); err != nil {
			return fmt.Errorf("claim %s: %w", adminClaim, err)
		}
	}
	return nil
}

// Claims are what a verified token says about its bearer.
type Claims struct {
	// Identity is who the caller is: the token's iss and sub.
	Identity
	// Namespaces are the token's ns globs, or those a policy grants it.
	Namespaces []string
	// AdminNamespaces are the namespace globs the bearer administers: the
	// token's ns_admin claim (the ns claim's name and "_admin"), or the
	// admin_namespaces of the policy rules that grant it. An administrator
	// may act on grants that are not its own (break a lock, resize a
	// semaphore); see Administers.
	AdminNamespaces []string
	// ExpiresAt is the token's exp: nothing its bearer opens (a watch, a
	// long-poll) outlives it. Zero when the token has none.
	ExpiresAt time.Time
	// MaxTTL, when not 0, is the longest lease the policy lets this
	// token ask for (handlers enforce it with their own maximum).
	MaxTTL time.Duration
	// Limits are the subject limits the policy rules that granted this
	// token set; zero fields leave the gateway's (see
	// ratelimit.SubjectLimiter).
	Limits Limits
}

// Administers reports whether the bearer administers namespace: a glob
// of AdminNamespaces matches it whole, and the token is granted it too, so
// that an admin claim never reaches past the namespaces a token may use.
func (c Claims) Administers(namespace string) bool {
	if !c.Allows(namespace) {
		return false
	}
	for _, g := range c.AdminNamespaces {
		if matchNamespace(g, namespace) {
			return true
		}
	}
	return false
}

// AdminGrants are the globs of AdminNamespaces that administer some
// namespace the token is granted: the others grant nothing (see
// Administers), and are not worth showing.
func (c Claims) AdminGrants() []string {
	var out []string
	for _, a := range c.AdminNamespaces {
		for _, g := range c.Namespaces {
			if globsOverlap(a, g) {
				out = append(out, a)
				break
			}
		}
	}
	return out
}

// Allows reports whether one of the namespace globs matches namespace whole.
func (c Claims) Allows(namespace string) bool {
	for _, g := range c.Namespaces {
		if matchNamespace(g, namespace) {
			return true
		}
	}
	return false
}
