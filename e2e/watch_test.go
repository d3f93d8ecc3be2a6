package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lockgate/lockgate/internal/redistest"
)

// sse is one server-sent event as lockgate sends it.
type sse struct {
	kind string
	id   int64
	data string
}

// openStream opens an event stream of url, from lastID when it is not
// empty, and returns its events; they stop, and the channel closes, when
// ctx ends or the stream does.
func openStream(ctx context.Context, t *testing.T, url, lastID string, headers ...string) <-chan sse {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, "GET", url, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Accept", "text/event-stream")
	if lastID != "" {
		req.Header.Set("Last-Event-ID", lastID)
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("open stream: %v", err)
	}
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "text/event-stream" {
		resp.Body.Close()
		t.Fatalf("open stream: got %d %s, want 200 text/event-stream", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	out := make(chan sse, 64)
	go func() {
		defer close(out)
		defer resp.Body.Close()
		sc := bufio.NewScanner(resp.Body)
		var e sse
		for sc.Scan() {
			line := sc.Text()
			switch {
			case line == "":
				if e.kind != "" {
					select {
					case out <- e:
					case <-ctx.Done():
						return
					}
				}
				e = sse{}
			case strings.HasPrefix(line, "event: "):
				e.kind = line[len("event: "):]
			case strings.HasPrefix(line, "id: "):
				e.id, _ = strconv.ParseInt(line[len("id: "):], 10, 64)
			case strings.HasPrefix(line, "data: "):
				e.data = line[len("data: "):]
			}
		}
	}()
	return out
}

// next returns the stream's next event, failing the test when none comes
// within 10 s.
func next(t *testing.T, events <-chan sse) sse {
	t.Helper()
	select {
	case e, ok := <-events:
		if !ok {
			t.Fatal("the stream ended")
		}
		return e
	case <-time.After(10 * time.Second):
		t.Fatal("no event within 10s")
	}
	return sse{}
}

// watchReads reads lockgate_watch_reads_total from a gateway's metrics.
func watchReads(t *testing.T, url string) int {
	t.Helper()
	r := call(t, "GET", url+"/metrics", "")
	m := regexp.MustCompile(`(?m)^lockgate_watch_reads_total (\d+)`).FindSubmatch(r.body)
	if m == nil {
		t.Fatalf("no lockgate_watch_reads_total in the metrics")
	}
	n, _ := strconv.Atoi(string(m[1]))
	return n
}

// TestWatchLongPoll: GET with ?index= answers at once when the lock has
// moved past it, else at its first change or at the wait's end, with the
// index in Lockgate-Index; bad input is a 400 problem.
func TestWatchLongPoll(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, b backend) {
		args := b.args(t)
		gw := startGateway(t, append(args, "--history", "10")...)
		auth := bearer(token(t, nil))
		url := gw.URL + "/locks/watch/poll"

		// A lock never taken has index 0, and a long-poll from 0 (nothing
		// seen yet) answers at once, however long its wait: a watcher's
		// first look never waits out a wait.
		ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
		r, err := send(ctx, "GET", url+"?index=0&wait=5m", "", auth...)
		cancel()
		if err != nil {
			t.Fatalf("a long-poll from index 0 on a lock never taken, wait 5m: no answer within 30s (%v), want one at once", err)
		}
		wantProblem(t, r, http.StatusNotFound, "not_held")
		if got := r.header.Get("Lockgate-Index"); got != "0" {
			t.Fatalf("a lock never taken: got Lockgate-Index %q, want 0", got)
		}
		// From 0, at once whatever the index: poll until the answers
		// show the release after an acquire (a gateway learns of changes a
		// moment after they happen). The history's first event is
		// numbered from the clock, in microseconds: an index never repeats.
		g := acquire(t, url, `{"ttl_ms":60000,"owner":"poller"}`)
		call(t, "DELETE", url, "", with(auth, []string{"Lock-Token", g.Token})...)
		var released int64
		for deadline := time.Now().Add(30 * time.Second); ; {
			r = call(t, "GET", url+"?index=0&wait=5m", "", auth...)
			if r.status == http.StatusNotFound {
				released, _ = strconv.ParseInt(r.header.Get("Lockgate-Index"), 10, 64)
				if released > 0 {
					break
				}
			}
			if time.Now().After(deadline) {
				t.Fatalf("after an acquire and a release: %d, Lockgate-Index %q 30s on, want 404 and the release's index", r.status, r.header.Get("Lockgate-Index"))
			}
			time.Sleep(5 * time.Millisecond) // poll interval, not synchronisation
		}
		if released < time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC).UnixMicro() {
			t.Fatalf("the release's index %d: want one from the clock", released)
		}
		// At the lock's index: at its next change.
		polled := callAsync(t, "GET", url+"?index="+strconv.FormatInt(released, 10)+"&wait=30s", "", auth...)
		g = acquire(t, url, `{"ttl_ms":60000,"owner":"poller"}`)
		r = <-polled
		var info struct {
			FencingToken int64  `json:"fencing_token"`
			Owner        string `json:"owner"`
		}
		wantJSON(t, r, http.StatusOK, &info)
		first, err := strconv.ParseInt(r.header.Get("Lockgate-Index"), 10, 64)
		if info.FencingToken != g.FencingToken || err != nil || first != released+1 {
			t.Fatalf("long-poll across an acquire: got %+v, index %q; want fencing token %d, index %d", info, r.header.Get("Lockgate-Index"), g.FencingToken, released+1)
		}
		if got := r.header.Get("Cache-Control"); got != "no-store" {
			t.Fatalf("a long-poll's 200: Cache-Control %q, want no-store", got)
		}
		// Behind: at once.
		call(t, "DELETE", url, "", with(auth, []string{"Lock-Token", g.Token})...)
		r = call(t, "GET", url+"?index="+strconv.FormatInt(first, 10)+"&wait=5m", "", auth...)
		wantProblem(t, r, http.StatusNotFound, "not_held")
		if got, want := r.header.Get("Lockgate-Index"), strconv.FormatInt(first+1, 10); got != want {
			t.Fatalf("after the release: got Lockgate-Index %q, want %s", got, want)
		}
		g = acquire(t, url, `{"ttl_ms":60000,"owner":"poller"}`)
		// A plain GET's 200 is as fresh as its 404 and the long-poll's.
		if r := call(t, "GET", url, "", auth...); r.status != http.StatusOK || r.header.Get("Cache-Control") != "no-store" {
			t.Fatalf("a plain GET of a held lock: got %d, Cache-Control %q; want 200 with no-store", r.status, r.header.Get("Cache-Control"))
		}
		call(t, "DELETE", url, "", with(auth, []string{"Lock-Token", g.Token})...)

		for name, q := range map[string]string{
			"index not a number": "?index=abc",
			"negative index":     "?index=-1",
			"wait not a wait":    "?index=0&wait=forever",
			"wait too long":      "?index=0&wait=6m",
			"wait without index": "?wait=1s",
		} {
			t.Run(name, func(t *testing.T) {
				wantProblem(t, call(t, "GET", url+q, "", auth...), http.StatusBadRequest, "invalid_request")
			})
		}
		other := bearer(token(t, map[string]any{"ns": []string{"elsewhere"}}))
		wantProblem(t, call(t, "GET", url+"?index=0", "", other...), http.StatusForbidden, "forbidden")
		req, _ := http.NewRequestWithContext(t.Context(), "GET", url, nil)
		req.Header.Set("Accept", "text/event-stream")
		req.Header.Set("Authorization", other[1])
		resp, err := http.DefaultClient.Do(req)
		if err != nil || resp.StatusCode != http.StatusForbidden {
			t.Fatalf("a stream of a namespace not granted: got %v, %v; want 403", resp, err)
		}
		resp.Body.Close()

		off := startGateway(t, append(args, "--history", "0")...)
		p := wantProblem(t, call(t, "GET", off.URL+"/locks/watch/poll?index=0", "", auth...), http.StatusBadRequest, "invalid_request")
		if !strings.Contains(p.Detail, "--history") {
			t.Fatalf("--history 0: got detail %q, want it to name --history", p.Detail)
		}
	})
}

// TestWatchLimits: past --max-watchers a watch gets 503 too_many_watchers
// with Retry-After, past its subject's share of waiters 429.
func TestWatchLimits(t *testing.T) {
	t.Parallel()
	gw := startGateway(t, "--history", "10", "--max-watchers", "1", "--subject-max-waiters", "1")
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	alice, bob := bearer(token(t, map[string]any{"sub": "alice"})), bearer(token(t, map[string]any{"sub": "bob"}))
	url := gw.URL + "/locks/watch/limits"
	events := openStream(ctx, t, url, "", alice...)
	next(t, events) // the stream is open, and counted
	wantProblem(t, call(t, "GET", url+"?index=0&wait=10ms", "", alice...), http.StatusTooManyRequests, "too_many_requests")
	r := call(t, "GET", url+"?index=0&wait=10ms", "", bob...)
	wantProblem(t, r, http.StatusServiceUnavailable, "too_many_watchers")
	if r.header.Get("Retry-After") == "" {
		t.Fatal("503 too_many_watchers without Retry-After")
	}
}

// TestWatchStreams is the acceptance test of watches: 100 event streams
// on two gateways of one Redis see every change of a lock, in order, with
// at most one Redis read per change per gateway; a stream that reconnects
// with Last-Event-ID loses none.
func TestWatchStreams(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	gws := []*gateway{
		startGateway(t, "--redis-url", srv.URL(), "--history", "20"),
		startGateway(t, "--redis-url", srv.URL(), "--history", "20"),
	}
	auth := bearer(token(t, nil))
	path := "/locks/watch/streams"
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()

	const watchers = 100
	streams := make([]<-chan sse, watchers)
	for i := range streams {
		streams[i] = openStream(ctx, t, gws[i%2].URL+path, "", auth...)
		if e := next(t, streams[i]); e.kind != "state" || e.id != 0 {
			t.Fatalf("watcher %d: got first event %+v, want state 0", i, e)
		}
	}
	before := []int{watchReads(t, gws[0].URL), watchReads(t, gws[1].URL)}

	// One watcher leaves after the third event, and comes back later.
	leaving, leave := context.WithCancel(ctx)
	defer leave()
	leaver := openStream(leaving, t, gws[1].URL+path, "", auth...)
	next(t, leaver)

	url := gws[0].URL + path
	want := []string{"acquired", "value_changed", "released", "acquired", "expired", "acquired", "released", "handed_over", "released"}
	g := acquire(t, url, `{"ttl_ms":60000,"value":"v1"}`)
	call(t, "PUT", url+"/value", `{"value":"v2"}`, with(auth, []string{"Lock-Token", g.Token})...)
	call(t, "DELETE", url, "", with(auth, []string{"Lock-Token", g.Token})...)
	// The history's first event is numbered from the clock (see
	// locks.Watcher), each next one more.
	var first int64
	for i := range 3 {
		e := next(t, leaver)
		if i == 0 {
			first = e.id
		}
		if e.kind != want[i] || e.id != first+int64(i) || first < time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC).UnixMicro() {
			t.Fatalf("the leaving watcher: got %+v, want %s %d (the first from the clock)", e, want[i], first+int64(i))
		}
	}
	leave()
	acquire(t, url, `{"ttl_ms":200}`) // its lease ends with no call on the lock
	waitFree(t, url, auth)
	g = acquire(t, url, `{"ttl_ms":60000}`)
	waiter := callAsync(t, "POST", gws[1].URL+path, `{"ttl_ms":60000,"wait_ms":30000}`, auth...)
	waitForQueued(t, url, 1)
	call(t, "DELETE", url, "", with(auth, []string{"Lock-Token", g.Token})...)
	var w grant
	wantJSON(t, <-waiter, http.StatusCreated, &w)
	call(t, "DELETE", url, "", with(auth, []string{"Lock-Token", w.Token})...)

	var wg sync.WaitGroup
	errs := make(chan error, watchers+1)
	check := func(name string, events <-chan sse, from int) {
		defer wg.Done()
		for i := from; i < len(want); i++ {
			select {
			case e := <-events:
				if e.kind != want[i] || e.id != first+int64(i) {
					errs <- fmt.Errorf("%s: event %d: got %s %d, want %s %d", name, i+1, e.kind, e.id, want[i], first+int64(i))
					return
				}
				if strings.Contains(e.data, g.Token) || strings.Contains(e.data, w.Token) {
					errs <- fmt.Errorf("%s: an event shows a token: %s", name, e.data)
					return
				}
			case <-time.After(10 * time.Second):
				errs <- fmt.Errorf("%s: no event %d (%s) within 10s", name, i+1, want[i])
				return
			}
		}
	}
	for i, s := range streams {
		wg.Add(1)
		go check(fmt.Sprintf("watcher %d", i), s, 0)
	}
	// The watcher that left resumes from the last event it got.
	wg.Add(1)
	go check("the watcher that came back", openStream(ctx, t, gws[0].URL+path, strconv.FormatInt(first+2, 10), auth...), 3)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	// Each change was read once per gateway, whatever its number of
	// watchers: a release and the hand-over it makes are one change (one
	// script). One read more is allowed: the expiry, which no call makes,
	// is read at each gateway's timer, and a hint from the other gateway
	// that arrives while that read is on its way starts another (under
	// load, once in a full make test: "9 Redis reads for 8 changes").
	// Fifty watchers reading on their own would be fifty a change.
	changes := len(want) - 1
	for i, gw := range gws {
		reads := watchReads(t, gw.URL) - before[i]
		t.Logf("gateway %d: %d Redis reads for %d changes, %d watchers", i, reads, changes, watchers/2)
		if reads > changes+1 {
			t.Errorf("gateway %d: %d Redis reads for %d changes (%d watchers), want at most one per change", i, reads, changes, watchers/2)
		}
	}
}

// TestWatchEndsAtShutdown: a gateway that shuts down ends its event
// streams and long-polls at once (a long-poll answers the state it has),
// so they do not hold the shutdown up.
func TestWatchEndsAtShutdown(t *testing.T) {
	t.Parallel()
	gw := startGateway(t, "--history", "10", "--shutdown-timeout", "30s")
	auth := bearer(token(t, nil))
	url := gw.URL + "/locks/watch/shutdown"
	acquire(t, url, `{"ttl_ms":60000}`) // a long-poll from 0 would answer at once
	events := openStream(t.Context(), t, url, "", auth...)
	next(t, events)
	index := call(t, "GET", url+"?index=0", "", auth...).header.Get("Lockgate-Index") // the acquire's
	polled := callAsync(t, "GET", url+"?index="+index+"&wait=5m", "", auth...)
	waitUntil(t, "two watchers", func() bool {
		return strings.Contains(string(call(t, "GET", gw.URL+"/metrics", "").body), "lockgate_active_watchers 2")
	})
	start := time.Now()
	if err := gw.stop(); err != nil {
		t.Fatalf("stop: %v", err)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Fatalf("the shutdown took %v with a watch open", d)
	}
	if r := <-polled; r.status != http.StatusOK || r.header.Get("Lockgate-Index") != index {
		t.Fatalf("the long-poll at shutdown: got %d %q, want 200 with Lockgate-Index %s", r.status, r.header.Get("Lockgate-Index"), index)
	}
	for range events {
	} // the stream ends
}

// waitUntil polls cond until it holds, for at most 10 s.
func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("no %s within 10s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestWatchShortWait: a long-poll's wait bounds only its wait for a
// change, not the read of the lock's state. Long-polls with wait=1ms on
// locks this gateway watches for the first time (each needs its first
// read, bounded by the Redis timeout as a plain GET's is) answer that
// state, never 503: at once when their index is behind, or 0 on a lock
// never taken; at the wait's end when it is current. One whose index is
// current waits its wait out.
func TestWatchShortWait(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, b backend) {
		args := append(b.args(t), "--history", "10")
		gw := startGateway(t, args...)
		// The indexes are learnt from another gateway, so that gw reads
		// each lock for the first time in its long-poll (the embedded
		// backend has no other to ask, and no first read).
		probe := gw
		if b.name == "redis" {
			probe = startGateway(t, args...)
		}
		// The client dials a connection for each concurrent long-poll, and
		// keeps those a request did not need: unused, they would hold the
		// gateway's shutdown up for 5 s (net/http's grace for a new one).
		t.Cleanup(http.DefaultClient.CloseIdleConnections)
		auth := bearer(token(t, nil))
		const polls = 50 // of each kind
		type lock struct {
			path  string
			token int64  // its fencing token; 0: never taken
			index string // its index now
			after string // the long-poll's
		}
		locksOf := make([]lock, 3*polls)
		for i := range locksOf {
			l := &locksOf[i]
			l.path = fmt.Sprintf("/locks/watch/short-%d", i)
			if i%3 == 2 {
				l.index, l.after = "0", "0" // never taken
				continue
			}
			l.token = acquire(t, probe.URL+l.path, `{"ttl_ms":600000,"owner":"short"}`).FencingToken
			r := call(t, "GET", probe.URL+l.path+"?index=0", "", auth...)
			if r.status != http.StatusOK {
				t.Fatalf("%s after its acquire: got %d, want 200", l.path, r.status)
			}
			l.index = r.header.Get("Lockgate-Index")
			l.after = "1" // behind: the history's first index is from the clock
			if i%3 == 1 {
				l.after = l.index // current
			}
		}
		answers := make([]<-chan response, len(locksOf))
		for i, l := range locksOf {
			answers[i] = callAsync(t, "GET", gw.URL+l.path+"?index="+l.after+"&wait=1ms", "", auth...)
		}
		failed := 0
		for i, l := range locksOf {
			r := <-answers[i]
			var got struct {
				FencingToken int64  `json:"fencing_token"`
				Code         string `json:"code"`
			}
			err := json.Unmarshal(r.body, &got)
			ok := err == nil && r.header.Get("Lockgate-Index") == l.index
			if l.token == 0 {
				ok = ok && r.status == http.StatusNotFound && got.Code == "not_held"
			} else {
				ok = ok && r.status == http.StatusOK && got.FencingToken == l.token
			}
			if !ok {
				if failed++; failed <= 3 {
					t.Errorf("long-poll of %s from index %s, wait=1ms: got %d, Lockgate-Index %q, body %s; want Lockgate-Index %s and 200 with fencing token %d (404 not_held if 0)",
						l.path, l.after, r.status, r.header.Get("Lockgate-Index"), bytes.TrimSpace(r.body), l.index, l.token)
				}
			}
		}
		if failed > 0 {
			t.Fatalf("%d of %d long-polls with wait=1ms did not answer the lock's state", failed, len(locksOf))
		}

		// At the current index, the wait is waited out, and answered with
		// the state at that index.
		l := locksOf[1]
		const wait = 300 * time.Millisecond
		start := time.Now()
		ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
		r, err := send(ctx, "GET", gw.URL+l.path+"?index="+l.index+"&wait=300ms", "", auth...)
		cancel()
		if err != nil {
			t.Fatalf("a long-poll at the current index, wait=300ms: no answer within 30s (%v)", err)
		}
		if took := time.Since(start); r.status != http.StatusOK || r.header.Get("Lockgate-Index") != l.index || took < wait {
			t.Fatalf("a long-poll at the current index, wait=300ms: got %d, Lockgate-Index %q after %v; want 200, %s after the wait", r.status, r.header.Get("Lockgate-Index"), took, l.index)
		}
	})
}
