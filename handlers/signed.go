package handlers

import (
	"context"
	"net/http"
	"time"

	"github.com/lockgate/lockgate/grantsig"
	"github.com/lockgate/lockgate/locks"
	"github.com/lockgate/lockgate/middleware"
)

// Signed grants (see package grantsig): every answer that tells of a
// lease, a grant's or a renewal's, carries the lease as a JWS the
// protected resource checks offline, when the gateway signs.

// signedGrant returns the JWS of a lease of lock (or semaphore) held in
// mode by the caller, or nil when the gateway does not sign.
func (s *Server) signedGrant(ctx context.Context, lock, semaphore string, fence int64, mode string, expiresAt time.Time) *string {
	if s.cfg.Signer == nil {
		return nil
	}
	claims, _ := middleware.ClaimsFromContext(ctx)
	jws := s.cfg.Signer.Sign(grantsig.Grant{Lock: lock, Semaphore: semaphore, Subject: claims.Identity.String(),
		FencingToken: fence, Mode: mode, IssuedAt: time.Now(), LeaseEnd: expiresAt})
	return &jws
}

// signedMode is how a signed grant names mode.
func signedMode(mode locks.Mode) string {
	if mode == locks.Shared {
		return grantsig.ModeShared
	}
	return grantsig.ModeExclusive
}

// checkSigned refuses an acquire that insists on a signed grant (signed:
// true) from a gateway that does not sign.
func (s *Server) checkSigned(signed *bool) error {
	if signed != nil && *signed && s.cfg.Signer == nil {
		return invalid("signed is true, but this gateway does not sign grants (it runs with --grant-keys off)")
	}
	return nil
}

// GrantKeys implements StrictServerInterface.
func (s *Server) GrantKeys(context.Context, GrantKeysRequestObject) (GrantKeysResponseObject, error) {
	if s.cfg.Signer == nil {
		return nil, signingOff{}
	}
	return grantKeys(s.cfg.Signer.JWKS()), nil
}

// grantKeys is the JWK Set document, encoded once.
type grantKeys []byte

// VisitGrantKeysResponse implements GrantKeysResponseObject. Resources
// cache the set; a key added to the file is published at the next start,
// and a resource that meets an unknown kid fetches the set again.
func (k grantKeys) VisitGrantKeysResponse(w http.ResponseWriter) error {
	w.Header().Set("Content-Type", "application/jwk-set+json")
	w.Header().Set("Cache-Control", "public, max-age=300")
	w.WriteHeader(http.StatusOK)
	_, err := w.Write(k)
	return err
}

// signingOff is the 404 of the key set when the gateway does not sign.
type signingOff struct{}

func (signingOff) Error() string { return "grant signing is off" }
func (signingOff) Detail() string {
	return "this gateway does not sign grants (it runs with --grant-keys off)"
}
func (signingOff) Is(target error) bool { return target == errNotFound }
