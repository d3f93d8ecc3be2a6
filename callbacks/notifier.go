package callbacks

import (
	"bytes"
	"context"
	crand "crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"
)

// Config configures a Notifier.
type Config struct {
	// Allow is the allow-list. Default: none, and every callback URL is
	// refused.
	Allow *AllowList
	// Secret is the operator's secret, from which each ticket's own, that
	// signs its notifications, is derived (Secret.ForTicket). Required
	// when Allow allows any.
	Secret Secret
	// Workers is how many notifications are sent at once. Default 16.
	Workers int
	// PerHost is how many attempts to one destination (host and port) run
	// at once. Default 2.
	PerHost int
	// PerSubject is how many attempts for one subject's tickets run at
	// once, to all its destinations. Default 4.
	PerSubject int
	// Queue is how many notifications wait for a worker (first attempts
	// and retries alike); one more is dropped, counted failed. Default
	// 10000.
	Queue int
	// SubjectQueue is how many of them may be one subject's. Default 1000.
	SubjectQueue int
	// ConnectTimeout bounds connecting to a destination. Default 2s.
	ConnectTimeout time.Duration
	// AttemptTimeout bounds one attempt, connection included. Default 5s.
	AttemptTimeout time.Duration
	// Logger receives failed deliveries (the destination's host, never its
	// path, query or the secret). Default: discard.
	Logger zerolog.Logger
}

// Outcomes of a notification, the values of lockgate_callbacks_total's
// "outcome" label.
const (
	OutcomeDelivered = "delivered" // a 2xx answered an attempt
	OutcomeRefused   = "refused"   // its destination resolved to an address not allowed: never connected to
	OutcomeExpired   = "expired"   // the grant's pick-up time ended before an attempt succeeded
	OutcomeFailed    = "failed"    // dropped: the queue was full, or the gateway shut down
)

// Outcomes of one attempt, the values of lockgate_callback_attempts_total's
// "outcome" label.
const (
	attemptOK      = "ok"      // a 2xx
	attemptStatus  = "status"  // any other status, redirects included
	attemptError   = "error"   // no answer: connection, timeout
	attemptRefused = "refused" // not connected: the address is not allowed
)

// Notifier sends notifications of grants handed to tickets, from its own
// pool of workers, so that a slow receiver never holds up a lock, and
// serves its queues in turn (see queue.go), so that it holds up no other
// tenant's notifications either.
type Notifier struct {
	cfg      Config
	client   *http.Client
	total    *prometheus.CounterVec
	attempts *prometheus.CounterVec
	depthD   *prometheus.Desc
	oldestD  *prometheus.Desc
	openD    *prometheus.Desc
	house    atomic.Pointer[house]

	mu         sync.Mutex
	cond       *sync.Cond // signalled when a notification may be picked
	closed     bool
	queues     map[queueKey]*queue
	ring       []*queue // the queues with notifications, served in turn
	next       int      // where in ring the next pick starts
	depth      int
	perSubject map[string]int // notifications queued, by subject
	hosts      map[string]*host
	subjects   map[string]int                // attempts in flight, by subject
	timers     map[*notification]*time.Timer // retries waiting out their backoff
	ctx        context.Context               // cancelled by Close: ends attempts in flight
	cancel     context.CancelFunc
	workers    sync.WaitGroup
}

// Handed is one grant handed to a ticket, to tell its caller about.
type Handed struct {
	Dest Destination
	// Subject is the identity that opened the ticket: its notifications
	// share its part of the notifier.
	Subject string
	// Lock and Ticket name the ticket; PollURL is its path on the gateway.
	Lock, Ticket, PollURL string
	// PickUpBy is when the grant passes on unless a poll picks it up: no
	// attempt is made after it.
	PickUpBy time.Time
}

// notification is Handed on its way, with the id every attempt carries
// (receivers drop repeats by it).
type notification struct {
	Handed
	id      string
	attempt int
	queued  time.Time // when it last joined its queue
}

// New returns a Notifier whose workers run until Close.
func New(cfg Config) (*Notifier, error) {
	if !cfg.Allow.Empty() && cfg.Secret.IsZero() {
		return nil, errors.New("callbacks: a secret is required to sign notifications")
	}
	for _, d := range []struct {
		v   *int
		def int
	}{{&cfg.Workers, 16}, {&cfg.PerHost, 2}, {&cfg.PerSubject, 4}, {&cfg.Queue, 10000}, {&cfg.SubjectQueue, 1000}} {
		if *d.v <= 0 {
			*d.v = d.def
		}
	}
	if cfg.ConnectTimeout <= 0 {
		cfg.ConnectTimeout = 2 * time.Second
	}
	if cfg.AttemptTimeout <= 0 {
		cfg.AttemptTimeout = 5 * time.Second
	}
	n := &Notifier{
		cfg: cfg,
		total: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "lockgate_callbacks_total",
			Help: "Notifications of grants handed to tickets, by outcome: delivered, refused (the destination's address is not allowed), expired (the pick-up time ended first), failed (dropped: queue full, shutdown).",
		}, []string{"outcome"}),
		attempts: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "lockgate_callback_attempts_total",
			Help: "Attempts to deliver notifications, by outcome: ok (2xx), status (any other status, redirects included), error (no answer), refused (not connected).",
		}, []string{"outcome"}),
		depthD: prometheus.NewDesc("lockgate_callback_queue_depth",
			"Notifications waiting for an attempt (retries waiting out their backoff not included).", nil, nil),
		oldestD: prometheus.NewDesc("lockgate_callback_queue_oldest_seconds",
			"How long the notification that has waited longest for an attempt has waited; 0 when none waits.", nil, nil),
		openD: prometheus.NewDesc("lockgate_callback_breakers_open",
			"Destinations whose circuit breaker is open: after 5 failed attempts in a row they get none for a while.", nil, nil),
		queues:     make(map[queueKey]*queue),
		perSubject: make(map[string]int),
		hosts:      make(map[string]*host),
		subjects:   make(map[string]int),
		timers:     make(map[*notification]*time.Timer),
	}
	n.cond = sync.NewCond(&n.mu)
	n.client = &http.Client{
		Transport: &http.Transport{
			Proxy:                  nil, // a proxy would connect where the address checks cannot see
			DialContext:            dialer(cfg.ConnectTimeout, n.house.Load),
			DisableKeepAlives:      true, // every attempt connects, and is checked, anew
			TLSHandshakeTimeout:    cfg.AttemptTimeout,
			ResponseHeaderTimeout:  cfg.AttemptTimeout,
			MaxResponseHeaderBytes: 16 << 10,
			ForceAttemptHTTP2:      true,
		},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
	for _, o := range []string{OutcomeDelivered, OutcomeRefused, OutcomeExpired, OutcomeFailed} {
		n.total.WithLabelValues(o)
	}
	for _, o := range []string{attemptOK, attemptStatus, attemptError, attemptRefused} {
		n.attempts.WithLabelValues(o)
	}
	n.ctx, n.cancel = context.WithCancel(context.Background())
	for range cfg.Workers {
		n.workers.Go(n.work)
	}
	return n, nil
}

// RefuseHouse names the addresses no callback may reach, whatever the
// allow-list says: host:port of the gateway's own listeners, its pprof
// listener and its Redis (an empty host: every address of this machine).
// Names are resolved now; a callback URL naming one is refused too.
func (n *Notifier) RefuseHouse(ctx context.Context, hostports ...string) {
	n.house.Store(newHouse(ctx, hostports))
}

// Describe implements prometheus.Collector: the notifier's metrics,
// lockgate_callbacks_total and lockgate_callback_attempts_total.
func (n *Notifier) Describe(ch chan<- *prometheus.Desc) {
	n.total.Describe(ch)
	n.attempts.Describe(ch)
	ch <- n.depthD
	ch <- n.oldestD
	ch <- n.openD
}

// Collect implements prometheus.Collector.
func (n *Notifier) Collect(ch chan<- prometheus.Metric) {
	n.total.Collect(ch)
	n.attempts.Collect(ch)
	now := time.Now()
	n.mu.Lock()
	depth, oldest, open := n.depth, n.oldest(), 0
	for _, h := range n.hosts {
		if h.open(now) {
			open++
		}
	}
	n.mu.Unlock()
	wait := 0.0
	if !oldest.IsZero() {
		wait = now.Sub(oldest).Seconds()
	}
	ch <- prometheus.MustNewConstMetric(n.depthD, prometheus.GaugeValue, float64(depth))
	ch <- prometheus.MustNewConstMetric(n.oldestD, prometheus.GaugeValue, wait)
	ch <- prometheus.MustNewConstMetric(n.openD, prometheus.GaugeValue, float64(open))
}

// Check accepts a callback URL the allow-list allows (see AllowList.Check),
// unless it names one of the addresses RefuseHouse named.
func (n *Notifier) Check(raw string) (Destination, error) {
	d, err := n.cfg.Allow.Check(raw)
	if err == nil && n.house.Load().refusesURL(d.hostname, d.port) {
		return Destination{}, fmt.Errorf("%w: %s is this gateway's own listener, its pprof listener or its Redis, which callbacks never reach", ErrNotAllowed, d.host)
	}
	return d, err
}

// TicketSecret is the secret that signs the notifications of ticket of
// lock (see Secret.ForTicket): its caller's to verify them with.
func (n *Notifier) TicketSecret(lock, ticket string) Secret {
	return n.cfg.Secret.ForTicket(lock, ticket)
}

// Notify queues h for delivery; it never blocks.
func (n *Notifier) Notify(h Handed) {
	id := make([]byte, 16)
	crand.Read(id)
	n.enqueue(&notification{Handed: h, id: "msg_" + base64.RawURLEncoding.EncodeToString(id)})
}

func (n *Notifier) enqueue(nt *notification) {
	n.mu.Lock()
	defer n.mu.Unlock()
	switch {
	case n.closed:
		n.total.WithLabelValues(OutcomeFailed).Inc()
		return
	case n.depth >= n.cfg.Queue:
		n.total.WithLabelValues(OutcomeFailed).Inc()
		n.cfg.Logger.Warn().Str("callback_host", nt.Dest.host).Msg("callback dropped: the queue is full")
		return
	case n.perSubject[nt.Subject] >= n.cfg.SubjectQueue:
		n.total.WithLabelValues(OutcomeFailed).Inc()
		n.cfg.Logger.Warn().Str("callback_host", nt.Dest.host).Msg("callback dropped: its subject's share of the queue is full")
		return
	}
	key := queueKey{subject: nt.Subject, dest: nt.Dest.host}
	q := n.queues[key]
	if q == nil {
		q = &queue{key: key}
		n.queues[key] = q
		n.ring = append(n.ring, q)
	}
	if n.hosts[key.dest] == nil {
		n.hosts[key.dest] = &host{}
	}
	nt.queued = time.Now()
	q.items = append(q.items, nt)
	n.depth++
	n.perSubject[nt.Subject]++
	n.cond.Signal()
}

func (n *Notifier) work() {
	n.mu.Lock()
	defer n.mu.Unlock()
	for {
		nt, ok := n.pick(time.Now())
		for !ok && !n.closed {
			n.cond.Wait()
			nt, ok = n.pick(time.Now())
		}
		if n.closed {
			if ok {
				n.total.WithLabelValues(OutcomeFailed).Inc()
			}
			return
		}
		n.mu.Unlock()
		failed := n.deliver(nt)
		n.mu.Lock()
		n.finished(nt, failed, time.Now())
	}
}

// deliver makes one attempt, and schedules the next after a backoff
// unless it succeeded, was refused, or the next would come after the
// pick-up time. It reports whether the destination failed to answer, for
// its circuit breaker.
func (n *Notifier) deliver(nt *notification) (failed bool) {
	if !time.Now().Before(nt.PickUpBy) {
		n.total.WithLabelValues(OutcomeExpired).Inc()
		return false
	}
	outcome, status := n.attempt(nt)
	n.attempts.WithLabelValues(outcome).Inc()
	switch outcome {
	case attemptOK:
		n.total.WithLabelValues(OutcomeDelivered).Inc()
		return false
	case attemptRefused:
		n.total.WithLabelValues(OutcomeRefused).Inc()
		n.cfg.Logger.Warn().Str("callback_host", nt.Dest.host).Msg("callback refused: its host resolves to an address that is not public, and no --callback-allow pattern names that address, or to one of the gateway's own")
		return false
	}
	failed = outcome == attemptError || status >= 500
	if n.ctx.Err() != nil {
		n.total.WithLabelValues(OutcomeFailed).Inc()
		return failed
	}
	nt.attempt++
	wait := backoff(nt.attempt)
	if !time.Now().Add(wait).Before(nt.PickUpBy) {
		n.total.WithLabelValues(OutcomeExpired).Inc()
		n.cfg.Logger.Warn().Str("callback_host", nt.Dest.host).Int("attempts", nt.attempt).Int("status", status).
			Msg("callback not delivered within the grant's pick-up time")
		return failed
	}
	n.cfg.Logger.Debug().Str("callback_host", nt.Dest.host).Int("attempt", nt.attempt).Int("status", status).
		Dur("retry_in", wait).Msg("callback attempt failed")
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.closed {
		n.total.WithLabelValues(OutcomeFailed).Inc()
		return failed
	}
	n.timers[nt] = time.AfterFunc(wait, func() {
		n.mu.Lock()
		_, waiting := n.timers[nt]
		delete(n.timers, nt)
		n.mu.Unlock()
		if waiting {
			n.enqueue(nt)
		}
	})
	return failed
}

// backoff is the wait before attempt n (1 for the first retry): doubling
// from 250 ms up to 30 s, less up to half of it at random, so that the
// retries of many notifications to one receiver spread out.
func backoff(n int) time.Duration {
	d := 30 * time.Second
	if n < 8 {
		d = min(d, 250*time.Millisecond<<(n-1))
	}
	return d - rand.N(d/2)
}

// body is what a notification says (Standard Webhooks' payload shape).
type body struct {
	Type      string    `json:"type"`
	Timestamp time.Time `json:"timestamp"`
	Data      data      `json:"data"`
}

type data struct {
	Lock           string `json:"lock"`
	Ticket         string `json:"ticket"`
	PollURL        string `json:"poll_url"`
	PickUpWithinMs int64  `json:"pick_up_within_ms"`
}

// TypeTicketGranted is the type of a notification of a grant handed to a
// ticket.
const TypeTicketGranted = "ticket.granted"

// attempt sends nt once, and returns the attempt's outcome and status.
func (n *Notifier) attempt(nt *notification) (outcome string, status int) {
	now := time.Now()
	b, err := json.Marshal(body{Type: TypeTicketGranted, Timestamp: now.UTC().Truncate(time.Millisecond), Data: data{
		Lock: nt.Lock, Ticket: nt.Ticket, PollURL: nt.PollURL,
		PickUpWithinMs: max(nt.PickUpBy.Sub(now).Milliseconds(), 0),
	}})
	if err != nil {
		return attemptError, 0
	}
	ctx, cancel := context.WithTimeout(n.ctx, n.cfg.AttemptTimeout)
	defer cancel()
	ctx, cancelAt := context.WithDeadline(ctx, nt.PickUpBy)
	defer cancelAt()
	if nt.Dest.allowIP.IsValid() {
		ctx = context.WithValue(ctx, allowedAddress{}, nt.Dest.allowIP)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, nt.Dest.url, bytes.NewReader(b))
	if err != nil {
		return attemptError, 0
	}
	ts := now.Unix()
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "lockgate-callbacks")
	req.Header.Set(HeaderID, nt.id)
	req.Header.Set(HeaderTimestamp, fmt.Sprint(ts))
	req.Header.Set(HeaderSignature, n.TicketSecret(nt.Lock, nt.Ticket).sign(nt.id, ts, b))
	resp, err := n.client.Do(req)
	if err != nil {
		if errors.Is(err, ErrRefusedAddress) {
			return attemptRefused, 0
		}
		return attemptError, 0
	}
	defer resp.Body.Close()
	io.Copy(io.Discard, io.LimitReader(resp.Body, 4<<10))
	if resp.StatusCode >= 200 && resp.StatusCode < 300 {
		return attemptOK, resp.StatusCode
	}
	return attemptStatus, resp.StatusCode
}

// Close stops the workers: attempts in flight are cancelled, and what
// waits in the queue or for a retry is dropped, counted failed. The
// tickets stay, and their polls still pick their grants up.
func (n *Notifier) Close() {
	n.mu.Lock()
	if n.closed {
		n.mu.Unlock()
		return
	}
	n.closed = true
	for nt, t := range n.timers {
		if t.Stop() {
			n.total.WithLabelValues(OutcomeFailed).Inc()
		}
		delete(n.timers, nt)
	}
	n.total.WithLabelValues(OutcomeFailed).Add(float64(n.depth))
	n.ring, n.queues, n.depth = nil, map[queueKey]*queue{}, 0
	n.perSubject = map[string]int{}
	n.cond.Broadcast()
	n.mu.Unlock()
	n.cancel()
	n.workers.Wait()
}
