package middleware

import (
	"context"
	"crypto"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync/atomic"
	"time"

	"github.com/MicahParks/jwkset"
	"github.com/MicahParks/keyfunc/v3"
	"github.com/golang-jwt/jwt/v5"
	"golang.org/x/time/rate"
)

// JWKSConfig says which JSON Web Key Sets to fetch, and how often.
type JWKSConfig struct {
	// URLs are http:// or https:// URLs of JWK Sets: an OIDC provider's
	// jwks_uri, a Kubernetes API server's /openid/v1/jwks, a CI system's.
	URLs []string
	// Refresh is how often every set is fetched again; a key removed from
	// a set stops verifying after the next fetch. Default 5m.
	Refresh time.Duration
	// MinRefetch bounds the extra fetches made for tokens whose kid no set
	// holds (a key the provider just added), and the retries of a set that
	// could not be fetched yet: at most one per MinRefetch. Default 10s.
	MinRefetch time.Duration
	// Timeout bounds one fetch. Default 10s.
	Timeout time.Duration
	// OnError hears of each fetch that failed; the keys fetched before stay
	// in use. Default: nothing.
	OnError func(url string, err error)
}

// maxJWKSBytes bounds a JWK Set response; real ones are a few KiB.
const maxJWKSBytes = 1 << 20

// JWKS holds the keys of remote JWK Sets, kept fresh in the background by
// github.com/MicahParks/jwkset until the context given to NewJWKS ends.
// It only finds keys: the Authenticator decides which algorithm a key may
// verify.
type JWKS struct {
	lookup    keyfunc.Keyfunc // finds a token's key; never fetches
	refresher jwkset.Storage  // fetches every set again on a miss
	limiter   *rate.Limiter   // at most one extra fetch per MinRefetch
	stores    []*trackedStore
	timeout   time.Duration
	// gen changes whenever a set is replaced, so that tokens verified
	// before with a key since removed are verified again.
	gen atomic.Uint64
}

// NewJWKS fetches every set once, each within cfg.Timeout, and returns.
// A set that cannot be fetched is not an error: Ready says so, and it is
// tried again every MinRefetch until it loads (the provider may come up
// after us). A URL that is not http(s) is an error.
func NewJWKS(ctx context.Context, cfg JWKSConfig) (*JWKS, error) {
	if len(cfg.URLs) == 0 {
		return nil, errors.New("no JWKS URL")
	}
	if cfg.Refresh <= 0 {
		cfg.Refresh = 5 * time.Minute
	}
	if cfg.MinRefetch <= 0 {
		cfg.MinRefetch = 10 * time.Second
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = 10 * time.Second
	}
	client := &http.Client{
		Timeout: cfg.Timeout,
		// A fetch every few minutes needs no idle connection (nor the
		// goroutines that keep one).
		Transport: limitBody{&http.Transport{Proxy: http.ProxyFromEnvironment, DisableKeepAlives: true}},
	}
	j := &JWKS{
		limiter: rate.NewLimiter(rate.Every(cfg.MinRefetch), 1),
		timeout: cfg.Timeout,
	}
	byURL := make(map[string]jwkset.Storage, len(cfg.URLs))
	for _, raw := range cfg.URLs {
		u, err := url.Parse(raw)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return nil, fmt.Errorf("JWKS URL %q: want an http:// or https:// URL", raw)
		}
		if _, dup := byURL[raw]; dup {
			return nil, fmt.Errorf("JWKS URL %s given twice", u.Redacted())
		}
		ts := &trackedStore{Storage: jwkset.NewMemoryStorage(), url: u.Redacted(), changed: func() { j.gen.Add(1) }}
		onError := func(context.Context, error) {}
		if cfg.OnError != nil {
			onError = func(_ context.Context, err error) { cfg.OnError(ts.url, err) }
		}
		s, err := jwkset.NewStorageFromHTTP(raw, jwkset.HTTPClientStorageOptions{
			Client:                    client,
			Ctx:                       ctx,
			HTTPTimeout:               cfg.Timeout,
			NoErrorReturnFirstHTTPReq: true,
			RefreshErrorHandler:       onError,
			RefreshInterval:           cfg.Refresh,
			Storage:                   ts,
		})
		if err != nil {
			return nil, fmt.Errorf("JWKS URL %s: %w", u.Redacted(), err)
		}
		byURL[raw] = s
		j.stores = append(j.stores, ts)
	}
	// Two clients over the same sets: lookups never fetch, so a token with
	// an unknown kid does not wait; when the limiter allows, the refresher
	// fetches every set again (its own limiter lets every call through).
	plain, err := jwkset.NewHTTPClient(jwkset.HTTPClientOptions{HTTPURLs: byURL})
	if err != nil {
		return nil, err
	}
	if j.refresher, err = jwkset.NewHTTPClient(jwkset.HTTPClientOptions{
		HTTPURLs:          byURL,
		RefreshUnknownKID: rate.NewLimiter(rate.Inf, 1),
	}); err != nil {
		return nil, err
	}
	if j.lookup, err = keyfunc.New(keyfunc.Options{
		Ctx:     ctx,
		Storage: plain,
		// Keys for signatures, or for anything; never encryption keys.
		UseWhitelist: []jwkset.USE{jwkset.UseSig, ""},
	}); err != nil {
		return nil, err
	}
	if j.Ready() != nil {
		go j.retry(ctx, cfg.MinRefetch)
	}
	return j, nil
}

// Ready reports whether every set has been fetched at least once; its
// error is a *JWKSNotReadyError.
func (j *JWKS) Ready() error {
	var missing []string
	for _, s := range j.stores {
		if !s.loaded.Load() {
			missing = append(missing, s.url)
		}
	}
	if len(missing) > 0 {
		return &JWKSNotReadyError{URLs: missing}
	}
	return nil
}

// JWKSNotReadyError names the JWK Sets never fetched so far.
type JWKSNotReadyError struct {
	URLs []string // redacted
}

func (e *JWKSNotReadyError) Error() string {
	return "JWKS not fetched yet: " + strings.Join(e.URLs, ", ")
}

// Detail is safe to show a caller: it names no URL.
func (e *JWKSNotReadyError) Detail() string {
	return "the gateway has not fetched every JWK Set yet; tokens signed with their keys cannot be verified"
}

// retry fetches again, every interval, until every set has loaded once.
func (j *JWKS) retry(ctx context.Context, interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for j.Ready() != nil {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if j.limiter.Allow() {
				j.refetch(ctx)
			}
		}
	}
}

// noSuchKID is a kid no set holds: reading it through the refresher is
// jwkset's way of fetching every set again.
const noSuchKID = "\x00lockgate: fetch every set again"

func (j *JWKS) refetch(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, j.timeout)
	defer cancel()
	_, _ = j.refresher.KeyRead(ctx, noSuchKID) // errors went to OnError
}

// keys returns the keys of the sets that may verify t: the key its kid
// names (fetching the sets again, at most once per MinRefetch, when no set
// holds it), or every key when it has no kid. The caller checks that each
// key fits the token's algorithm.
func (j *JWKS) keys(ctx context.Context, t *jwt.Token) []crypto.PublicKey {
	k, err := j.lookup.KeyfuncCtx(ctx)(t)
	if errors.Is(err, jwkset.ErrKeyNotFound) && j.limiter.Allow() {
		// Not bound to the caller: the keys fetched serve everyone.
		j.refetch(context.WithoutCancel(ctx))
		k, err = j.lookup.KeyfuncCtx(ctx)(t)
	}
	if err != nil {
		return nil
	}
	if set, ok := k.(jwt.VerificationKeySet); ok {
		keys := make([]crypto.PublicKey, 0, len(set.Keys))
		for _, k := range set.Keys {
			keys = append(keys, k)
		}
		return keys
	}
	return []crypto.PublicKey{k}
}

// trackedStore is one set's storage; it knows whether a fetch has filled
// it yet, and tells when one replaced it.
type trackedStore struct {
	jwkset.Storage
	url     string // redacted, for messages
	loaded  atomic.Bool
	changed func()
}

// KeyReplaceAll is what jwkset calls after each successful fetch.
func (s *trackedStore) KeyReplaceAll(ctx context.Context, given []jwkset.JWK) error {
	if err := s.Storage.KeyReplaceAll(ctx, given); err != nil {
		return err
	}
	s.loaded.Store(true)
	s.changed()
	return nil
}

// limitBody cuts JWK Set responses at maxJWKSBytes; the JSON decoder then
// fails, and the keys fetched before stay in use.
type limitBody struct{ rt http.RoundTripper }

func (l limitBody) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := l.rt.RoundTrip(r)
	if err == nil {
		resp.Body = struct {
			io.Reader
			io.Closer
		}{io.LimitReader(resp.Body, maxJWKSBytes), resp.Body}
	}
	return resp, err
}
