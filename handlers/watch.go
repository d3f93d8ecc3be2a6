package handlers

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/lockgate/lockgate/locks"
	"github.com/lockgate/lockgate/middleware"
)

// The bounds of a watch (see inspectLock in openapi.yaml).
const (
	// DefaultWatchWait is a long-poll's wait without ?wait=.
	DefaultWatchWait = time.Minute
	// MaxWatchWait bounds ?wait=: a long-poll answers within it, so that
	// proxies with idle timeouts of minutes do not cut it first.
	MaxWatchWait = 5 * time.Minute
	// streamKeepAlive is how often an idle event stream gets a comment
	// line, under the idle timeouts of proxies and load balancers.
	streamKeepAlive = 15 * time.Second
	// watchWriteTimeout bounds each write of a watch's answer, in place
	// of the server's WriteTimeout, which a watch outlives.
	watchWriteTimeout = 30 * time.Second
)

var (
	errTooManyWatchers        = errors.New("too many watchers")
	errTooManySubjectWatchers = errors.New("too many watchers of one subject")
)

// counts counts what each key holds, against a bound.
type counts struct {
	mu sync.Mutex
	n  map[string]int
}

// add counts one more for key unless it holds max already.
func (c *counts) add(key string, max int) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.n == nil {
		c.n = make(map[string]int)
	}
	if c.n[key] >= max {
		return false
	}
	c.n[key]++
	return true
}

func (c *counts) done(key string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.n[key]--; c.n[key] <= 0 {
		delete(c.n, key)
	}
}

// eventStreamKey marks, in a request's context, a request that accepts an
// event stream (see acceptsEventStream).
type eventStreamKey struct{}

// acceptsEventStream is the strict middleware that tells InspectLock that
// its caller asked for an event stream: Accept is no parameter of the spec
// (OpenAPI ignores one), so the request's header is read here.
func acceptsEventStream(f StrictHandlerFunc, operationID string) StrictHandlerFunc {
	if operationID != "InspectLock" {
		return f
	}
	return func(ctx context.Context, w http.ResponseWriter, r *http.Request, req any) (any, error) {
		if strings.Contains(r.Header.Get("Accept"), "text/event-stream") {
			ctx = context.WithValue(ctx, eventStreamKey{}, true)
		}
		return f(ctx, w, r, req)
	}
}

// watch is what the watches of locks and of semaphores share: the
// caller's index and wait, when the watch ends, and its count among the
// watchers. Its answer waits for changes, so it is written, and flushed,
// by the response itself, with write deadlines of its own.
type watch struct {
	s     *Server
	ctx   context.Context
	key   locks.Key
	after int64 // the caller's index; -1: none
	wait  time.Duration
	done  func() // ends the watcher's count
	// end is when the watch ends at the latest: its token's exp, or the
	// gateway's longest lifetime; endReason says which, in the stream's
	// last event.
	end       time.Time
	endReason string
}

// lockWatch is a watch of a lock, as InspectLock returns it.
type lockWatch struct {
	*watch
	stream bool
}

// watchParams are a watch's query parameters (see inspectLock in
// openapi.yaml); lastEventID only for an event stream.
type watchParams struct {
	index       *int64
	wait        *string
	lastEventID *string
}

// Why a stream ended, the reason of its end event.
const (
	endTokenExpired = "token_expired"
	endMaxLifetime  = "max_lifetime"
)

// watchLock checks a watch's parameters and limits, and returns the watch.
func (s *Server) watchLock(ctx context.Context, key locks.Key, p InspectLockParams, stream bool) (InspectLockResponseObject, error) {
	if s.cfg.History <= 0 {
		return nil, invalid("this gateway keeps no history of locks (--history 0), which watches need")
	}
	w, err := s.startWatch(ctx, key, watchParams{index: p.Index, wait: p.Wait, lastEventID: p.LastEventID}, stream)
	if err != nil {
		return nil, err
	}
	return &lockWatch{watch: w, stream: stream}, nil
}

// startWatch checks a watch's parameters and limits, and counts it among
// the watchers until its done.
func (s *Server) startWatch(ctx context.Context, key locks.Key, p watchParams, stream bool) (*watch, error) {
	claims, _ := middleware.ClaimsFromContext(ctx)
	w := &watch{s: s, ctx: ctx, key: key, after: -1, wait: DefaultWatchWait,
		end: time.Now().Add(s.cfg.MaxWatchLifetime), endReason: endMaxLifetime}
	if exp := claims.ExpiresAt; !exp.IsZero() && exp.Before(w.end) {
		w.end, w.endReason = exp, endTokenExpired
	}
	if p.index != nil {
		if *p.index < 0 {
			return nil, invalid("index must be 0 or more")
		}
		w.after = *p.index
	}
	if stream && p.lastEventID != nil {
		id, err := strconv.ParseInt(*p.lastEventID, 10, 64)
		if err != nil || id < 0 {
			return nil, invalid("Last-Event-ID must be an index this stream sent: a number, 0 or more")
		}
		w.after = id
	}
	if p.wait != nil {
		if stream || p.index == nil {
			return nil, invalid("wait is for a long-poll, with index")
		}
		d, err := parseWait(*p.wait)
		if err != nil {
			return nil, err
		}
		w.wait = d
	}
	// The subject's share first, as for a waiter: a watch holds a
	// connection as long.
	sw, err := s.cfg.Subjects.StartWait(claims)
	if err != nil {
		return nil, fmt.Errorf("watch %s: %w", key, err)
	}
	who := claims.Identity.String()
	if !s.subjectWatchers.add(who, s.cfg.MaxSubjectWatchers) {
		sw.Done()
		return nil, fmt.Errorf("watch %s: %w", key, errTooManySubjectWatchers)
	}
	if s.watchers.Add(1) > int64(s.cfg.MaxWatchers) {
		s.watchers.Add(-1)
		s.subjectWatchers.done(who)
		sw.Done()
		return nil, fmt.Errorf("watch %s: %w", key, errTooManyWatchers)
	}
	s.metrics.watchers.Inc()
	w.done = func() {
		s.metrics.watchers.Dec()
		s.watchers.Add(-1)
		s.subjectWatchers.done(who)
		sw.Done()
	}
	return w, nil
}

// parseWait reads ?wait=: a Go duration or milliseconds.
func parseWait(v string) (time.Duration, error) {
	d, err := time.ParseDuration(v)
	if ms, msErr := strconv.ParseInt(v, 10, 64); msErr == nil {
		d, err = time.Duration(ms)*time.Millisecond, nil
	}
	if err != nil || d < time.Millisecond || d > MaxWatchWait {
		return 0, invalid("wait must be a duration (30s, 1m30s) or milliseconds (30000), from 1ms to " + MaxWatchWait.String())
	}
	return d, nil
}

// VisitInspectLockResponse implements InspectLockResponseObject.
func (w *lockWatch) VisitInspectLockResponse(rw http.ResponseWriter) error {
	defer w.done()
	if w.stream {
		return w.streamEvents(rw)
	}
	return w.longPoll(rw)
}

// longPoll answers a lock's long-poll (see watch.longPoll).
func (w *lockWatch) longPoll(rw http.ResponseWriter) error {
	return w.watch.longPoll(rw, w.look, func(err error) error { return err })
}

// look is a lock's long-poll's look (see watch.poll); its body is a
// LockInfo.
func (w *lockWatch) look(ctx context.Context, after int64) (polled, error) {
	c, err := w.s.cfg.Backend.Watch(ctx, w.key, after)
	p := polled{index: c.Index, held: c.Held}
	if c.Held {
		p.body = lockInfo(w.key, c.Info)
	}
	return p, err
}

// polled is what a long-poll's look found: the index, whether anyone
// holds, and then the 200's body.
type polled struct {
	index int64
	held  bool
	body  any
}

// longPoll answers as soon as the index of what look reads is not the
// caller's (at once for index 0), or at the wait's end, or when the
// gateway begins to shut down: what a plain GET answers, with the index;
// free words its 404.
func (w *watch) longPoll(rw http.ResponseWriter, look func(ctx context.Context, after int64) (polled, error), free func(error) error) error {
	rc := http.NewResponseController(rw)
	rc.SetWriteDeadline(time.Now().Add(w.pollWait() + watchWriteTimeout))
	p, err := w.poll(look)
	if err != nil {
		return err
	}
	rw.Header().Set("Lockgate-Index", strconv.FormatInt(p.index, 10))
	if !p.held {
		return free(fmt.Errorf("watch %s: %w", w.key, locks.ErrNotHeld))
	}
	return writeJSON(rw, http.StatusOK, p.body)
}

// pollWait is how long a long-poll waits: its wait, never past its
// token's exp.
func (w *watch) pollWait() time.Duration { return max(min(w.wait, time.Until(w.end)), 0) }

// poll is a long-poll's wait: what look reads as soon as its index is not
// the caller's (at once for index 0), or at the wait's end, or when the
// gateway begins to shut down. Its error is the backend's, or the
// caller's leaving, never the wait's end. look(ctx, after) reads as the
// backend's watches do (see locks.Watcher): at once for after below 0.
//
// The wait bounds only the wait for a change. The state it answers is
// read first, bounded as a plain GET's read is (by the backend's own
// timeout, and the caller's leaving): a backend that reads a lock nobody
// watched yet (Redis) cannot answer its state at the caller's index
// before that read, and a wait of a millisecond must not make that read
// a 503.
func (w *watch) poll(look func(ctx context.Context, after int64) (polled, error)) (polled, error) {
	// 0 is "nothing seen yet", a watcher's first look: the state now, at
	// once, even of a lock never taken, whose index is 0 too.
	now, err := look(w.ctx, -1)
	if err != nil || w.after <= 0 || now.index != w.after {
		return now, err
	}
	ctx, cancel := context.WithTimeout(w.ctx, w.pollWait())
	defer cancel()
	stop := context.AfterFunc(w.s.draining, cancel)
	defer stop()
	c, err := look(ctx, w.after)
	if err != nil && (w.ctx.Err() != nil || !waitEnded(err)) {
		return c, err
	}
	return c, nil
}

// streamEvents sends the lock's events as server-sent events, until the
// caller leaves, the gateway shuts down, the backend fails, or the watch's
// end (its token's exp, or the longest lifetime), when an end event says
// why; the caller reconnects with the last id it got, and a token still
// valid.
func (w *lockWatch) streamEvents(rw http.ResponseWriter) error {
	ctx, cancel := context.WithDeadline(w.ctx, w.end)
	defer cancel()
	stop := context.AfterFunc(w.s.draining, cancel)
	defer stop()
	first, err := w.s.cfg.Backend.Watch(ctx, w.key, -1)
	if err != nil {
		return err // nothing sent yet: a problem answers it
	}
	rc := http.NewResponseController(rw)
	h := rw.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-store")
	h.Set("Lockgate-Index", strconv.FormatInt(first.Index, 10))
	rw.WriteHeader(http.StatusOK)
	var buf []byte
	send := func() error {
		rc.SetWriteDeadline(time.Now().Add(watchWriteTimeout))
		if _, err := rw.Write(buf); err != nil {
			return err
		}
		buf = buf[:0]
		return rc.Flush()
	}
	c, after := first, w.after
	if after >= 0 && first.Index != after {
		if c, err = w.s.cfg.Backend.Watch(ctx, w.key, after); err != nil {
			return nil // the caller reconnects, and resumes
		}
	}
	for {
		if after < 0 || c.Missed {
			buf = appendEvent(buf, "state", c.Index, watchState{Index: c.Index, Missed: c.Missed, Held: c.Held, Lock: heldInfo(w.key, c)})
		} else {
			for _, e := range c.Events {
				buf = appendEvent(buf, e.Kind, e.Index, lockEvent(e))
			}
		}
		after = c.Index
		if len(buf) == 0 {
			buf = append(buf, ": keep-alive\n\n"...)
		}
		if err := send(); err != nil || ctx.Err() != nil {
			return w.ended(ctx, send, &buf) // the caller left, the gateway stops, or the watch ends: it reconnects
		}
		idle, cancelIdle := context.WithTimeout(ctx, streamKeepAlive)
		c, err = w.s.cfg.Backend.Watch(idle, w.key, after)
		cancelIdle()
		if ctx.Err() != nil || err != nil && !waitEnded(err) {
			return w.ended(ctx, send, &buf) // the caller left, the gateway stops, the watch ends, or the backend failed: it reconnects
		}
	}
}

// ended sends the stream's end event when its end came (not when the
// caller left, or the gateway stops, or the backend failed).
func (w *watch) ended(ctx context.Context, send func() error, buf *[]byte) error {
	if errors.Is(context.Cause(ctx), context.DeadlineExceeded) && w.ctx.Err() == nil {
		b, _ := json.Marshal(struct {
			Reason string `json:"reason"`
		}{w.endReason})
		*buf = append(append(append((*buf)[:0], "event: end\ndata: "...), b...), "\n\n"...)
		send()
	}
	return nil
}

// waitEnded reports whether a watch's error says only that its own wait
// ran out (or was cut by a shutdown): the change it returns is then the
// state at the caller's index. A backend that failed is unavailable, even
// when its call's own bound, a deadline too, is what failed it: its change
// says nothing.
func waitEnded(err error) bool {
	return !errors.Is(err, locks.ErrUnavailable) && (errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled))
}

// appendEvent appends one server-sent event: its kind, its id (the index)
// and its data, JSON on one line.
func appendEvent(buf []byte, kind string, id int64, data any) []byte {
	b, _ := json.Marshal(data)
	buf = append(buf, "event: "...)
	buf = append(buf, kind...)
	buf = append(buf, "\nid: "...)
	buf = strconv.AppendInt(buf, id, 10)
	buf = append(buf, "\ndata: "...)
	buf = append(buf, b...)
	return append(buf, "\n\n"...)
}

// watchState is the data of an event stream's state event (see
// inspectLock in openapi.yaml).
type watchState struct {
	Index  int64     `json:"index"`
	Missed bool      `json:"missed"`
	Held   bool      `json:"held"`
	Lock   *LockInfo `json:"lock,omitempty"`
}

// heldInfo is the lock of a change, if held.
func heldInfo(key locks.Key, c locks.Change) *LockInfo {
	if !c.Held {
		return nil
	}
	info := lockInfo(key, c.Info)
	return &info
}
