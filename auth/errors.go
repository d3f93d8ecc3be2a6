package auth

import (
	"errors"

	"github.com/golang-jwt/jwt/v5"
)

var (
	// ErrUnauthenticated means the request carries no valid bearer token.
	// Errors that match it are *Error values.
	ErrUnauthenticated = errors.New("unauthenticated")
	// ErrForbidden means the token does not grant the lock's namespace.
	ErrForbidden = errors.New("forbidden")
)

// Error says why a bearer token was refused, in words that are safe to
// show the caller: never the token, never a library's error text.
type Error struct {
	// Reason is shown to the caller as the problem detail.
	Reason string
	// Presented is true when a token was sent (RFC 6750 then asks for
	// error="invalid_token" in WWW-Authenticate).
	Presented bool
}

func (e *Error) Error() string { return "unauthenticated: " + e.Reason }

// Detail is the reason, for the problem response.
func (e *Error) Detail() string { return e.Reason }

// Is makes errors.Is(err, ErrUnauthenticated) true.
func (e *Error) Is(target error) bool { return target == ErrUnauthenticated }

// errCritHeader: RFC 7515 4.1.11 asks to refuse a token whose header
// lists critical extensions the recipient does not understand, and the
// gateway understands none.
var errCritHeader = errors.New("the token's header has a crit parameter")

// reason turns a golang-jwt error into our own words.
func reason(err error) string {
	var typeErr *claimTypeError
	switch {
	case errors.As(err, &typeErr):
		return typeErr.Error()
	case errors.Is(err, jwt.ErrTokenExpired):
		return "the token has expired: get a new token from whoever issued this one " +
			"(lockctl token mints one with the gateway's LOCKGATE_JWT_SECRET; a --dev gateway prints one as it starts)"
	case errors.Is(err, jwt.ErrTokenRequiredClaimMissing):
		return "the token lacks a required claim (exp)"
	case errors.Is(err, jwt.ErrTokenNotValidYet), errors.Is(err, jwt.ErrTokenUsedBeforeIssued):
		return "the token is not valid yet"
	case errors.Is(err, jwt.ErrTokenInvalidIssuer):
		return "the token's issuer is not accepted"
	case errors.Is(err, jwt.ErrTokenInvalidAudience):
		return "the token's audience is not accepted"
	case errors.Is(err, errCritHeader):
		return "the token's header lists critical extensions (crit), which the gateway does not understand"
	case errors.Is(err, jwt.ErrTokenSignatureInvalid), errors.Is(err, jwt.ErrTokenUnverifiable):
		return "the token's signature or algorithm is not accepted: it was signed with another key. " +
			"A token a --dev gateway printed works only with that run: restart it and export the LOCKGATE_TOKEN it prints; " +
			"one from lockctl token needs the gateway's LOCKGATE_JWT_SECRET"
	case errors.Is(err, errDuplicateClaim):
		return "the token's payload names a claim twice"
	default:
		return "the token is malformed"
	}
}
