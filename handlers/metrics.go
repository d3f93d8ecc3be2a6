package handlers

import (
	"maps"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
)

// metrics are the gateway's Prometheus collectors.
type metrics struct {
	requests *prometheus.CounterVec
	// series holds the requests' counters already looked up (see request).
	series   atomic.Pointer[map[requestSeries]prometheus.Counter]
	seriesMu sync.Mutex // held to add to series
	acquires *outcomeVec
	// semAcquires counts semaphore acquires, by the outcomes of acquires
	// plus full and limit_mismatch.
	semAcquires *outcomeVec
	wait        prometheus.Histogram
	handoff     prometheus.Histogram
	waiters     prometheus.Gauge
	watchers    prometheus.Gauge
	lease       *leaseMetrics
	tickets     *ticketMetrics
}

// Acquire outcomes, the values of the "outcome" label.
const (
	outcomeGranted   = "granted"   // the caller got the lock
	outcomeHeld      = "held"      // held, and the caller did not wait or waited in vain
	outcomeInvalid   = "invalid"   // refused before reaching the engine or by it
	outcomeCancelled = "cancelled" // the caller left, or the gateway shut down
	outcomeError     = "error"     // the backend failed
	outcomeRefused   = "refused"   // too many waiters: 429, never reached the engine
	outcomeReentered = "reentered" // the holder took its lock once more

	outcomeReplayed     = "replayed"      // a retry with an Idempotency-Key got the grant of an earlier call
	outcomeRetryRefused = "retry_refused" // a retry with an Idempotency-Key: in progress, grant ended, or another body
)

func newMetrics(reg prometheus.Registerer) *metrics {
	m := &metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "lockgate_http_requests_total",
			Help: "HTTP requests by route pattern, method and status code.",
		}, []string{"route", "method", "code"}),
		acquires: newOutcomeVec(prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "lockgate_acquires_total",
			Help: "Acquire calls by outcome: granted, replayed, held, invalid, cancelled, error, refused, reentered, retry_refused, ticket (a 202 with a ticket; its polls are in lockgate_ticket_polls_total).",
		}, []string{"outcome"})),
		semAcquires: newOutcomeVec(prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "lockgate_semaphore_acquires_total",
			Help: "Semaphore acquire calls by outcome: granted, replayed, full, limit_mismatch, invalid, cancelled, error, refused, retry_refused.",
		}, []string{"outcome"})),
		wait: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "lockgate_acquire_wait_seconds",
			Help:    "Time acquirers (of locks and semaphores) with wait_ms > 0 spent in the engine, whatever the outcome.",
			Buckets: []float64{.001, .005, .01, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60},
		}),
		handoff: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "lockgate_handoff_seconds",
			Help: "For grants (of locks and permits) handed over from the queue: time from the hand-off in the backend " +
				"to the engine returning the grant (an upper bound).",
			Buckets: []float64{.0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .5, 1},
		}),
		waiters: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "lockgate_active_waiters",
			Help: "Acquire calls currently waiting for a held lock or a full semaphore.",
		}),
		watchers: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "lockgate_active_watchers",
			Help: "Watches of locks (long-polls and event streams) open now, against --max-watchers.",
		}),
	}
	m.series.Store(&map[requestSeries]prometheus.Counter{})
	reg.MustRegister(m.requests, m.acquires.CounterVec, m.semAcquires.CounterVec, m.wait, m.handoff, m.waiters, m.watchers)
	m.lease = newLeaseMetrics(reg)
	m.tickets = newTicketMetrics(reg)
	for _, o := range []string{outcomeGranted, outcomeHeld, outcomeInvalid, outcomeCancelled, outcomeError, outcomeRefused} {
		m.acquires.WithLabelValues(o) // show every outcome from the start, at 0
	}
	for _, o := range []string{outcomeGranted, outcomeFull, outcomeLimitMismatch, outcomeInvalid, outcomeCancelled, outcomeError, outcomeRefused} {
		m.semAcquires.WithLabelValues(o)
	}
	return m
}

// observe counts a finished request by route pattern (middleware.Requests
// calls it); unmatched paths share one label so that scanners cannot blow
// up the series count.
func (m *metrics) observe(r *http.Request, route string, status int) {
	method := r.Method
	if route == "" {
		route = "unmatched"
		method = "any" // the method is as arbitrary as the path there
	}
	m.request(route, method, status).Inc()
}

// requestSeries is one series of lockgate_http_requests_total.
type requestSeries struct {
	route, method string
	code          int
}

// request is the counter of a route, method and status. The counters of
// the usual methods are kept once looked up, in a map read without a lock
// and copied to add one (there are a few dozen): CounterVec's lookup
// hashes the three labels and takes a lock on every request, 2 % of a
// lock cycle's CPU through the handler.
func (m *metrics) request(route, method string, code int) prometheus.Counter {
	k := requestSeries{route: route, method: method, code: code}
	if c, ok := (*m.series.Load())[k]; ok {
		return c
	}
	c := m.requests.WithLabelValues(route, method, statusLabel(code))
	switch method {
	case http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodDelete, "any":
	default:
		return c // any token is a method: those are not kept
	}
	m.seriesMu.Lock()
	defer m.seriesMu.Unlock()
	series := maps.Clone(*m.series.Load())
	series[k] = c
	m.series.Store(&series)
	return c
}

// outcomeVec is a counter of acquire outcomes whose "granted" series,
// counted on every grant, is looked up once.
type outcomeVec struct {
	*prometheus.CounterVec
	granted prometheus.Counter
}

func newOutcomeVec(v *prometheus.CounterVec) *outcomeVec {
	return &outcomeVec{CounterVec: v, granted: v.WithLabelValues(outcomeGranted)}
}

// statusLabels are the "code" labels of the statuses net/http sends
// (100-999), made once: strconv.Itoa allocates for numbers past 99.
var statusLabels = func() (ls [1000]string) {
	for code := 100; code < len(ls); code++ {
		ls[code] = strconv.Itoa(code)
	}
	return ls
}()

func statusLabel(code int) string {
	if code >= 100 && code < len(statusLabels) {
		return statusLabels[code]
	}
	return strconv.Itoa(code)
}
