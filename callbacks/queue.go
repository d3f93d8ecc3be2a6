package callbacks

import (
	"time"
)

// The notifier's queues: one per subject and destination (host:port),
// served in turn, so that no tenant's receiver, however slow, keeps
// another's notification waiting for a worker. An attempt runs only while
// its destination has fewer than PerHost attempts in flight, its subject
// fewer than PerSubject, and its destination's circuit breaker lets it.

// queue holds the notifications of one subject to one destination, in
// the order they came.
type queue struct {
	key   queueKey
	items []*notification
}

type queueKey struct{ subject, dest string }

// host is what the notifier knows of one destination: its attempts in
// flight and its circuit breaker.
type host struct {
	inflight int
	// failures counts the attempts in a row that got no answer or a 5xx;
	// at breakerFailures the breaker opens until openUntil, and then lets
	// one attempt through (probing) to decide whether it closes.
	failures  int
	openUntil time.Time
	cooldown  time.Duration
	probing   bool
}

// The circuit breaker: after breakerFailures failed attempts in a row, a
// destination gets none for breakerCooldown, doubled at each failed probe
// up to breakerMaxCooldown. Its notifications wait in its queue meanwhile,
// and expire there if their pick-up time ends.
const (
	breakerFailures    = 5
	breakerCooldown    = 2 * time.Second
	breakerMaxCooldown = time.Minute
)

// allows reports whether h may take one more attempt now.
func (h *host) allows(now time.Time, perHost int) bool {
	switch {
	case h.inflight >= perHost:
		return false
	case h.failures < breakerFailures:
		return true
	case now.Before(h.openUntil), h.probing:
		return false
	}
	return true
}

// record updates the breaker with the outcome of an attempt.
func (h *host) record(failed bool, now time.Time) {
	wasProbe := h.probing
	h.probing = false
	if !failed {
		h.failures, h.cooldown = 0, 0
		return
	}
	h.failures++
	if h.failures < breakerFailures {
		return
	}
	switch {
	case h.cooldown == 0:
		h.cooldown = breakerCooldown
	case wasProbe:
		h.cooldown = min(2*h.cooldown, breakerMaxCooldown)
	}
	h.openUntil = now.Add(h.cooldown)
}

// open reports whether h's breaker is open now.
func (h *host) open(now time.Time) bool {
	return h.failures >= breakerFailures && now.Before(h.openUntil)
}

// pick takes the next notification that may be attempted now, from the
// first queue after the last one served that may run one, and counts it in
// flight. Its caller holds n.mu.
func (n *Notifier) pick(now time.Time) (*notification, bool) {
	for i := range len(n.ring) {
		at := (n.next + i) % len(n.ring)
		q := n.ring[at]
		h := n.hosts[q.key.dest]
		if !h.allows(now, n.cfg.PerHost) || n.subjects[q.key.subject] >= n.cfg.PerSubject {
			continue
		}
		nt := q.items[0]
		q.items[0] = nil
		q.items = q.items[1:]
		n.depth--
		n.perSubject[q.key.subject]--
		if len(q.items) == 0 {
			n.ring = append(n.ring[:at], n.ring[at+1:]...)
			delete(n.queues, q.key)
			n.next = at
		} else {
			n.next = at + 1
		}
		if n.perSubject[q.key.subject] == 0 {
			delete(n.perSubject, q.key.subject)
		}
		if h.failures >= breakerFailures {
			h.probing = true
		}
		h.inflight++
		n.subjects[q.key.subject]++
		return nt, true
	}
	return nil, false
}

// finished counts an attempt of nt done, with whether it failed for the
// breaker, and wakes the workers: a place is free. Its caller holds n.mu.
func (n *Notifier) finished(nt *notification, failed bool, now time.Time) {
	h := n.hosts[nt.Dest.host]
	h.inflight--
	h.record(failed, now)
	if h.open(now) {
		// Wake a worker when it may probe again.
		time.AfterFunc(h.openUntil.Sub(now), func() {
			n.mu.Lock()
			n.cond.Broadcast()
			n.mu.Unlock()
		})
	}
	if h.inflight == 0 && !h.open(now) && !n.hasQueue(nt.Dest.host) {
		delete(n.hosts, nt.Dest.host)
	}
	if n.subjects[nt.Subject]--; n.subjects[nt.Subject] == 0 {
		delete(n.subjects, nt.Subject)
	}
	n.cond.Broadcast()
}

// hasQueue reports whether some queue waits for dest.
func (n *Notifier) hasQueue(dest string) bool {
	for _, q := range n.ring {
		if q.key.dest == dest {
			return true
		}
	}
	return false
}

// oldest is when the longest-waiting notification was queued, or the zero
// time. Its caller holds n.mu.
func (n *Notifier) oldest() time.Time {
	var t time.Time
	for _, q := range n.ring {
		if at := q.items[0].queued; t.IsZero() || at.Before(t) {
			t = at
		}
	}
	return t
}
