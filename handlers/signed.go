package handlers

import (
	"context"
	"net/http"
	"time"

	"github.com/lockgate/lockgate/grantsig"
	"github.com/lockgate/lockgate/locks"
	"github.com/lockgate/lockgate/middleware"
)

// Signed grants (see package grantsig): an answer that tells of a lease,
// a grant's or a renewal's, carries the lease as a JWS the protected
// resource checks offline, when its call asks (signs). A signature costs
// about 30 µs of CPU, a seventh of the gateway's CPU per uncontended
// acquire and release on Redis, so a call that does not ask pays nothing
// for it: no claims read, no JWS made.

// signs says whether the answer to a call whose request said signed (nil
// when it said nothing) carries a signed grant: true and false are the
// caller's choice; nothing is the operator's (Config.SignAll). A call that
// asks for one from a gateway that does not sign is refused rather than
// answered without it.
func (s *Server) signs(signed *bool) (bool, error) {
	if signed == nil {
		return s.cfg.SignAll && s.cfg.Signer != nil, nil
	}
	if *signed && s.cfg.Signer == nil {
		return false, invalid("signed is true, but this gateway does not sign grants (it runs with --grant-keys off)")
	}
	return *signed, nil
}

// signedGrant returns the JWS of a lease of lock (or semaphore) held in
// mode by the caller when sign (see signs) is true, else nil.
func (s *Server) signedGrant(ctx context.Context, sign bool, lock, semaphore string, fence int64, mode string, expiresAt time.Time) *string {
	if !sign {
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
