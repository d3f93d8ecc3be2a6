// Package app is the gateway process: configuration, backend, HTTP server
// and graceful shutdown. cmd/gateway calls Run with the process's
// arguments, environment and signals; tests call it in-process.
package app

import (
	"context"
	"crypto/rand"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"time"

	"github.com/rs/zerolog"
	"golang.org/x/net/netutil"

	"github.com/lockgate/lockgate/auth"
	"github.com/lockgate/lockgate/handlers"
	"github.com/lockgate/lockgate/internal/tracing"
	"github.com/lockgate/lockgate/locks"
	"github.com/lockgate/lockgate/locks/embedded"
	"github.com/lockgate/lockgate/locks/redisbackend"
	"github.com/lockgate/lockgate/ratelimit"
	"github.com/lockgate/lockgate/ui"
)

// ListeningPrefix starts the line Run prints to stdout once it accepts
// connections, followed by the base URL, e.g.
// "lockgate listening on http://127.0.0.1:8080". Tests read it to learn a
// port chosen with --addr 127.0.0.1:0.
const ListeningPrefix = "lockgate listening on "

// maxHeaderBytes bounds request headers, an absurd Authorization included.
const maxHeaderBytes = 64 << 10

// releaseTimeout bounds the release of a grant whose caller left before it
// could receive it.
const releaseTimeout = 5 * time.Second

// Run serves the gateway until ctx is done, then drains: waiting acquirers
// get a 503, in-flight requests get up to --shutdown-timeout to finish, then
// their connections are closed and Run waits for their handlers (at most
// 3 × --redis-timeout + 5 s) before it closes the backend.
// args are the command line (args[0] is the program name); getenv reads the
// environment. Logs go to stderr as JSON, and with --dev a ready-to-use
// token after a warning; stdout gets the listening line only.
func Run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	cfg, err := parseConfig(args, getenv, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return nil
	}
	if err != nil {
		return err
	}
	logger := zerolog.New(stderr).Level(cfg.logLevel).With().Timestamp().Logger()

	// The JWK Sets are fetched again in the background until Run returns.
	jwksCtx, stopJWKS := context.WithCancel(ctx)
	defer stopJWKS()
	authCfg, err := authConfig(jwksCtx, cfg, logger)
	if err != nil {
		return err
	}
	authn, err := auth.NewAuthenticator(authCfg)
	if err != nil {
		return err
	}

	tracer, err := tracing.FromEnv(ctx, getenv)
	if err != nil {
		return err
	}
	defer func() { // last: after the backend, with the spans of the drain
		shutCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		if err := tracer.Shutdown(shutCtx); err != nil {
			logger.Warn().Err(err).Msg("export the last spans")
		}
	}()

	backend, closeBackend, err := openBackend(ctx, cfg, logger)
	if err != nil {
		return err
	}
	// Left open if handlers still use it at the end (see inflight).
	backendInUse := false
	defer func() {
		if backendInUse {
			return
		}
		if err := closeBackend(); err != nil {
			logger.Warn().Err(err).Msg("close backend")
		}
	}()

	signer, err := grantSigner(cfg, logger)
	if err != nil {
		return err
	}
	tickets, _ := backend.(locks.Tickets)
	notifier, err := callbackNotifier(cfg, logger)
	if err != nil {
		return err
	}
	if notifier != nil {
		defer notifier.Close() // after the HTTP server: no ticket opens after it
	}
	var dashboard http.Handler
	if cfg.ui {
		dashboard = ui.Handler()
	}
	srv, err := handlers.NewServer(handlers.Config{
		Callbacks:          notifier,
		Signer:             signer,
		SignAll:            cfg.signGrants == signAlways,
		Tickets:            tracer.Tickets(tickets),
		Backend:            tracer.Backend(backend),
		Auth:               authn,
		DefaultTTL:         cfg.defaultTTL,
		MaxTTL:             cfg.maxTTL,
		MaxHold:            cfg.maxHold,
		MaxWait:            cfg.maxWait,
		MaxTicketWait:      cfg.maxTicketWait,
		MaxWaiters:         cfg.maxWaiters,
		MaxWatchers:        cfg.maxWatchers,
		MaxWatchLifetime:   cfg.maxWatchLife,
		MaxSubjectWatchers: cfg.subjectWatchers,
		History:            cfg.history,
		Subjects: ratelimit.NewSubjectLimiter(auth.Limits{
			Rate: cfg.subjectRate, Burst: cfg.subjectBurst, MaxWaiters: cfg.subjectWaiters,
		}, authCfg.Policy),
		ReleaseTimeout: releaseTimeout,
		Logger:         logger,
		Tracing:        tracer,
		UI:             dashboard,
		MCP:            cfg.mcp,
	})
	if err != nil {
		return err
	}
	h, err := srv.Handler()
	if err != nil {
		return err
	}
	running := newInflight()
	// stopHandlers waits for the handlers that Shutdown or Close left
	// running. Once their connections are closed, each ends within a few
	// backend calls and the release of an undelivered grant.
	stopHandlers := func() error {
		grace := 3*cfg.redisTimeout + releaseTimeout
		graceCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), grace)
		defer cancel()
		if n := running.wait(graceCtx); n > 0 {
			// Closing the backend under them would race their calls; the
			// process is about to exit, which ends them.
			backendInUse = true
			return fmt.Errorf("shutdown: %d requests still running %s after their connections were closed; left the backend open", n, grace)
		}
		return nil
	}
	httpSrv := &http.Server{
		Handler:           running.wrap(h),
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       30 * time.Second,
		// A response may wait up to max-wait for the lock, then a few Redis
		// calls; past that the connection is cut. A watch sets deadlines
		// of its own (handlers.lockWatch), and ends when Drain is called.
		WriteTimeout:   cfg.maxWait + 4*cfg.redisTimeout + 10*time.Second,
		IdleTimeout:    2 * time.Minute,
		MaxHeaderBytes: maxHeaderBytes,
		ErrorLog:       log.New(logger.With().Str("component", "http").Logger(), "", 0),
	}

	if cfg.pprofAddr != "" {
		stopPprof, err := servePprof(cfg.pprofAddr, logger)
		if err != nil {
			return err
		}
		defer stopPprof()
	}

	var cert *certificate
	scheme := "http"
	if cfg.tlsCert != "" {
		if cert, err = loadCertificate(cfg.tlsCert, cfg.tlsKey); err != nil {
			return err
		}
		httpSrv.TLSConfig = cert.tlsConfig()
		scheme = "https"
	}
	reloadCtx, stopReload := context.WithCancel(ctx)
	reloaded := make(chan struct{})
	go func() {
		defer close(reloaded)
		reloadOnSignal(reloadCtx, cert, logger)
	}()
	defer func() {
		stopReload()
		<-reloaded
	}()

	l, err := net.Listen("tcp", cfg.addr)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", cfg.addr, err)
	}
	if cfg.maxConnections > 0 {
		// Past the limit, Accept waits for a connection to close: the new
		// ones wait in the kernel's accept queue.
		l = netutil.LimitListener(l, cfg.maxConnections)
	}
	if notifier != nil {
		notifier.RefuseHouse(ctx, houseAddresses(cfg, l.Addr().String())...)
	}
	baseURL := scheme + "://" + l.Addr().String()
	if cfg.dev {
		// Before the listening line, so whoever waits for it has the token.
		if err := printDev(stderr, cfg, authCfg, baseURL); err != nil {
			l.Close()
			return err
		}
	}
	logger.Info().Str("addr", l.Addr().String()).Msg("listening")
	fmt.Fprintln(stdout, ListeningPrefix+baseURL)

	served := make(chan error, 1)
	go func() {
		if cert != nil {
			served <- httpSrv.ServeTLS(l, "", "") // the certificate is in TLSConfig
			return
		}
		served <- httpSrv.Serve(l)
	}()
	select {
	case err := <-served:
		httpSrv.Close()
		return errors.Join(fmt.Errorf("serve: %w", err), stopHandlers())
	case <-ctx.Done():
	}

	logger.Info().Dur("deadline_ms", cfg.shutdownTimeout).Msg("shutting down: draining in-flight requests")
	srv.Drain()
	shutdownCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cfg.shutdownTimeout)
	defer cancel()
	if err := httpSrv.Shutdown(shutdownCtx); err != nil {
		// Cancels the requests left; an acquire granted as its request is
		// cancelled is released by the engine and the handler.
		httpSrv.Close()
		logger.Warn().Err(err).Msg("drain deadline passed; closed the remaining connections")
	}
	<-served
	if err := stopHandlers(); err != nil {
		return err
	}
	logger.Info().Msg("stopped")
	return nil
}

// authConfig builds the token verification settings. --dev, which refuses
// a configured key, gets a random secret that dies with the process. The JWK Sets are
// fetched before it returns, each within a few seconds.
func authConfig(ctx context.Context, cfg config, logger zerolog.Logger) (auth.Config, error) {
	ac := auth.Config{Issuers: cfg.jwtIssuers, Audience: cfg.jwtAudience, NSClaim: cfg.jwtNSClaim}
	if cfg.policyFile != "" {
		data, err := os.ReadFile(cfg.policyFile)
		if err != nil {
			return ac, fmt.Errorf("--policy: %w", err)
		}
		if ac.Policy, err = auth.ParsePolicy(data); err != nil {
			return ac, fmt.Errorf("--policy %s: %w", cfg.policyFile, err)
		}
	}
	if len(cfg.jwtJWKS) > 0 {
		maxStale := cfg.jwtJWKSMaxStale
		if maxStale == 0 {
			maxStale = -1 // never
		}
		jwks, err := auth.NewJWKS(ctx, auth.JWKSConfig{
			Sets:     cfg.jwtJWKS,
			Refresh:  cfg.jwtJWKSRefresh,
			MaxStale: maxStale,
			OnError: func(set auth.JWKSet, err error) {
				logger.Warn().Err(err).Str("issuer", set.Issuer).Str("jwks_url", set.URL).Msg("JWK Set fetch failed; the keys fetched before stay in use")
			},
		})
		if err != nil {
			return ac, fmt.Errorf("--jwt-jwks: %w", err)
		}
		for _, set := range jwks.PlainHTTP() {
			logger.Warn().Str("issuer", set.Issuer).Str("jwks_url", set.URL).
				Msg("JWK Set fetched over plain http from another machine: whoever is on the path can swap its keys and sign tokens for its issuer; use https")
		}
		if err := jwks.Ready(); err != nil {
			// Not fatal, as with Redis: the provider may come up after us.
			logger.Warn().Err(err).Msg("/readyz reports 503, and tokens signed with those keys get 401, until every JWK Set is fetched; retrying every 10s")
		}
		ac.JWKS = jwks
	}
	switch {
	case cfg.jwtSecret != "":
		// Text, from a variable or a flag: NewAuthenticator checks bytes.
		if err := auth.CheckTextSecret(cfg.jwtSecret); err != nil {
			return ac, err
		}
		ac.Secret = []byte(cfg.jwtSecret)
	case cfg.jwtPublicKeyFile != "":
		data, err := os.ReadFile(cfg.jwtPublicKeyFile)
		if err != nil {
			return ac, fmt.Errorf("--jwt-public-key-file: %w", err)
		}
		if ac.PublicKeys, err = auth.ParsePublicKeys(data); err != nil {
			return ac, fmt.Errorf("--jwt-public-key-file %s: %w", cfg.jwtPublicKeyFile, err)
		}
	case cfg.dev:
		ac.Secret = make([]byte, 32)
		rand.Read(ac.Secret) // never fails: see crypto/rand.Read.
	}
	return ac, nil
}

// openBackend returns the configured backend and what closes it.
func openBackend(ctx context.Context, cfg config, logger zerolog.Logger) (locks.Backend, func() error, error) {
	if cfg.redisURL == "" {
		logger.Warn().Msg("using the embedded in-memory backend: locks live in this process only and vanish when it stops; " +
			"run a single gateway, or set --redis-url to share locks between gateways")
		m := embedded.New(embedded.Options{LockDelay: cfg.lockDelay, History: cfg.history, TicketLiveness: cfg.ticketLiveness,
			PriorityAging: cfg.priorityAging, MaxSharedHolders: cfg.maxSharedHolders, SessionMaxHolds: cfg.sessionMaxHolds, SessionsPerSubject: cfg.subjectSessions})
		return m, m.Close, nil
	}
	useRedisLogger(logger)
	b, closeFn, err := newRedisBackend(cfg.redisURL, cfg.redisCluster, cfg.redisSentinel, redisbackend.Options{
		Prefix:             cfg.redisPrefix,
		Timeout:            cfg.redisTimeout,
		FenceRetention:     cfg.fenceRetention,
		LockDelay:          cfg.lockDelay,
		History:            cfg.history,
		MinReplicas:        cfg.minReplicas,
		ReplicaTimeout:     cfg.replicaTimeout,
		TicketLiveness:     cfg.ticketLiveness,
		PriorityAging:      cfg.priorityAging,
		MaxSharedHolders:   cfg.maxSharedHolders,
		SessionMaxHolds:    cfg.sessionMaxHolds,
		SessionsPerSubject: cfg.subjectSessions,
	})
	if err != nil {
		return nil, nil, err
	}
	checkCtx, cancel := context.WithTimeout(ctx, cfg.redisTimeout)
	defer cancel()
	var (
		evicting *locks.EvictionError
		unknown  *locks.PolicyUnknownError
	)
	switch err := b.CheckEviction(checkCtx); {
	case errors.As(err, &evicting):
		// Fatal: such a Redis may delete live locks and hand them out again.
		return nil, nil, errors.Join(err, closeFn())
	case errors.As(err, &unknown):
		// Said once: /readyz cannot tell either, and lets it pass.
		logger.Warn().Err(err).Msg("cannot check Redis maxmemory-policy; make sure it is noeviction")
	case err != nil:
		// Not fatal: Redis may come up after us, and /readyz tells.
		logger.Warn().Err(err).Msg("Redis does not answer yet; /readyz reports 503 until it does")
		return b, closeFn, nil
	}
	// A Redis written by a newer gateway may hold locks this one cannot
	// see: refuse to start beside it (see redisbackend.CheckLayout).
	if err := b.CheckLayout(checkCtx); err != nil {
		if le := new(redisbackend.LayoutError); errors.As(err, &le) {
			return nil, nil, errors.Join(err, closeFn())
		}
		logger.Warn().Err(err).Msg("could not check the Redis layout")
	}
	// Before the first request: else the first calls of each script, all
	// at once, load its library side by side and may run past their
	// timeout on a busy Redis.
	loadCtx, cancelLoad := context.WithTimeout(ctx, max(5*time.Second, cfg.redisTimeout))
	defer cancelLoad()
	if err := b.LoadFunctions(loadCtx); err != nil {
		logger.Warn().Err(err).Msg("could not load the scripts' functions into Redis; each script's first call loads its own, or goes as EVALSHA where functions are refused")
	}
	return b, closeFn, nil
}
