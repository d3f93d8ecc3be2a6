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
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"
)

// Config configures a Notifier.
type Config struct {
	// Allow is the allow-list. Default: none, and every callback URL is
	// refused.
	Allow *AllowList
	// Secret signs the notifications. Required when Allow allows any.
	Secret Secret
	// Workers is how many notifications are sent at once. Default 4.
	Workers int
	// Queue is how many notifications wait for a worker (first attempts
	// and retries alike); one more is dropped, counted failed. Default 1000.
	Queue int
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
// pool of workers, so that a slow receiver never holds up a lock.
type Notifier struct {
	cfg      Config
	client   *http.Client
	queue    chan *notification
	total    *prometheus.CounterVec
	attempts *prometheus.CounterVec

	mu      sync.Mutex
	closed  bool
	timers  map[*notification]*time.Timer // retries waiting out their backoff
	ctx     context.Context               // cancelled by Close: ends attempts in flight
	cancel  context.CancelFunc
	workers sync.WaitGroup
}

// Handed is one grant handed to a ticket, to tell its caller about.
type Handed struct {
	Dest Destination
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
}

// New returns a Notifier whose workers run until Close.
func New(cfg Config) (*Notifier, error) {
	if !cfg.Allow.Empty() && cfg.Secret.IsZero() {
		return nil, errors.New("callbacks: a secret is required to sign notifications")
	}
	if cfg.Workers <= 0 {
		cfg.Workers = 4
	}
	if cfg.Queue <= 0 {
		cfg.Queue = 1000
	}
	if cfg.AttemptTimeout <= 0 {
		cfg.AttemptTimeout = 5 * time.Second
	}
	n := &Notifier{
		cfg:   cfg,
		queue: make(chan *notification, cfg.Queue),
		client: &http.Client{
			Transport: &http.Transport{
				Proxy:                  nil, // a proxy would connect where the address checks cannot see
				DialContext:            dialer(cfg.AttemptTimeout),
				DisableKeepAlives:      true, // every attempt connects, and is checked, anew
				TLSHandshakeTimeout:    cfg.AttemptTimeout,
				ResponseHeaderTimeout:  cfg.AttemptTimeout,
				MaxResponseHeaderBytes: 16 << 10,
				ForceAttemptHTTP2:      true,
			},
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		},
		total: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "lockgate_callbacks_total",
			Help: "Notifications of grants handed to tickets, by outcome: delivered, refused (the destination's address is not allowed), expired (the pick-up time ended first), failed (dropped: queue full, shutdown).",
		}, []string{"outcome"}),
		attempts: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "lockgate_callback_attempts_total",
			Help: "Attempts to deliver notifications, by outcome: ok (2xx), status (any other status, redirects included), error (no answer), refused (not connected).",
		}, []string{"outcome"}),
		timers: make(map[*notification]*time.Timer),
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

// Describe implements prometheus.Collector: the notifier's metrics,
// lockgate_callbacks_total and lockgate_callback_attempts_total.
func (n *Notifier) Describe(ch chan<- *prometheus.Desc) {
	n.total.Describe(ch)
	n.attempts.Describe(ch)
}

// Collect implements prometheus.Collector.
func (n *Notifier) Collect(ch chan<- prometheus.Metric) {
	n.total.Collect(ch)
	n.attempts.Collect(ch)
}

// Check accepts a callback URL the allow-list allows (see AllowList.Check).
func (n *Notifier) Check(raw string) (Destination, error) { return n.cfg.Allow.Check(raw) }

// Notify queues h for delivery; it never blocks.
func (n *Notifier) Notify(h Handed) {
	id := make([]byte, 16)
	crand.Read(id)
	n.enqueue(&notification{Handed: h, id: "msg_" + base64.RawURLEncoding.EncodeToString(id)})
}

func (n *Notifier) enqueue(nt *notification) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.closed {
		n.total.WithLabelValues(OutcomeFailed).Inc()
		return
	}
	select {
	case n.queue <- nt:
	default:
		n.total.WithLabelValues(OutcomeFailed).Inc()
		n.cfg.Logger.Warn().Str("callback_host", nt.Dest.host).Msg("callback dropped: the queue is full")
	}
}

func (n *Notifier) work() {
	for {
		select {
		case <-n.ctx.Done():
			return
		case nt := <-n.queue:
			n.deliver(nt)
		}
	}
}

// deliver makes one attempt, and schedules the next after a backoff
// unless it succeeded, was refused, or the next would come after the
// pick-up time.
func (n *Notifier) deliver(nt *notification) {
	if !time.Now().Before(nt.PickUpBy) {
		n.total.WithLabelValues(OutcomeExpired).Inc()
		return
	}
	outcome, status := n.attempt(nt)
	n.attempts.WithLabelValues(outcome).Inc()
	switch outcome {
	case attemptOK:
		n.total.WithLabelValues(OutcomeDelivered).Inc()
		return
	case attemptRefused:
		n.total.WithLabelValues(OutcomeRefused).Inc()
		n.cfg.Logger.Warn().Str("callback_host", nt.Dest.host).Msg("callback refused: its host resolves to an address that is not public, and no --callback-allow pattern names that address")
		return
	}
	if n.ctx.Err() != nil {
		n.total.WithLabelValues(OutcomeFailed).Inc()
		return
	}
	nt.attempt++
	wait := backoff(nt.attempt)
	if !time.Now().Add(wait).Before(nt.PickUpBy) {
		n.total.WithLabelValues(OutcomeExpired).Inc()
		n.cfg.Logger.Warn().Str("callback_host", nt.Dest.host).Int("attempts", nt.attempt).Int("status", status).
			Msg("callback not delivered within the grant's pick-up time")
		return
	}
	n.cfg.Logger.Debug().Str("callback_host", nt.Dest.host).Int("attempt", nt.attempt).Int("status", status).
		Dur("retry_in", wait).Msg("callback attempt failed")
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.closed {
		n.total.WithLabelValues(OutcomeFailed).Inc()
		return
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
	req.Header.Set(HeaderSignature, n.cfg.Secret.sign(nt.id, ts, b))
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
	n.mu.Unlock()
	n.cancel()
	n.workers.Wait()
	for {
		select {
		case <-n.queue:
			n.total.WithLabelValues(OutcomeFailed).Inc()
		default:
			return
		}
	}
}
