package app

import (
	"context"
	"crypto/tls"
	"fmt"
	"os"
	"sync/atomic"

	"github.com/rs/zerolog"
)

// reloadKey carries the channel on which Run hears "read your files
// again"; see WithReload.
type reloadKey struct{}

// WithReload returns a context under which Run reads its TLS certificate
// and key again each time reload delivers a value, as cmd/gateway does on
// SIGHUP. Without it, Run never reloads. Tests pass a channel of their own,
// and signal no process.
func WithReload(ctx context.Context, reload <-chan os.Signal) context.Context {
	return context.WithValue(ctx, reloadKey{}, reload)
}

func reloadChan(ctx context.Context) <-chan os.Signal {
	c, _ := ctx.Value(reloadKey{}).(<-chan os.Signal)
	return c // nil: never ready
}

// certificate serves the certificate last read from its files: a handshake
// takes it through GetCertificate, and a reload swaps it whole.
type certificate struct {
	certFile, keyFile string
	current           atomic.Pointer[tls.Certificate]
}

// loadCertificate reads the pair once; Run refuses to start without it.
func loadCertificate(certFile, keyFile string) (*certificate, error) {
	c := &certificate{certFile: certFile, keyFile: keyFile}
	if err := c.reload(); err != nil {
		return nil, err
	}
	return c, nil
}

// reload reads the files again. On an error the certificate in use stays:
// a half-written or mismatched pair must not take HTTPS down.
func (c *certificate) reload() error {
	pair, err := tls.LoadX509KeyPair(c.certFile, c.keyFile)
	if err != nil {
		// LoadX509KeyPair names the file, never the key's bytes.
		return fmt.Errorf("--tls-cert/--tls-key: %w", err)
	}
	c.current.Store(&pair)
	return nil
}

func (c *certificate) get(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	return c.current.Load(), nil
}

// tlsConfig is the server's TLS configuration: TLS 1.2 or later, and the
// certificate in use at each handshake. net/http adds HTTP/2 to it.
func (c *certificate) tlsConfig() *tls.Config {
	return &tls.Config{MinVersion: tls.VersionTLS12, GetCertificate: c.get}
}

// reloadOnSignal reloads cert each time ctx's reload channel delivers,
// until ctx is done. Without a certificate a reload has nothing to do, and
// says so.
func reloadOnSignal(ctx context.Context, cert *certificate, logger zerolog.Logger) {
	reload := reloadChan(ctx)
	for {
		select {
		case <-ctx.Done():
			return
		case <-reload:
		}
		if cert == nil {
			logger.Info().Msg("reload asked (SIGHUP): nothing to reload without --tls-cert")
			continue
		}
		if err := cert.reload(); err != nil {
			logger.Error().Err(err).Msg("TLS certificate not reloaded; the previous one stays in use")
			continue
		}
		e := logger.Info()
		if leaf := cert.current.Load().Leaf; leaf != nil {
			e = e.Time("not_after", leaf.NotAfter).Str("subject", leaf.Subject.String())
		}
		e.Msg("TLS certificate reloaded")
	}
}
