package middleware

import (
	"context"

	"github.com/lockgate/lockgate/auth"
)

// Claims and Identity are package auth's, named here for the request
// scope, which carries a verified token's claims (SetClaims) and logs
// its identity.
type (
	Claims   = auth.Claims
	Identity = auth.Identity
)

type claimsKey struct{}

// WithClaims returns a copy of ctx that carries c.
func WithClaims(ctx context.Context, c Claims) context.Context {
	return context.WithValue(ctx, claimsKey{}, c)
}

// ClaimsFromContext returns the claims of the request's verified token.
func ClaimsFromContext(ctx context.Context) (Claims, bool) {
	switch c := ctx.Value(claimsKey{}).(type) {
	case Claims:
		return c, true
	case *Claims: // a Requests scope's, not copied into an interface
		return *c, true
	}
	return Claims{}, false
}
