package auth

import (
	"sync"
	"time"
)

// verified remembers tokens that passed verification, until they expire:
// callers send the same token with every request, and verifying it again
// (base64, JSON, a signature) is a tenth of the gateway's CPU per call. The
// outcome for a token depends only on the token, the configured keys and
// the clock, so a token that verified stays valid until its exp, or until
// a JWK Set changes (a key may have been removed).
type verified struct {
	mu     sync.Mutex
	claims map[string]cachedClaims // by the whole token
}

type cachedClaims struct {
	Claims
	expires time.Time
	gen     uint64 // the JWKS generation it was verified under
}

// maxCachedTokens bounds the cache; when full it starts over, which costs
// one verification per token in use.
const maxCachedTokens = 4096

func (v *verified) get(token string, now time.Time, gen uint64) (Claims, bool) {
	v.mu.Lock()
	defer v.mu.Unlock()
	c, ok := v.claims[token]
	if !ok || !now.Before(c.expires) || c.gen != gen {
		return Claims{}, false
	}
	return c.Claims, true
}

func (v *verified) put(token string, c Claims, expires time.Time, gen uint64) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.claims == nil || len(v.claims) >= maxCachedTokens {
		v.claims = make(map[string]cachedClaims)
	}
	v.claims[token] = cachedClaims{Claims: c, expires: expires, gen: gen}
}
