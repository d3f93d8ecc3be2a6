package handlers

import (
	"errors"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/lockgate/lockgate/locks"
)

// leaseMetrics say how grants end: how long locks and permits were held
// until their release, how many leases ended under their holders, and why
// renewals failed.
type leaseMetrics struct {
	held       prometheus.Histogram
	permitHeld prometheus.Histogram
	expired    *prometheus.CounterVec
	renewals   *prometheus.CounterVec
}

// Renewal failure reasons, the values of the "reason" label.
const (
	reasonNotHolder   = "not_holder"  // the grant was gone
	reasonInvalid     = "invalid"     // refused by the engine
	reasonUnavailable = "unavailable" // the backend failed or did not answer
	reasonCancelled   = "cancelled"   // the caller left
	reasonError       = "error"       // anything else
)

func newLeaseMetrics(reg prometheus.Registerer) *leaseMetrics {
	m := &leaseMetrics{
		held: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "lockgate_lock_hold_seconds",
			Help: "How long locks were held, from the grant to the release that ended it (its last hold), on the backend's clock. " +
				"Grants that end by expiry are not in it (see lockgate_leases_expired_total).",
			Buckets: holdBuckets,
		}),
		permitHeld: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "lockgate_permit_hold_seconds",
			Help: "How long semaphore permits were held, from the grant to the release, on the backend's clock. " +
				"Permits that end by expiry are not in it (see lockgate_leases_expired_total).",
			Buckets: holdBuckets,
		}),
		expired: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "lockgate_leases_expired_total",
			Help: "Renew and release calls that found their grant's lease ended while its holder still used it " +
				"(not_holder with reason expired), by kind (lock, semaphore) and call (renew, release).",
		}, []string{"kind", "call"}),
		renewals: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "lockgate_renewals_failed_total",
			Help: "Renew calls that failed, by kind (lock, semaphore) and reason: not_holder, invalid, unavailable, cancelled, error.",
		}, []string{"kind", "reason"}),
	}
	reg.MustRegister(m.held, m.permitHeld, m.expired, m.renewals)
	for _, kind := range []string{"lock", "semaphore"} {
		for _, call := range []string{"renew", "release"} {
			m.expired.WithLabelValues(kind, call) // every series from the start, at 0
		}
		for _, r := range []string{reasonNotHolder, reasonInvalid, reasonUnavailable, reasonCancelled, reasonError} {
			m.renewals.WithLabelValues(kind, r)
		}
	}
	return m
}

// holdBuckets are the buckets of the hold-time histograms, seconds.
var holdBuckets = []float64{.001, .01, .1, .5, 1, 5, 10, 30, 60, 300, 900, 3600}

// released counts a release of kind ("lock" or "semaphore") that did rel
// or failed with err: how long the grant it ended was held, or that it
// failed because the grant's lease had ended.
func (m *leaseMetrics) released(kind string, rel locks.Released, err error) {
	switch {
	case expired(err):
		m.expired.WithLabelValues(kind, "release").Inc()
	case rel.Ended && kind == "semaphore":
		m.permitHeld.Observe(rel.Held.Seconds())
	case rel.Ended:
		m.held.Observe(rel.Held.Seconds())
	}
}

// renewReasons are the reasons of failed renewals, by their error's code;
// any other code is reasonError.
var renewReasons = map[locks.Code]string{
	locks.CodeNotHolder:   reasonNotHolder,
	locks.CodeInvalid:     reasonInvalid,
	locks.CodeUnavailable: reasonUnavailable,
	locks.CodeCancelled:   reasonCancelled,
}

// renewFailed counts a renewal of kind that failed with err.
func (m *leaseMetrics) renewFailed(kind string, err error) {
	reason, ok := renewReasons[locks.ErrorCode(err)]
	if !ok {
		reason = reasonError
	}
	if reason == reasonNotHolder && expired(err) {
		m.expired.WithLabelValues(kind, "renew").Inc()
	}
	m.renewals.WithLabelValues(kind, reason).Inc()
}

// expired reports whether err says the grant's lease ended unreleased.
func expired(err error) bool {
	var nh *locks.NotHolderError
	return errors.As(err, &nh) && nh.Reason == locks.ReasonExpired
}
