package app

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"net"
	"strings"
	"time"

	"github.com/rs/zerolog"

	"github.com/lockgate/lockgate/auth"
	"github.com/lockgate/lockgate/locks"
)

// config is the gateway's configuration, from flags and LOCKGATE_*
// environment variables; a flag given on the command line wins.
type config struct {
	addr             string
	redisURL         string
	redisCluster     bool
	redisSentinel    string // master name; --redis-url then names its sentinels
	redisPrefix      string
	redisTimeout     time.Duration
	minReplicas      int
	replicaTimeout   time.Duration
	fenceRetention   time.Duration
	lockDelay        time.Duration
	maxSharedHolders int
	sessionMaxHolds  int
	subjectSessions  int
	history          int
	ticketLiveness   time.Duration
	priorityAging    time.Duration
	jwtSecret        string
	jwtPublicKeyFile string
	jwtIssuers       []string
	jwtAudience      string
	jwtJWKSFlags     []string // ISSUER=URL, as given
	jwtJWKSURLs      []string // the old --jwt-jwks-url
	jwtJWKS          []auth.JWKSet
	jwtJWKSRefresh   time.Duration
	jwtJWKSMaxStale  time.Duration
	jwtNSClaim       string
	policyFile       string
	defaultTTL       time.Duration
	maxTTL           time.Duration
	maxHold          time.Duration
	maxWait          time.Duration
	maxTicketWait    time.Duration
	shutdownTimeout  time.Duration
	maxWaiters       int
	maxWatchers      int
	maxWatchLife     time.Duration
	subjectWatchers  int
	subjectRate      float64
	subjectBurst     int
	subjectWaiters   int
	logLevel         zerolog.Level
	dev              bool
	tlsCert          string
	tlsKey           string
	maxConnections   int
	pprofAddr        string // from LOCKGATE_PPROF_ADDR only; see pprof.go
	grantKeys        string // a PEM file, "" for a key made at start, "off"
	grantIssuer      string
	signGrants       string   // "on-request" or "always"
	callbackAllow    []string // --callback-allow patterns (see callbacks.go)
	callbackSecret   string
	ui               bool
	mcp              bool
}

// minTicketLiveness is the shortest --ticket-liveness: a long poll keeps
// its ticket alive at most once a second, and a liveness of two seconds
// lets one keep-alive be late.
const minTicketLiveness = 2 * time.Second

// devAddr is where --dev listens unless --addr says otherwise: loopback
// only, since its token grants everything.
const devAddr = "127.0.0.1:8080"

// envName is the environment variable of a flag: LOCKGATE_ and the flag's
// name in upper case with '-' as '_'.
func envName(flagName string) string {
	return "LOCKGATE_" + strings.ToUpper(strings.ReplaceAll(flagName, "-", "_"))
}

func parseConfig(args []string, getenv func(string) string, stderr io.Writer) (config, error) {
	var c config
	var logLevel string
	fs := flag.NewFlagSet("gateway", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&c.addr, "addr", ":8080", "listen address (host:port); --dev defaults to "+devAddr)
	fs.StringVar(&c.redisURL, "redis-url", "", "redis://, rediss:// or redis+sentinel:// URL; empty: the embedded in-memory backend (one process only)")
	fs.BoolVar(&c.redisCluster, "redis-cluster", false, "--redis-url names seed nodes of a Redis Cluster: redis://host:port?addr=host2:port&addr=...")
	fs.StringVar(&c.redisSentinel, "redis-sentinel", "", "master name: --redis-url names Redis Sentinels that follow it, redis://[[user]:password@]host:port[/db]?addr=host2:port&addr=...; or give redis+sentinel://host:port,host2:port/master alone")
	fs.StringVar(&c.redisPrefix, "redis-prefix", "lockgate:", "prefix of every Redis key and channel")
	fs.DurationVar(&c.redisTimeout, "redis-timeout", 2*time.Second, "bound on each Redis call; past it a request fails with 503")
	fs.IntVar(&c.history, "history", 10, "how many events of each lock GET /locks/{ns}/{name}/history shows (0: keep none); each costs about 30 bytes of Redis memory per lock name (more with long subjects, owner labels and values), for --fence-retention after its last event")
	fs.IntVar(&c.minReplicas, "redis-min-replicas", 0, "replicas that must acknowledge (WAIT) each grant, re-entry and renew before the caller hears of it; fewer: the grant is released and the call fails with 503 (0: none asked)")
	fs.DurationVar(&c.replicaTimeout, "redis-replica-timeout", 100*time.Millisecond, "how long each WAIT for --redis-min-replicas waits; shorter than --redis-timeout")
	fs.DurationVar(&c.priorityAging, "priority-aging", locks.DefaultPriorityAging, "how long a waiter waits for each level its priority rises against those who came later (an acquire's \"priority\"), so that none waits forever: a waiter of priority p ranks as one of priority 0 that came p agings earlier")
	fs.DurationVar(&c.ticketLiveness, "ticket-liveness", locks.DefaultTicketLiveness, "how long a ticket (an acquire with Prefer: respond-async) stays queued without a poll, and how long a grant handed to it waits for a poll to pick it up (each poll starts it again); the default fits a function invoked every minute")
	fs.DurationVar(&c.lockDelay, "lock-delay", 0, "after a lease ends without a release (the holder vanished), keep the lock from new holders this long: for resources that cannot check fencing tokens (a release frees it at once)")
	fs.IntVar(&c.maxSharedHolders, "max-shared-holders", locks.DefaultMaxSharedHolders, "most shared holders one lock may have at once; past it a shared acquire waits for a place (wait_ms) or gets 409 lock_held, which says so")
	fs.IntVar(&c.sessionMaxHolds, "session-max-holds", locks.DefaultSessionMaxHolds, "most grants one session may hold at once (bounds the work of one keep-alive or end); past it an acquire in the session gets 409 session_full")
	fs.IntVar(&c.subjectSessions, "subject-max-sessions", locks.DefaultSessionsPerSubject, "most live sessions one subject (iss and sub) may hold at once, across gateways; past it opening one gets 429 too_many_sessions")
	fs.DurationVar(&c.fenceRetention, "fence-retention", 24*time.Hour, "how long a lock's fencing counter (and history) stays in Redis after its last grant: about 190 bytes of Redis memory per released lock name, its index entry included, 290 with the default --history; it guards tokens against the Redis clock stepping back")
	fs.StringVar(&c.jwtSecret, "jwt-secret", "", "HS256 secret, at least 32 bytes (prefer the environment variable: flags show in ps)")
	fs.StringVar(&c.jwtPublicKeyFile, "jwt-public-key-file", "", "PEM file of public keys for RS256, ES256 or EdDSA tokens")
	// Values are checked after parsing (see jwksSets): the flag package
	// would quote a refused value, and a URL may hold a password.
	fs.Func("jwt-jwks", "ISSUER=URL: a JWK Set whose RS256, ES256 or EdDSA keys verify the tokens of ISSUER, and only those (an OIDC provider's issuer and jwks_uri); repeatable, or several separated by spaces; needs --jwt-audience", func(v string) error {
		c.jwtJWKSFlags = append(c.jwtJWKSFlags, strings.Fields(v)...)
		return nil
	})
	fs.Func("jwt-jwks-url", "deprecated: a JWK Set of the one --jwt-issuer; use --jwt-jwks ISSUER=URL", func(v string) error {
		c.jwtJWKSURLs = append(c.jwtJWKSURLs, strings.Fields(v)...)
		return nil
	})
	fs.DurationVar(&c.jwtJWKSRefresh, "jwt-jwks-refresh", 5*time.Minute, "how often each JWK Set is fetched again; a key removed from a set stops verifying after the next fetch")
	fs.DurationVar(&c.jwtJWKSMaxStale, "jwt-jwks-max-stale", time.Hour, "a JWK Set not refreshed for longer (its fetches fail) makes /readyz answer 503, since keys removed from it still verify; 0: never")
	fs.StringVar(&c.jwtNSClaim, "jwt-ns-claim", "ns", "claim that holds a token's namespace globs, when it carries them")
	fs.StringVar(&c.policyFile, "policy", "", "JSON file of rules that grant namespaces, by their claims, to tokens without the --jwt-ns-claim claim")
	fs.Func("jwt-issuer", "iss of the tokens that --jwt-secret or --jwt-public-key-file verify (unset: any iss no --jwt-jwks set belongs to, or none); repeatable, or several separated by spaces", func(v string) error {
		c.jwtIssuers = append(c.jwtIssuers, strings.Fields(v)...)
		return nil
	})
	fs.StringVar(&c.jwtAudience, "jwt-audience", "", "required aud of tokens, when set; required with --jwt-jwks")
	fs.DurationVar(&c.defaultTTL, "default-ttl", 30*time.Second, "lease of an acquire without ttl_ms")
	fs.DurationVar(&c.maxTTL, "max-ttl", time.Hour, "largest ttl_ms accepted")
	fs.DurationVar(&c.maxHold, "max-hold", 0, "hard cap on every grant (a lock's, a lock set's, a permit's): no renewal carries it past acquired_at plus this (0: none; an acquire's max_hold_ms may ask for less)")
	fs.DurationVar(&c.maxWait, "max-wait", time.Minute, "largest wait_ms accepted of an acquire that waits in the call (it holds a connection)")
	fs.DurationVar(&c.maxTicketWait, "max-ticket-wait", time.Hour, "largest wait_ms accepted of an acquire answered with a ticket (Prefer: respond-async), which holds no connection while it waits")
	fs.IntVar(&c.maxWaiters, "max-waiters", 10000, "most acquirers waiting at once in this process; more get 429 too_many_requests")
	fs.IntVar(&c.maxWatchers, "max-watchers", 10000, "most watches of locks (long-polls and event streams, each a connection, a file descriptor and about 40 KiB of memory) open at once in this process; more get 503 too_many_watchers")
	fs.IntVar(&c.subjectWatchers, "subject-max-watchers", 0, "most watches of locks one subject holds open at once on this gateway; more get 429 too_many_requests (0: a tenth of --max-watchers)")
	fs.DurationVar(&c.maxWatchLife, "max-watch-lifetime", time.Hour, "longest a watch (event stream or long-poll) stays open, whatever its token's exp, which also ends it; a stream's last event says which")
	fs.Float64Var(&c.subjectRate, "subject-rate", 0, "requests per second each subject (a token's sub) may make on this gateway, as a token bucket; more get 429 too_many_requests (0: no limit); policy rules may set their own")
	fs.IntVar(&c.subjectBurst, "subject-burst", 0, "requests a subject may make at once, the size of its --subject-rate bucket (0: the rate, rounded up)")
	fs.IntVar(&c.subjectWaiters, "subject-max-waiters", 0, "most acquirers of one subject waiting at once on this gateway, locks and semaphores together, open tickets included; more get 429 too_many_requests (0: only --max-waiters)")
	fs.DurationVar(&c.shutdownTimeout, "shutdown-timeout", 10*time.Second, "how long SIGINT/SIGTERM waits for in-flight requests")
	fs.StringVar(&logLevel, "log-level", "info", "debug, info, warn or error")
	fs.StringVar(&c.tlsCert, "tls-cert", "", "PEM certificate chain: serve HTTPS (and HTTP/2) with it and --tls-key; both files are read again on SIGHUP")
	fs.StringVar(&c.tlsKey, "tls-key", "", "PEM private key of --tls-cert")
	fs.StringVar(&c.grantKeys, "grant-keys", "", "PEM file of Ed25519 keys that sign grants (signed_grant): the first, a private key, signs; every key in it is published at /.well-known/lockgate/jwks.json. Gateways that share the file publish the same keys. Empty: a key made at start; off: grants are not signed")
	fs.StringVar(&c.signGrants, "sign-grants", signOnRequest, "which grants are signed (signed_grant): on-request, those whose call says \"signed\": true; always, every one whose call does not say \"signed\": false (each signature costs the gateway CPU: about a seventh of an uncontended acquire and release on Redis)")
	fs.StringVar(&c.grantIssuer, "grant-issuer", "lockgate", "the iss of signed grants: what a resource checks to know they are this deployment's")
	fs.Func("callback-allow", "a destination tickets' callback_url may name: https://host[:port]/path, with * for any host (or *.example.com), any port, or any rest of the path; http only where a pattern says http://; a loopback, link-local or private address only where a pattern names it with its port (http://127.0.0.1:9000/*); the gateway's own listeners, its pprof listener and its Redis never, whatever the patterns; when several match, the most specific decides; repeatable, or several separated by spaces. None: callbacks are refused", func(v string) error {
		c.callbackAllow = append(c.callbackAllow, strings.Fields(v)...)
		return nil
	})
	fs.StringVar(&c.callbackSecret, "callback-secret", "", "whsec_ and base64 of 24 to 64 random bytes: the secret each ticket's callback secret (Standard Webhooks) is derived from; receivers never hold it, they verify with their ticket's callback_secret; required with --callback-allow (prefer the environment variable: flags show in ps)")
	fs.IntVar(&c.maxConnections, "max-connections", 0, "most connections open at once; more wait in the kernel's accept queue until one closes (0: no limit but the process's file descriptors); must exceed --max-waiters")
	fs.BoolVar(&c.ui, "ui", false, "serve the read-only dashboard at /ui/ (the viewer pastes a token; it sees what the token may read); on with --dev unless set to false")
	fs.BoolVar(&c.mcp, "mcp", true, "serve the lock calls as Model Context Protocol tools at POST /mcp, for AI agents, with the same tokens and namespaces; false: no /mcp")
	fs.BoolVar(&c.dev, "dev", false, "try lockgate locally: embedded backend, loopback, a random key and ready-made tokens (user and admin) on stderr; refuses keys, --redis-url and public addresses")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "Usage: gateway [flags]\n\nEvery flag can also be set with its environment variable, e.g. --max-ttl as %s.\n\n", envName("max-ttl"))
		fs.PrintDefaults()
	}
	if len(args) > 0 {
		args = args[1:]
	}
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	if fs.NArg() > 0 {
		return c, fmt.Errorf("unexpected argument %q; flags start with --", fs.Arg(0))
	}
	set := make(map[string]bool)
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	var envErr error
	fs.VisitAll(func(f *flag.Flag) {
		if set[f.Name] || envErr != nil {
			return
		}
		if v := getenv(envName(f.Name)); v != "" {
			if err := fs.Set(f.Name, v); err != nil {
				// Not the value: it may be a secret.
				envErr = fmt.Errorf("%s: invalid value for --%s", envName(f.Name), f.Name)
			}
			set[f.Name] = true
		}
	})
	if envErr != nil {
		return c, envErr
	}
	if c.dev {
		if !set["addr"] {
			c.addr = devAddr
		}
		if !set["ui"] {
			// Someone trying lockgate on their machine gets the page
			// too: it only reads, with a token they paste.
			c.ui = true
		}
		if err := c.checkDev(); err != nil {
			return c, err
		}
	}
	lvl, err := zerolog.ParseLevel(strings.ToLower(logLevel))
	if err != nil || lvl == zerolog.NoLevel {
		return c, fmt.Errorf("--log-level %q: want debug, info, warn or error", logLevel)
	}
	c.logLevel = lvl
	if c.pprofAddr = getenv(pprofEnv); c.pprofAddr != "" {
		if err := checkPprofAddr(c.pprofAddr); err != nil {
			return c, err
		}
	}
	if c.jwtJWKS, err = c.jwksSets(); err != nil {
		return c, err
	}
	return c, c.check()
}

// checkDev confines --dev to what it is for, one person trying lockgate on
// their machine: it refuses every setting of a deployment rather than
// ignoring it. Its token grants every namespace for a day; beside a
// configured key it would be signed with that key (LOCKGATE_DEV=true left
// in a container's environment printed such tokens into its log), beside
// --redis-url it would take production locks, and on a public address
// anyone could use the gateway it guards.
func (c config) checkDev() error {
	for _, s := range []struct {
		flag string
		set  bool
	}{
		{"jwt-secret", c.jwtSecret != ""},
		{"jwt-public-key-file", c.jwtPublicKeyFile != ""},
		{"jwt-jwks", len(c.jwtJWKSFlags) > 0},
		{"jwt-jwks-url", len(c.jwtJWKSURLs) > 0},
		{"policy", c.policyFile != ""},
		{"redis-url", c.redisURL != ""},
		{"redis-cluster", c.redisCluster},
	} {
		if s.set {
			return fmt.Errorf("--dev (%s) runs alone with a random key and the embedded backend, and --%s (%s) is set: "+
				"unset one; to run your own key or Redis on this machine, leave --dev out and set --addr 127.0.0.1:8080",
				envName("dev"), s.flag, envName(s.flag))
		}
	}
	host, _, err := net.SplitHostPort(c.addr)
	if err != nil {
		return fmt.Errorf("--dev: --addr %q: want host:port", c.addr)
	}
	if ip := net.ParseIP(host); host != "localhost" && (ip == nil || !ip.IsLoopback()) {
		return fmt.Errorf("--dev (%s) listens on loopback only, and --addr (%s) is %q: use 127.0.0.1, [::1] or localhost",
			envName("dev"), envName("addr"), c.addr)
	}
	return nil
}

func (c config) check() error {
	switch {
	case c.jwtSecret != "" && c.jwtPublicKeyFile != "":
		return errors.New("set --jwt-secret or --jwt-public-key-file, not both")
	case !c.dev && c.jwtSecret == "" && c.jwtPublicKeyFile == "" && len(c.jwtJWKS) == 0:
		return errors.New("no JWT key configured: set --jwt-secret, --jwt-public-key-file or --jwt-jwks (or " +
			envName("jwt-secret") + "), or run with --dev to try lockgate locally")
	case c.defaultTTL <= 0 || c.maxTTL <= 0 || c.maxWait <= 0 || c.maxTicketWait <= 0 || c.redisTimeout <= 0 || c.shutdownTimeout <= 0 || c.fenceRetention <= 0:
		return errors.New("durations must be positive")
	case c.jwtJWKSRefresh <= 0:
		return errors.New("--jwt-jwks-refresh must be positive")
	case c.jwtJWKSMaxStale < 0:
		return errors.New("--jwt-jwks-max-stale must be 0 (never) or positive")
	case len(c.jwtJWKS) > 0 && c.jwtAudience == "":
		return fmt.Errorf("--jwt-jwks needs --jwt-audience (%s), the audience your tokens are issued for: providers sign tokens "+
			"for many relying parties, and without it a token meant for another would be accepted here", envName("jwt-audience"))
	case c.jwtNSClaim == "":
		return errors.New("--jwt-ns-claim must name a claim")
	case c.redisSentinel != "" && c.redisCluster, isSentinelURL(c.redisURL) && c.redisCluster:
		return errors.New("--redis-cluster and Redis Sentinel exclude each other: a cluster fails over by itself")
	case c.redisSentinel != "" && c.redisURL == "":
		return errors.New("--redis-sentinel needs --redis-url naming the sentinels: redis://host:port?addr=host2:port, or give redis+sentinel://host:port,host2:port/master alone")
	case c.redisSentinel != "" && isSentinelURL(c.redisURL):
		return errors.New("--redis-sentinel and a redis+sentinel:// URL both name the master: drop --redis-sentinel")
	case c.minReplicas < 0:
		return errors.New("--redis-min-replicas must be 0 (none asked) or positive")
	case c.minReplicas > 0 && c.redisURL == "":
		return errors.New("--redis-min-replicas needs --redis-url: the embedded backend has no replicas")
	case c.replicaTimeout < time.Millisecond:
		return errors.New("--redis-replica-timeout must be at least 1ms (WAIT with 0 would block for ever)")
	case c.replicaTimeout >= c.redisTimeout:
		// The WAIT goes in the same pipeline as the scripts, within the
		// same bound.
		return fmt.Errorf("--redis-replica-timeout %s must be shorter than --redis-timeout %s: each WAIT runs within a call's bound", c.replicaTimeout, c.redisTimeout)
	case c.maxWaiters < 1:
		return errors.New("--max-waiters must be at least 1")
	case c.maxWatchers < 1:
		return errors.New("--max-watchers must be at least 1")
	case c.maxWatchLife < time.Second:
		return errors.New("--max-watch-lifetime must be at least 1s")
	case c.subjectRate < 0 || math.IsNaN(c.subjectRate) || math.IsInf(c.subjectRate, 0):
		return errors.New("--subject-rate must be 0 (no limit) or a positive number of requests per second")
	case c.subjectBurst < 0 || c.subjectWaiters < 0 || c.subjectWatchers < 0:
		return errors.New("--subject-burst, --subject-max-waiters and --subject-max-watchers must be 0 (the default) or positive")
	case c.subjectBurst > 0 && c.subjectRate == 0:
		return errors.New("--subject-burst is the size of the --subject-rate bucket: set --subject-rate too")
	case (c.tlsCert == "") != (c.tlsKey == ""):
		return errors.New("set --tls-cert and --tls-key together")
	case c.maxConnections < 0:
		return errors.New("--max-connections must be 0 (no limit) or positive")
	case c.maxConnections > 0 && c.maxConnections <= c.maxWaiters:
		// Waiters would hold every connection, and the release that
		// wakes them could not get in.
		return fmt.Errorf("--max-connections %d must exceed --max-waiters %d: waiters could hold every connection, and the release that wakes them could not connect", c.maxConnections, c.maxWaiters)
	case c.defaultTTL > c.maxTTL:
		return fmt.Errorf("--default-ttl %s is longer than --max-ttl %s", c.defaultTTL, c.maxTTL)
	case c.maxHold < 0 || c.maxHold > 0 && c.maxHold < time.Millisecond:
		return errors.New("--max-hold must be 0 (none) or at least 1ms")
	case c.defaultTTL < time.Millisecond || c.maxTTL < time.Millisecond:
		return errors.New("TTLs must be at least 1ms")
	case c.fenceRetention < time.Millisecond:
		return errors.New("--fence-retention must be at least 1ms")
	case c.lockDelay < 0 || c.lockDelay > 0 && c.lockDelay < time.Millisecond:
		return errors.New("--lock-delay must be 0 or at least 1ms")
	case c.maxSharedHolders < 1 || c.maxSharedHolders > 100000:
		return errors.New("--max-shared-holders must be from 1 to 100000")
	case c.sessionMaxHolds < 1 || c.sessionMaxHolds > 10000:
		return errors.New("--session-max-holds must be from 1 to 10000")
	case c.subjectSessions < 1 || c.subjectSessions > 100000:
		return errors.New("--subject-max-sessions must be from 1 to 100000")
	case c.history < 0 || c.history > 1000:
		return errors.New("--history must be 0 (off) to 1000 events")
	case c.priorityAging < time.Millisecond || c.priorityAging > 24*time.Hour:
		return errors.New("--priority-aging must be between 1ms and 24h")
	case c.ticketLiveness < minTicketLiveness || c.ticketLiveness > 10*time.Minute:
		// A long poll keeps its ticket alive once a second at most.
		return fmt.Errorf("--ticket-liveness must be between %s (twice a long poll's keep-alive, once a second) and 10m", minTicketLiveness)
	case c.signGrants != signOnRequest && c.signGrants != signAlways:
		return fmt.Errorf("--sign-grants %q: want %s or %s", c.signGrants, signOnRequest, signAlways)
	case c.signGrants == signAlways && c.grantKeys == "off":
		return errors.New("--sign-grants always signs every grant, and --grant-keys off signs none: set one of them otherwise")
	case c.lockDelay > time.Hour:
		return errors.New("--lock-delay must be at most 1h: longer keeps a lock nobody holds from everyone")
	}
	return c.checkIssuers()
}

// jwksSets reads --jwt-jwks, and --jwt-jwks-url where it is safe: when
// one --jwt-issuer says whose its sets are. Without that, a key of any set
// would sign for every issuer.
func (c config) jwksSets() ([]auth.JWKSet, error) {
	var sets []auth.JWKSet
	for _, v := range c.jwtJWKSFlags {
		iss, u, ok := strings.Cut(v, "=")
		if !ok || iss == "" || u == "" {
			// Not the value: its URL may hold a password.
			return nil, errors.New("--jwt-jwks: want ISSUER=URL, the iss of the tokens the set's keys sign and the set's URL, " +
				"such as https://token.actions.githubusercontent.com=https://token.actions.githubusercontent.com/.well-known/jwks")
		}
		sets = append(sets, auth.JWKSet{Issuer: iss, URL: u})
	}
	if len(c.jwtJWKSURLs) > 0 {
		if len(c.jwtIssuers) != 1 {
			return nil, fmt.Errorf("--jwt-jwks-url cannot say whose JWK Sets they are, and a key of any set would sign tokens for every issuer: "+
				"give each set with its issuer as --jwt-jwks ISSUER=URL (%s), or one --jwt-issuer that every set belongs to", envName("jwt-jwks"))
		}
		for _, u := range c.jwtJWKSURLs {
			sets = append(sets, auth.JWKSet{Issuer: c.jwtIssuers[0], URL: u})
		}
	}
	return sets, nil
}

// checkIssuers: every issuer named has a key that verifies its tokens.
func (c config) checkIssuers() error {
	ownKey := c.jwtSecret != "" || c.jwtPublicKeyFile != "" || c.dev
	hasSet := make(map[string]bool)
	for _, s := range c.jwtJWKS {
		if err := auth.CheckIssuer(s.Issuer); err != nil {
			return fmt.Errorf("--jwt-jwks %q: %w", s.Issuer, err)
		}
		hasSet[s.Issuer] = true
	}
	for _, iss := range c.jwtIssuers {
		if err := auth.CheckIssuer(iss); err != nil {
			return fmt.Errorf("--jwt-issuer %q: %w", iss, err)
		}
		if !ownKey && !hasSet[iss] {
			return fmt.Errorf("--jwt-issuer %q: no key verifies its tokens: --jwt-issuer lists the issuers of the tokens "+
				"--jwt-secret or --jwt-public-key-file verify, and no --jwt-jwks set belongs to it", iss)
		}
	}
	return nil
}
