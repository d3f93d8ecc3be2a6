package safety

import (
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// scene is a scripted run on one lock. It checks every 201 against Redis
// the moment it arrives (the grant must be the one Redis holds), and puts
// every grant in a history for the checker of history_test.go.
type scene struct {
	t    *testing.T
	rc   *redis.Client // straight to Redis, past every gateway
	lock string        // ns/name
	key  string        // the lock's hash, with the default prefix
	h    *history
	res  *resource
}

func newScene(t *testing.T, rc *redis.Client, lock string, h *history, res *resource) *scene {
	return &scene{t: t, rc: rc, lock: lock, key: "lockgate:{" + lock + "}", h: h, res: res}
}

// holding is a grant a scene's client holds.
type holding struct {
	who string
	g   grant
	rec *grantRec
}

// granted records a 201 and checks at once that Redis holds that very
// grant: a 201 for a grant that is not live when the gateway answers is a
// second holder in the making. It returns false when the check failed.
func (s *scene) granted(who string, o op, g grant) (*holding, bool) {
	fence, err := s.rc.HGet(s.t.Context(), s.key, "fence").Result()
	live := err == nil && fence == strconv.FormatInt(g.FencingToken, 10)
	if !live {
		if err != nil {
			fence = "nothing (" + err.Error() + ")"
		}
		s.t.Errorf("%s: %s got 201 with fencing token %d, but Redis holds %s: the grant was not live when the gateway answered",
			s.lock, who, g.FencingToken, fence)
	}
	rec := &grantRec{lock: s.lock, fence: g.FencingToken, acquired: o, known: g.ExpiresAt}
	ww := grantWrite{call: time.Now(), known: rec.known}
	ww.accepted = s.res.write(s.lock, g.FencingToken)
	ww.ret = time.Now()
	rec.writes = append(rec.writes, ww)
	return &holding{who: who, g: g, rec: rec}, live
}

// acquire makes one acquire on c and records it; the holding is nil
// unless it answered 201.
func (s *scene) acquire(c *client, who string, ttl, wait time.Duration) (*holding, result, bool) {
	o := op{lock: s.lock, kind: opAcquire, call: time.Now()}
	g, r := c.acquire(s.t.Context(), s.lock, ttl, wait)
	o.ret, o.status = time.Now(), r.status
	if r.err != nil {
		o.status = 0
	}
	if o.status != http.StatusCreated {
		s.h.record(o)
		return nil, r, true
	}
	o.fence, o.expires = g.FencingToken, g.ExpiresAt
	s.h.record(o)
	hd, live := s.granted(who, o, g)
	return hd, r, live
}

// take acquires without waiting, and fails the test unless it gets the lock.
func (s *scene) take(c *client, who string, ttl time.Duration) *holding {
	s.t.Helper()
	hd, r, _ := s.acquire(c, who, ttl, 0)
	if hd == nil {
		s.t.Fatalf("%s: %s: acquire: got %s, want 201", s.lock, who, r)
	}
	return hd
}

// release releases hd on c, records it and returns the answer.
func (s *scene) release(c *client, hd *holding) result {
	o := op{lock: s.lock, kind: opRelease, fence: hd.g.FencingToken, call: time.Now()}
	hd.rec.releaseCall = o.call
	r := c.release(s.t.Context(), s.lock, hd.g.Token)
	o.ret, o.status = time.Now(), r.status
	if r.err != nil {
		o.status = 0
	}
	s.h.record(o)
	if o.status == http.StatusNoContent {
		hd.rec.released = &o
	}
	s.h.addGrant(hd.rec)
	return r
}

// mustRelease releases hd and fails the test unless it answers 204: a
// grant released under its holder answers 409.
func (s *scene) mustRelease(c *client, hd *holding) {
	s.t.Helper()
	if r := s.release(c, hd); r.status != http.StatusNoContent {
		s.t.Fatalf("%s: %s's release (fencing token %d): got %s, want 204", s.lock, hd.who, hd.g.FencingToken, r)
	}
}

// waiting is a waiting acquire run in the background.
type waiting struct {
	who     string
	granted chan struct{} // closed on a 201
	done    chan struct{} // closed when it has answered (and released)
	// Set before done is closed:
	res  result
	call time.Time
	ret  time.Time
	hd   *holding
	rel  result // the answer to its release, after a 201
}

// wait starts a waiting acquire on c. When it gets the lock, it checks at
// once that Redis holds that grant, holds the lock until hold is closed
// (nil: not at all), then releases it; a release that does not answer 204
// after a live grant fails the test: the grant was taken from under it.
func (s *scene) wait(c *client, who string, ttl, wait time.Duration, hold <-chan struct{}) *waiting {
	w := &waiting{who: who, granted: make(chan struct{}), done: make(chan struct{})}
	w.call = time.Now()
	go func() {
		defer close(w.done)
		hd, r, live := s.acquire(c, who, ttl, wait)
		w.res, w.ret, w.hd = r, time.Now(), hd
		if hd == nil {
			return
		}
		close(w.granted)
		if hold != nil {
			select {
			case <-hold:
			case <-s.t.Context().Done():
			}
		}
		w.rel = s.release(c, hd)
		if live && w.rel.status != http.StatusNoContent {
			s.t.Errorf("%s: %s's release (fencing token %d): got %s, want 204: its grant was released under it",
				s.lock, who, hd.g.FencingToken, w.rel)
		}
	}()
	return w
}

func (w *waiting) answered() bool {
	select {
	case <-w.done:
		return true
	default:
		return false
	}
}

// await waits for w's answer (and release), for at most d.
func (w *waiting) await(t *testing.T, d time.Duration) {
	t.Helper()
	select {
	case <-w.done:
	case <-time.After(d):
		t.Fatalf("%s: no answer within %v", w.who, d)
	}
}

// queue is the lock's queue of waiter ids, first in line first.
func (s *scene) queue() []string {
	ids, err := s.rc.ZRange(s.t.Context(), s.key+":queue", 0, -1).Result()
	if err != nil {
		s.t.Fatalf("%s: read the queue: %v", s.lock, err)
	}
	return ids
}

// queued polls until n waiters are queued, and returns their ids.
func (s *scene) queued(n int) []string {
	s.t.Helper()
	var ids []string
	eventually(s.t, 10*time.Second, strconv.Itoa(n)+" waiters queued on "+s.lock, func() bool {
		ids = s.queue()
		return len(ids) == n
	})
	return ids
}

// poll polls cond every few ms until it holds or d passes, and reports
// whether it held.
func poll(d time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(5 * time.Millisecond) // poll interval, not synchronisation
	}
	return true
}
