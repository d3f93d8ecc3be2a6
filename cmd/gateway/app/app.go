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

	"github.com/lockgate/lockgate/handlers"
	"github.com/lockgate/lockgate/locks"
	"github.com/lockgate/lockgate/middleware"
)

// ListeningPrefix starts the line Run prints to stdout once it accepts
// connections, followed by the base URL, e.g.
// "lockgate listening on http://127.0.0.1:8080". Tests read it to learn a
// port chosen with --addr 127.0.0.1:0.
const ListeningPrefix = "lockgate listening on "

// maxHeaderBytes bounds request headers, an absurd Authorization included.
const maxHeaderBytes = 64 << 10

// Run serves the gateway until ctx is done, then drains: waiting acquirers
// get a 503, in-flight requests get up to --shutdown-timeout to finish.
// args are the command line (args[0] is the program name); getenv reads the
// environment. Logs go to stderr as JSON; stdout gets the listening line and,
// with --dev, a ready-to-use token.
func Run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	cfg, err := parseConfig(args, getenv, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return nil
	}
	if err != nil {
		return err
	}
	logger := zerolog.New(stderr).Level(cfg.logLevel).With().Timestamp().Logger()

	authCfg, err := authConfig(cfg)
	if err != nil {
		return err
	}
	authn, err := middleware.NewAuthenticator(authCfg)
	if err != nil {
		return err
	}

	backend, closeBackend, err := openBackend(ctx, cfg, logger)
	if err != nil {
		return err
	}
	defer func() {
		if err := closeBackend(); err != nil {
			logger.Warn().Err(err).Msg("close backend")
		}
	}()

	srv, err := handlers.NewServer(handlers.Config{
		Backend:    backend,
		Auth:       authn,
		DefaultTTL: cfg.defaultTTL,
		MaxTTL:     cfg.maxTTL,
		MaxWait:    cfg.maxWait,
		MaxWaiters: cfg.maxWaiters,
		Logger:     logger,
	})
	if err != nil {
		return err
	}
	h, err := srv.Handler()
	if err != nil {
		return err
	}
	httpSrv := &http.Server{
		Handler:           h,
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       30 * time.Second,
		// A response may wait up to max-wait for the lock, then a few Redis
		// calls; past that the connection is cut.
		WriteTimeout:   cfg.maxWait + 4*cfg.redisTimeout + 10*time.Second,
		IdleTimeout:    2 * time.Minute,
		MaxHeaderBytes: maxHeaderBytes,
		ErrorLog:       log.New(logger.With().Str("component", "http").Logger(), "", 0),
	}

	l, err := net.Listen("tcp", cfg.addr)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", cfg.addr, err)
	}
	baseURL := "http://" + l.Addr().String()
	logger.Info().Str("addr", l.Addr().String()).Msg("listening")
	fmt.Fprintln(stdout, ListeningPrefix+baseURL)
	if cfg.dev {
		if err := printDev(stdout, cfg, authCfg, baseURL); err != nil {
			l.Close()
			return err
		}
	}

	served := make(chan error, 1)
	go func() { served <- httpSrv.Serve(l) }()
	select {
	case err := <-served:
		return fmt.Errorf("serve: %w", err)
	case <-ctx.Done():
	}

	logger.Info().Dur("deadline", cfg.shutdownTimeout).Msg("shutting down: draining in-flight requests")
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
	logger.Info().Msg("stopped")
	return nil
}

// authConfig builds the token verification settings. --dev without a key
// gets a random secret, which dies with the process.
func authConfig(cfg config) (middleware.AuthConfig, error) {
	ac := middleware.AuthConfig{Issuer: cfg.jwtIssuer, Audience: cfg.jwtAudience}
	switch {
	case cfg.jwtSecret != "":
		ac.Secret = []byte(cfg.jwtSecret)
	case cfg.jwtPublicKeyFile != "":
		data, err := os.ReadFile(cfg.jwtPublicKeyFile)
		if err != nil {
			return ac, fmt.Errorf("--jwt-public-key-file: %w", err)
		}
		if ac.PublicKeys, err = middleware.ParsePublicKeys(data); err != nil {
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
		m := locks.NewMemory()
		return m, m.Close, nil
	}
	b, closeFn, err := newRedisBackend(cfg.redisURL, cfg.redisCluster, cfg.redisSentinel, cfg.redisPrefix, cfg.redisTimeout)
	if err != nil {
		return nil, nil, err
	}
	checkCtx, cancel := context.WithTimeout(ctx, cfg.redisTimeout)
	defer cancel()
	if err := b.Check(checkCtx); err != nil {
		// Not fatal: Redis may come up after us, and /readyz tells.
		logger.Warn().Err(err).Msg("Redis does not answer yet; /readyz reports 503 until it does")
	}
	return b, closeFn, nil
}
