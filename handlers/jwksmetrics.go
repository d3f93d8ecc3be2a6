package handlers

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/lockgate/lockgate/auth"
)

// jwksCollector reports the authenticator's JWK Sets at each scrape, by
// issuer and (redacted) URL: an operator's handful, never a caller's.
type jwksCollector struct {
	auth                                   *auth.Authenticator
	keys, skipped, fetched, stale, failure *prometheus.Desc
}

func newJWKSCollector(auth *auth.Authenticator) *jwksCollector {
	labels := []string{"issuer", "url"}
	return &jwksCollector{
		auth: auth,
		keys: prometheus.NewDesc("lockgate_jwks_keys",
			"Keys of a JWK Set in use: those of its last successful fetch that can verify tokens.", labels, nil),
		skipped: prometheus.NewDesc("lockgate_jwks_keys_skipped",
			"Keys of a JWK Set's last successful fetch that cannot verify tokens (malformed, or of a type, size or use the gateway does not verify with); the others load all the same.", labels, nil),
		fetched: prometheus.NewDesc("lockgate_jwks_last_fetch_timestamp_seconds",
			"When a JWK Set was last fetched successfully (Unix time); absent until it is.", labels, nil),
		stale: prometheus.NewDesc("lockgate_jwks_stale",
			"1 when a JWK Set has not been refreshed for longer than --jwt-jwks-max-stale (keys removed from it still verify, and /readyz answers 503), else 0.", labels, nil),
		failure: prometheus.NewDesc("lockgate_jwks_fetch_failures_total",
			"Fetches of a JWK Set that failed; the keys fetched before stayed in use.", labels, nil),
	}
}

func (c *jwksCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.keys, c.skipped, c.fetched, c.stale, c.failure} {
		ch <- d
	}
}

func (c *jwksCollector) Collect(ch chan<- prometheus.Metric) {
	for _, s := range c.auth.JWKSStatus() {
		stale := 0.0
		if s.Stale {
			stale = 1
		}
		ch <- prometheus.MustNewConstMetric(c.keys, prometheus.GaugeValue, float64(s.Keys), s.Issuer, s.URL)
		ch <- prometheus.MustNewConstMetric(c.skipped, prometheus.GaugeValue, float64(s.Skipped), s.Issuer, s.URL)
		ch <- prometheus.MustNewConstMetric(c.stale, prometheus.GaugeValue, stale, s.Issuer, s.URL)
		ch <- prometheus.MustNewConstMetric(c.failure, prometheus.CounterValue, float64(s.Failures), s.Issuer, s.URL)
		if !s.Fetched.IsZero() {
			ch <- prometheus.MustNewConstMetric(c.fetched, prometheus.GaugeValue, float64(s.Fetched.UnixNano())/1e9, s.Issuer, s.URL)
		}
	}
}
