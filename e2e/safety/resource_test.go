package safety

import (
	"sync"
	"time"
)

// resource is the fake protected resource: it accepts a write for a lock
// only if the write's fencing token is at least the largest it has accepted
// for that lock, as docs/SAFETY.md asks of every real resource. It keeps
// its own log so that the checker can verify it.
type resource struct {
	mu      sync.Mutex
	highest map[string]int64
	log     []write
}

// write is one attempted write, in the order the resource saw them.
type write struct {
	lock     string
	fence    int64
	at       time.Time
	accepted bool
}

func newResource() *resource { return &resource{highest: make(map[string]int64)} }

// write attempts a write carrying fence and reports whether it was accepted.
func (r *resource) write(lock string, fence int64) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	ok := fence >= r.highest[lock]
	if ok {
		r.highest[lock] = fence
	}
	r.log = append(r.log, write{lock: lock, fence: fence, at: time.Now(), accepted: ok})
	return ok
}

// staleAccepted returns the accepted writes whose token was below one the
// resource had accepted before for the same lock: there must be none.
func (r *resource) staleAccepted() []write {
	r.mu.Lock()
	defer r.mu.Unlock()
	seen := make(map[string]int64)
	var bad []write
	for _, w := range r.log {
		if !w.accepted {
			continue
		}
		if w.fence < seen[w.lock] {
			bad = append(bad, w)
		}
		seen[w.lock] = max(seen[w.lock], w.fence)
	}
	return bad
}
