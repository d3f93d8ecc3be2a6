package handlers

import (
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/lockgate/lockgate/locks"
)

// Contention, for the dashboard's picture: what this gateway saw of the
// waits on each lock and semaphore over the last minutes, in buckets of
// contentionStep: how many of its callers waited at once, at most, and
// how long the waits that ended took. It is the gateway's own count, kept
// in memory as acquires start and end waiting, so that drawing it costs
// the backend nothing, however many watch; a gateway sees its own
// callers only (the listing's waiters count those of every gateway).
const (
	contentionStep    = 5 * time.Second
	contentionBuckets = 60 // five minutes
	// contentionKeys bounds the resources followed at once; past it, a
	// new one is not followed until an old one has been quiet for the
	// whole window.
	contentionKeys = 10000
)

type contention struct {
	mu    sync.Mutex
	byKey map[contentionKey]*contentionSeries
	// semaphores are those this gateway served an acquire of (waiting or
	// not), by namespace and name, with when it last did: the dashboard's
	// list of semaphores, which no backend can list. At most
	// contentionKeys in all, as the series.
	semaphores map[string]map[string]time.Time
	nSems      int
}

// contentionWindow is how far back the dashboard is shown.
const contentionWindow = contentionBuckets * contentionStep

// semaphoreServed records an acquire of the semaphore key at now.
func (c *contention) semaphoreServed(key locks.Key, now time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	names := c.semaphores[key.Namespace]
	if _, ok := names[key.Name]; !ok {
		if c.nSems >= contentionKeys && !c.pruneSemsLocked(now) {
			return
		}
		if c.semaphores == nil {
			c.semaphores = make(map[string]map[string]time.Time)
		}
		names = c.semaphores[key.Namespace] // the pruning may have dropped it
		if names == nil {
			names = make(map[string]time.Time)
			c.semaphores[key.Namespace] = names
		}
		c.nSems++
	}
	names[key.Name] = now
}

// pruneSemsLocked forgets the semaphores not served within the window,
// and reports whether it forgot any.
func (c *contention) pruneSemsLocked(now time.Time) bool {
	n := c.nSems
	for ns, names := range c.semaphores {
		for name, at := range names {
			if now.Sub(at) > contentionWindow {
				delete(names, name)
				c.nSems--
			}
		}
		if len(names) == 0 {
			delete(c.semaphores, ns)
		}
	}
	return c.nSems < n
}

// ServedSemaphore is a semaphore this gateway served an acquire of.
type ServedSemaphore struct {
	Name string `json:"name"`
	// LastSeen is when, ms since the epoch.
	LastSeen int64 `json:"last_seen"`
}

// servedSemaphores returns the semaphores of namespace served within the
// window, by name.
func (c *contention) servedSemaphores(namespace string, now time.Time) []ServedSemaphore {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := []ServedSemaphore{}
	for name, at := range c.semaphores[namespace] {
		if now.Sub(at) <= contentionWindow {
			out = append(out, ServedSemaphore{Name: name, LastSeen: at.UnixMilli()})
		}
	}
	slices.SortFunc(out, func(a, b ServedSemaphore) int { return strings.Compare(a.Name, b.Name) })
	return out
}

type contentionKey struct {
	kind string // "lock" or "semaphore" (grantor.noun)
	key  locks.Key
}

type contentionSeries struct {
	waiting int   // callers of this gateway waiting now
	last    int64 // the newest bucket's number
	buckets [contentionBuckets]contentionBucket
}

// contentionBucket is one step of a series; n is its number (time since
// the epoch / contentionStep), which tells a live slot of the ring from
// one left from an earlier lap.
type contentionBucket struct {
	n                          int64
	startAt, maxWaiting, endAt int // how many waited as it began, at most, and at its last change
	waits                      int
	waitTotal, waitMax         time.Duration
}

func bucketOf(t time.Time) int64 { return t.UnixMilli() / contentionStep.Milliseconds() }

// bucket returns s's bucket for step n, started afresh with the waiting
// level of now if it was not in use.
func (s *contentionSeries) bucket(n int64) *contentionBucket {
	b := &s.buckets[n%contentionBuckets]
	if b.n != n {
		*b = contentionBucket{n: n, startAt: s.waiting, maxWaiting: s.waiting, endAt: s.waiting}
	}
	s.last = max(s.last, n)
	return b
}

// waitStarted counts one more caller waiting for key.
func (c *contention) waitStarted(kind string, key locks.Key, now time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	k := contentionKey{kind, key}
	s := c.byKey[k]
	if s == nil {
		if c.byKey == nil {
			c.byKey = make(map[contentionKey]*contentionSeries)
		}
		if len(c.byKey) >= contentionKeys && !c.pruneLocked(bucketOf(now)) {
			return
		}
		s = &contentionSeries{}
		c.byKey[k] = s
	}
	b := s.bucket(bucketOf(now))
	s.waiting++
	b.maxWaiting, b.endAt = max(b.maxWaiting, s.waiting), s.waiting
}

// waitEnded counts a caller's wait for key over, after waited, however it
// ended (granted, timed out, cancelled).
func (c *contention) waitEnded(kind string, key locks.Key, now time.Time, waited time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := c.byKey[contentionKey{kind, key}]
	if s == nil || s.waiting == 0 {
		return // not followed (see contentionKeys)
	}
	b := s.bucket(bucketOf(now))
	s.waiting--
	b.endAt = s.waiting
	b.waits++
	b.waitTotal += waited
	b.waitMax = max(b.waitMax, waited)
}

// pruneLocked forgets the series that have been quiet for the whole
// window, and reports whether it forgot any.
func (c *contention) pruneLocked(now int64) bool {
	n := len(c.byKey)
	for k, s := range c.byKey {
		if s.waiting == 0 && s.last <= now-contentionBuckets {
			delete(c.byKey, k)
		}
	}
	return len(c.byKey) < n
}

// ContentionPoint is one step of a series, as the dashboard draws it.
type ContentionPoint struct {
	// At is the step's start, ms since the epoch.
	At int64 `json:"at"`
	// Waiters is the most callers of this gateway waiting at once.
	Waiters int `json:"waiters"`
	// Waits counts the waits that ended; WaitMsMax and WaitMsAvg are how
	// long they took, at most and on average.
	Waits     int   `json:"waits"`
	WaitMsMax int64 `json:"wait_ms_max"`
	WaitMsAvg int64 `json:"wait_ms_avg"`
}

// ContentionSeries is what the gateway saw of one lock or semaphore.
type ContentionSeries struct {
	Name    string            `json:"name"`
	Kind    string            `json:"kind"`
	Waiting int               `json:"waiting"`
	Points  []ContentionPoint `json:"points"`
}

// Contention is the answer of GET /ui/api/contention.
type Contention struct {
	Namespace string             `json:"namespace"`
	StepMs    int64              `json:"step_ms"`
	Now       int64              `json:"now"`
	Series    []ContentionSeries `json:"series"`
	// Semaphores are those of the namespace this gateway served an
	// acquire of within the window, waiting or not.
	Semaphores []ServedSemaphore `json:"semaphores"`
}

// snapshot returns the series of namespace that saw a wait within the
// window, by name, each with a point for every step of the window.
func (c *contention) snapshot(namespace string, now time.Time) Contention {
	out := Contention{Namespace: namespace, StepMs: contentionStep.Milliseconds(), Now: now.UnixMilli(), Series: []ContentionSeries{},
		Semaphores: c.servedSemaphores(namespace, now)}
	cur := bucketOf(now)
	first := cur - contentionBuckets + 1
	c.mu.Lock()
	defer c.mu.Unlock()
	for k, s := range c.byKey {
		if k.key.Namespace != namespace || (s.waiting == 0 && s.last < first) {
			continue
		}
		cs := ContentionSeries{Name: k.key.Name, Kind: k.kind, Waiting: s.waiting, Points: make([]ContentionPoint, 0, contentionBuckets)}
		// Before the window's first bucket in use, as many waited as when
		// it began (as now, when none is in use); across a gap, as many as
		// the bucket before left.
		level := s.waiting
		for n := first; n <= cur; n++ {
			if b := &s.buckets[n%contentionBuckets]; b.n == n {
				level = b.startAt
				break
			}
		}
		for n := first; n <= cur; n++ {
			p := ContentionPoint{At: n * contentionStep.Milliseconds(), Waiters: level}
			if b := &s.buckets[n%contentionBuckets]; b.n == n {
				p.Waiters = b.maxWaiting
				level = b.endAt
				p.Waits = b.waits
				p.WaitMsMax = b.waitMax.Milliseconds()
				if b.waits > 0 {
					p.WaitMsAvg = (b.waitTotal / time.Duration(b.waits)).Milliseconds()
				}
			}
			cs.Points = append(cs.Points, p)
		}
		out.Series = append(out.Series, cs)
	}
	slices.SortFunc(out.Series, func(a, b ContentionSeries) int {
		if a.Name != b.Name {
			if a.Name < b.Name {
				return -1
			}
			return 1
		}
		if a.Kind < b.Kind {
			return -1
		}
		return 1
	})
	return out
}
