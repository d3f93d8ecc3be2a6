package auth

import (
	"context"
	"crypto"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/MicahParks/jwkset"
	"golang.org/x/time/rate"
)

// JWKSConfig says which JSON Web Key Sets to fetch, whose they are, and
// how often.
type JWKSConfig struct {
	// Sets are the JWK Sets and the issuer each belongs to. A token
	// verifies only with the keys of its own iss's sets: a provider's keys
	// never sign for another provider's callers. An issuer may have several
	// sets; a URL belongs to one issuer.
	Sets []JWKSet
	// Refresh is how often every set is fetched again; a key removed from
	// a set stops verifying after the next fetch. Default 5m.
	Refresh time.Duration
	// MinRefetch bounds the extra fetches of a set made for tokens whose
	// key it does not hold (a key the provider just added), and the
	// retries of a set that could not be fetched: at most one per
	// MinRefetch. Default 10s.
	MinRefetch time.Duration
	// Timeout bounds one fetch. Default 10s.
	Timeout time.Duration
	// KeyWait bounds how long a request whose key its issuer's sets do not
	// hold waits for the fetch that may bring it (one under way, or one it
	// starts); the fetch goes on without it, within Timeout. Default 2s.
	KeyWait time.Duration
	// MaxStale: a set whose last successful fetch is older than this makes
	// Ready fail (its keys stay in use: a key removed from it meanwhile
	// still verifies). 0: 1h; negative: never.
	MaxStale time.Duration
	// OnError hears of each fetch that failed; the keys fetched before stay
	// in use. Default: nothing.
	OnError func(set JWKSet, err error)

	transport http.RoundTripper // tests replace it; nil: the default
}

// JWKSet is one JWK Set and the issuer whose tokens its keys verify.
type JWKSet struct {
	// Issuer is the iss of the tokens its keys sign: an OIDC provider's
	// issuer URL, a Kubernetes API server's service-account issuer.
	Issuer string
	// URL is an http:// or https:// URL of the set: the provider's
	// jwks_uri, a Kubernetes API server's /openid/v1/jwks.
	URL string
}

// maxJWKSBytes bounds a JWK Set response; real ones are a few KiB.
const maxJWKSBytes = 1 << 20

// maxRedirects bounds the redirects of one fetch, all on the set's own
// scheme and host.
const maxRedirects = 5

// JWKS holds the keys of remote JWK Sets, each kept fresh in the
// background until the context given to NewJWKS ends. It only finds keys:
// the Authenticator decides which algorithm a key may verify.
type JWKS struct {
	sets     []*keySet            // in the order configured
	byIssuer map[string][]*keySet // the same, by issuer
	keyWait  time.Duration
	maxStale time.Duration // 0: never stale
	// gen changes whenever a set is fetched, so that tokens verified
	// before with a key since removed are verified again.
	gen atomic.Uint64
}

// keySet is one JWK Set: the keys of its last successful fetch, and the
// fetch under way, which every request that needs it waits for.
type keySet struct {
	JWKSet
	shown   string // the URL, redacted, for messages and metrics
	ctx     context.Context
	client  *http.Client
	timeout time.Duration
	limiter *rate.Limiter // fetches for unknown keys
	onError func(error)
	changed func()

	keys     atomic.Pointer[[]setKey] // nil until the first fetch
	fetched  atomic.Int64             // Unix nanoseconds of the last successful fetch
	ok       atomic.Bool              // whether the last fetch succeeded
	skipped  atomic.Int64             // keys of the last fetch that cannot verify
	failures atomic.Int64             // fetches failed so far

	mu       sync.Mutex
	inflight chan struct{} // closed when the fetch under way ends; nil when none
}

// setKey is a key of a set that can verify tokens of alg.
type setKey struct {
	kid string
	alg string
	key crypto.PublicKey
}

// NewJWKS fetches every set once, each within cfg.Timeout, and returns.
// A set that cannot be fetched is not an error: Ready says so, and it is
// tried again every MinRefetch until it loads (the provider may come up
// after us). A URL that is not http(s), a set without issuer or with an
// issuer holding '#' (see Identity.String), and a URL given twice are
// errors.
func NewJWKS(ctx context.Context, cfg JWKSConfig) (*JWKS, error) {
	if len(cfg.Sets) == 0 {
		return nil, errors.New("no JWK Set")
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
	if cfg.KeyWait <= 0 {
		cfg.KeyWait = 2 * time.Second
	}
	switch {
	case cfg.MaxStale == 0:
		cfg.MaxStale = time.Hour
	case cfg.MaxStale < 0:
		cfg.MaxStale = 0
	}
	transport := cfg.transport
	if transport == nil {
		// A fetch every few minutes needs no idle connection (nor the
		// goroutines that keep one).
		transport = &http.Transport{Proxy: http.ProxyFromEnvironment, DisableKeepAlives: true}
	}
	client := &http.Client{Timeout: cfg.Timeout, Transport: transport, CheckRedirect: sameOrigin}
	j := &JWKS{byIssuer: make(map[string][]*keySet), keyWait: cfg.KeyWait, maxStale: cfg.MaxStale}
	seen := make(map[string]bool)
	for _, set := range cfg.Sets {
		if err := CheckIssuer(set.Issuer); err != nil {
			return nil, fmt.Errorf("JWK Set of issuer %q: %w", set.Issuer, err)
		}
		u, err := url.Parse(set.URL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return nil, fmt.Errorf("JWK Set of issuer %q: want an http:// or https:// URL", set.Issuer)
		}
		if seen[u.String()] {
			return nil, fmt.Errorf("JWK Set URL %s given twice: a URL belongs to one issuer", u.Redacted())
		}
		seen[u.String()] = true
		s := &keySet{
			JWKSet: set, shown: u.Redacted(), ctx: ctx, client: client, timeout: cfg.Timeout,
			limiter: rate.NewLimiter(rate.Every(cfg.MinRefetch), 1),
			onError: func(error) {},
			changed: func() { j.gen.Add(1) },
		}
		if cfg.OnError != nil {
			shown := JWKSet{Issuer: set.Issuer, URL: s.shown}
			s.onError = func(err error) { cfg.OnError(shown, err) }
		}
		j.sets = append(j.sets, s)
		j.byIssuer[set.Issuer] = append(j.byIssuer[set.Issuer], s)
	}
	var first []<-chan struct{}
	for _, s := range j.sets {
		first = append(first, s.fetch())
	}
	for i, s := range j.sets {
		<-first[i]
		go s.keepFresh(cfg.Refresh, min(cfg.Refresh, cfg.MinRefetch))
	}
	return j, nil
}

// CheckIssuer says whether iss can be an issuer the gateway trusts: not
// empty, and without '#', which separates it from the subject in an
// identity's text (an OIDC issuer URL has no fragment).
func CheckIssuer(iss string) error {
	switch {
	case iss == "":
		return errors.New("an issuer must not be empty")
	case strings.Contains(iss, "#"):
		return errors.New("an issuer must not contain '#' (an OIDC issuer URL has no fragment)")
	}
	return nil
}

// sameOrigin is the sets' CheckRedirect: a redirect stays on the set's own
// scheme and host, so that an https URL cannot hand its keys over to a
// plain http one, nor to a host the operator never named.
func sameOrigin(req *http.Request, via []*http.Request) error {
	if len(via) >= maxRedirects {
		return fmt.Errorf("stopped after %d redirects", maxRedirects)
	}
	if from, to := origin(via[0].URL), origin(req.URL); from != to {
		return fmt.Errorf("refused a redirect from %s to %s: a JWK Set is fetched from its own scheme and host only", from, to)
	}
	return nil
}

// origin is u's scheme, host and port, the port spelled out.
func origin(u *url.URL) string {
	port := u.Port()
	if port == "" {
		port = map[string]string{"http": "80", "https": "443"}[u.Scheme]
	}
	return u.Scheme + "://" + net.JoinHostPort(strings.ToLower(u.Hostname()), port)
}

// has reports whether iss has a set; j may be nil.
func (j *JWKS) has(iss string) bool {
	return j != nil && len(j.byIssuer[iss]) > 0
}

// keys returns the keys of iss's sets that verify alg, under kid (any kid
// when it is ""), in the order of the sets and of the keys in each: the
// caller tries every one. When there is none, it waits up to KeyWait for
// a fetch of the sets that may bring one: one under way, or one it starts
// if the set's MinRefetch allows.
func (j *JWKS) keys(ctx context.Context, iss, kid, alg string) []crypto.PublicKey {
	sets := j.byIssuer[iss]
	if found := findKeys(sets, kid, alg); len(found) > 0 {
		return found
	}
	var fetches []<-chan struct{}
	for _, s := range sets {
		if f := s.refetch(); f != nil {
			fetches = append(fetches, f)
		}
	}
	if len(fetches) == 0 {
		return nil
	}
	wait := time.NewTimer(j.keyWait)
	defer wait.Stop()
	for _, f := range fetches {
		select {
		case <-f:
		case <-wait.C:
			return findKeys(sets, kid, alg)
		case <-ctx.Done():
			return nil
		}
	}
	return findKeys(sets, kid, alg)
}

func findKeys(sets []*keySet, kid, alg string) []crypto.PublicKey {
	var found []crypto.PublicKey
	for _, s := range sets {
		keys := s.keys.Load()
		if keys == nil {
			continue
		}
		for _, k := range *keys {
			if k.alg == alg && (kid == "" || k.kid == kid) {
				found = append(found, k.key)
			}
		}
	}
	return found
}

// fetch starts a fetch of the set unless one is under way, and returns
// what closes when that fetch ends.
func (s *keySet) fetch() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.inflight == nil {
		done := make(chan struct{})
		s.inflight = done
		go func() {
			s.load()
			s.mu.Lock()
			s.inflight = nil
			s.mu.Unlock()
			close(done)
		}()
	}
	return s.inflight
}

// refetch is fetch for a token whose key the set lacks: it joins the
// fetch under way, or starts one at most once per MinRefetch; nil when
// it may not.
func (s *keySet) refetch() <-chan struct{} {
	s.mu.Lock()
	f := s.inflight
	s.mu.Unlock()
	if f != nil {
		return f
	}
	if !s.limiter.Allow() {
		return nil
	}
	return s.fetch()
}

// keepFresh fetches the set every refresh, or every retry (no longer)
// after a fetch that failed, until the set's context ends.
func (s *keySet) keepFresh(refresh, retry time.Duration) {
	next := func() time.Duration {
		if s.ok.Load() {
			return refresh
		}
		return retry
	}
	t := time.NewTimer(next())
	defer t.Stop()
	for {
		select {
		case <-s.ctx.Done():
			return
		case <-t.C:
		}
		<-s.fetch()
		t.Reset(next())
	}
}

// load fetches the set and, if that worked, puts its keys in use.
func (s *keySet) load() {
	ctx, cancel := context.WithTimeout(s.ctx, s.timeout)
	defer cancel()
	keys, skipped, err := s.get(ctx)
	if err != nil {
		s.ok.Store(false)
		s.failures.Add(1)
		if s.ctx.Err() == nil {
			s.onError(err)
		}
		return
	}
	s.keys.Store(&keys)
	s.skipped.Store(int64(skipped))
	s.fetched.Store(time.Now().UnixNano())
	s.ok.Store(true)
	s.changed()
}

// get fetches the set: the keys that can verify tokens, and how many of
// its keys cannot (malformed, of a type, size or use the gateway does not
// verify with). One such key does not keep the others out.
func (s *keySet) get(ctx context.Context) ([]setKey, int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.URL, nil)
	if err != nil {
		return nil, 0, err
	}
	req.Header.Set("Accept", "application/jwk-set+json, application/json")
	resp, err := s.client.Do(req) // its errors name the URL without a password
	if err != nil {
		return nil, 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, 0, fmt.Errorf("status %d", resp.StatusCode)
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxJWKSBytes+1))
	switch {
	case err != nil:
		return nil, 0, err
	case len(body) > maxJWKSBytes:
		return nil, 0, fmt.Errorf("the set is larger than %d bytes", maxJWKSBytes)
	}
	var doc struct {
		Keys *[]json.RawMessage `json:"keys"`
	}
	if err := json.Unmarshal(body, &doc); err != nil || doc.Keys == nil {
		return nil, 0, errors.New(`not a JWK Set: want a JSON object with a "keys" array`)
	}
	keys := make([]setKey, 0, len(*doc.Keys))
	for _, raw := range *doc.Keys {
		if k, ok := parseKey(raw); ok {
			keys = append(keys, k)
		}
	}
	return keys, len(*doc.Keys) - len(keys), nil
}

// parseKey reads a JWK that can verify tokens: RS256, ES256 or EdDSA (see
// algFor), for signatures ("use" "sig" or none), its "alg", if any, that
// algorithm. Symmetric keys never are: a JWK Set is public.
func parseKey(raw json.RawMessage) (setKey, bool) {
	jwk, err := jwkset.NewJWKFromRawJSON(raw, jwkset.JWKMarshalOptions{}, jwkset.JWKValidateOptions{})
	if err != nil {
		return setKey{}, false
	}
	m := jwk.Marshal()
	if m.USE != "" && m.USE != jwkset.UseSig {
		return setKey{}, false
	}
	alg, err := algFor(jwk.Key())
	if err != nil || (m.ALG != "" && string(m.ALG) != alg) {
		return setKey{}, false
	}
	return setKey{kid: m.KID, alg: alg, key: jwk.Key()}, true
}

// Ready reports whether every set has been fetched at least once, and
// none has failed to refresh for longer than MaxStale; its error is a
// *JWKSNotReadyError.
func (j *JWKS) Ready() error {
	var e JWKSNotReadyError
	now := time.Now()
	for _, s := range j.sets {
		switch {
		case s.keys.Load() == nil:
			e.NotFetched = append(e.NotFetched, s.shown)
		case j.maxStale > 0 && now.Sub(time.Unix(0, s.fetched.Load())) > j.maxStale:
			e.Stale = append(e.Stale, s.shown)
		}
	}
	if len(e.NotFetched)+len(e.Stale) > 0 {
		e.MaxStale = j.maxStale
		return &e
	}
	return nil
}

// JWKSNotReadyError names the JWK Sets never fetched so far, and those not
// refreshed for longer than MaxStale.
type JWKSNotReadyError struct {
	NotFetched, Stale []string // URLs, redacted
	MaxStale          time.Duration
}

func (e *JWKSNotReadyError) Error() string {
	var parts []string
	if len(e.NotFetched) > 0 {
		parts = append(parts, "JWK Sets not fetched yet: "+strings.Join(e.NotFetched, ", "))
	}
	if len(e.Stale) > 0 {
		parts = append(parts, fmt.Sprintf("JWK Sets not refreshed for over %s (keys removed from them still verify): %s", e.MaxStale, strings.Join(e.Stale, ", ")))
	}
	return strings.Join(parts, "; ")
}

// Detail is safe to show a caller: it names no URL.
func (e *JWKSNotReadyError) Detail() string {
	if len(e.NotFetched) > 0 {
		return "the gateway has not fetched every JWK Set yet; tokens signed with their keys cannot be verified"
	}
	return "the gateway could not refresh a JWK Set for too long; a key its provider removed may still verify"
}

// JWKSStatus is what a set's fetches have brought, for metrics.
type JWKSStatus struct {
	JWKSet // its URL redacted
	// Fetched is the time of the last successful fetch; zero: none yet.
	Fetched time.Time
	// Keys are those in use; Skipped those of the last fetch that cannot
	// verify tokens (malformed, or of a type, size or use the gateway does
	// not verify with).
	Keys, Skipped int
	// Failures counts the fetches that failed so far.
	Failures int64
	// Stale is set when the last successful fetch is older than MaxStale.
	Stale bool
}

// Status describes every set, in the order configured.
func (j *JWKS) Status() []JWKSStatus {
	out := make([]JWKSStatus, 0, len(j.sets))
	now := time.Now()
	for _, s := range j.sets {
		st := JWKSStatus{JWKSet: JWKSet{Issuer: s.Issuer, URL: s.shown}, Skipped: int(s.skipped.Load()), Failures: s.failures.Load()}
		if keys := s.keys.Load(); keys != nil {
			st.Keys = len(*keys)
			st.Fetched = time.Unix(0, s.fetched.Load())
			st.Stale = j.maxStale > 0 && now.Sub(st.Fetched) > j.maxStale
		}
		out = append(out, st)
	}
	return out
}

// PlainHTTP lists the sets fetched over plain http from another machine
// (redacted): whoever is on the path can swap their keys, and sign tokens
// for their issuer.
func (j *JWKS) PlainHTTP() []JWKSet {
	var plain []JWKSet
	for _, s := range j.sets {
		u, _ := url.Parse(s.URL) // parsed in NewJWKS
		if u.Scheme == "http" && !isLoopback(u.Hostname()) {
			plain = append(plain, JWKSet{Issuer: s.Issuer, URL: s.shown})
		}
	}
	return plain
}

func isLoopback(host string) bool {
	ip := net.ParseIP(host)
	return host == "localhost" || (ip != nil && ip.IsLoopback())
}
