package auth

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
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
	for _, rc := range registeredClaims {
		if raw, ok := c.all[rc.name]; ok {
			if err := json.Unmarshal(raw, rc.field(c)); err != nil {
				return &claimTypeError{claim: rc.name, want: rc.want, got: jsonType(raw)}
			}
		}
	}
	if raw, ok := c.all[c.nsClaim]; ok && string(raw) != "null" {
		if err := json.Unmarshal(raw, &c.ns); err != nil {
			return &claimTypeError{claim: c.nsClaim, want: globsWanted, got: jsonType(raw)}
		}
		c.hasNS = true
	}
	adminClaim := c.nsClaim + "_admin"
	if raw, ok := c.all[adminClaim]; ok && string(raw) != "null" {
		if err := json.Unmarshal(raw, &c.admin); err != nil {
			return &claimTypeError{claim: adminClaim, want: globsWanted, got: jsonType(raw)}
		}
	}
	return nil
}

// registeredClaims are the claims of RFC 7519 the gateway reads, with
// their fields and the JSON they must be.
var registeredClaims = []struct {
	name, want string
	field      func(*tokenClaims) any
}{
	{"iss", "a string", func(c *tokenClaims) any { return &c.Issuer }},
	{"sub", "a string", func(c *tokenClaims) any { return &c.Subject }},
	{"aud", "a string or an array of strings", func(c *tokenClaims) any { return &c.Audience }},
	{"exp", "a number (seconds since 1970)", func(c *tokenClaims) any { return &c.ExpiresAt }},
	{"nbf", "a number (seconds since 1970)", func(c *tokenClaims) any { return &c.NotBefore }},
	{"iat", "a number (seconds since 1970)", func(c *tokenClaims) any { return &c.IssuedAt }},
	{"jti", "a string", func(c *tokenClaims) any { return &c.ID }},
}

// globsWanted is what a claim of namespace globs must be.
const globsWanted = `an array of namespace globs (strings), such as ["billing", "etl-*"]`

// claimTypeError is a claim whose JSON is not of its type. It names the
// claim and the types, never the value: the caller reads it.
type claimTypeError struct{ claim, want, got string }

func (e *claimTypeError) Error() string {
	return fmt.Sprintf("the token's %s claim must be %s, not %s", e.claim, e.want, e.got)
}

// jsonType names the type of a JSON value.
func jsonType(raw json.RawMessage) string {
	if len(raw) == 0 {
		return "empty"
	}
	switch raw[0] {
	case '"':
		return "a string"
	case '[':
		if len(raw) > 1 && raw[1] != ']' {
			return "an array of other values"
		}
		return "an array"
	case '{':
		return "an object"
	case 't', 'f':
		return "a boolean"
	case 'n':
		return "null"
	default:
		return "a number"
	}
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
	// MaxHold, when not 0, is the longest hard cap on a hold the policy
	// lets this token's grants have (handlers enforce it with their own).
	MaxHold time.Duration
	// Limits are the subject limits the policy rules that granted this
	// token set; zero fields leave the gateway's (see
	// ratelimit.SubjectLimiter).
	Limits Limits
	// grants says where Namespaces came from, for NotGranted.
	grants grants
}

// grants is where a token's namespaces came from: its namespace claim
// (named claim), or, without one, the policy; the zero value when the
// Claims were not made by an Authenticator.
type grants struct {
	claim    string
	hasClaim bool
	policy   bool
}

// NotGranted says, in words for the caller, why the bearer may not use
// namespace, and which namespaces it may use: what a 403 tells.
func (c Claims) NotGranted(namespace string) string {
	ns := strconv.Quote(namespace)
	switch g := c.grants; {
	case g.claim == "":
		if len(c.Namespaces) == 0 {
			return "the token grants no namespace, so not namespace " + ns
		}
		return "the token grants namespaces " + quoteList(c.Namespaces) + ", not namespace " + ns
	case g.hasClaim && len(c.Namespaces) == 0:
		return "the token's " + g.claim + " claim is empty: it grants no namespace, so not namespace " + ns
	case g.hasClaim:
		return "the token grants namespaces " + quoteList(c.Namespaces) + " (its " + g.claim + " claim), not namespace " + ns
	case g.policy && len(c.Namespaces) == 0:
		return "the token has no " + g.claim + " claim, and no rule of the gateway's policy grants it a namespace"
	case g.policy:
		return "the gateway's policy grants this token namespaces " + quoteList(c.Namespaces) + ", not namespace " + ns
	default:
		return "the token has no " + g.claim + " claim, so it grants no namespace: the claim must be named exactly " +
			g.claim + " (names are matched exactly), an array of namespace globs such as [" + ns + "] or [\"*\"]"
	}
}

// quoteList quotes each of list, separated by commas.
func quoteList(list []string) string {
	q := make([]string, len(list))
	for i, s := range list {
		q[i] = strconv.Quote(s)
	}
	return strings.Join(q, ", ")
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
