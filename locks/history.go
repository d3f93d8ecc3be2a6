package locks

import (
	"context"
	"time"
)

// Event is one thing that happened to a lock, as its history records it.
type Event struct {
	// Kind is one of the EventKinds.
	Kind string
	// At is when it happened, on the backend's clock.
	At time.Time
	// Subject and Owner are the grant's (or the waiter's).
	Subject string
	Owner   string
	// FencingToken is the grant's; 0 for a waiter.
	FencingToken int64
	// By is, for a grant someone else ended (broken), who did: the
	// breaker's subject.
	By string
	// Value is the value the event gave the grant (acquired, handed_over,
	// value_changed); "" for none.
	Value string
	// Session is, for a grant released because its session ended (see
	// Sessions), that session's id.
	Session string
	// Index numbers the lock's events: one more than the event before it
	// (see Watcher).
	Index int64
}

// EventKinds are the kinds of events a history records: a grant to a
// caller that asked (acquired) or to a waiter by someone else's release or
// the end of a lease (handed_over), a re-entry, a renewal, a release, a
// lease that ended unreleased (expired, at the lease's end), a grant ended
// by an administrator (broken, see Breaker), a waiter dropped from the
// queue because its gateway stopped keeping it alive, and a holder's
// change of its grant's value (see Valuer). Redis keeps a kind as its
// place in this list (lua/lib_history.lua EVENT_KINDS): a new kind goes
// at the end.
var EventKinds = []string{"acquired", "handed_over", "re_entered", "renewed", "released", "expired", "broken", "waiter_dropped", "value_changed"}

// Historian is what a backend offers for lock histories.
type Historian interface {
	// History returns the last events of the lock, newest first, at most
	// as many as the backend was configured to keep (none when 0).
	History(ctx context.Context, key Key) ([]Event, error)
}

// History implements Historian. The scripts write the events under the
// lock's hash tag as they change the lock (see lua/lib_history.lua event).
func (r *Redis) History(ctx context.Context, key Key) ([]Event, error) {
	if r.opts.History <= 0 {
		return nil, nil
	}
	events, err := r.callHistory(ctx, key)
	if err != nil {
		return nil, unavailable("history", resource{lockKind, key}, err)
	}
	return events, nil
}

// historyKeep is how long the embedded backend keeps the history of a lock
// after its last event, as the Redis backend keeps it for the fencing
// counter's retention.
const historyKeep = 24 * time.Hour

// memHistory is the embedded backend's history of one lock.
type memHistory struct {
	events []Event // oldest first
	last   time.Time
	index  int64 // the newest event's Index
}

// eventLocked records what happened to key. m.mu must be held.
func (m *Memory) eventLocked(key Key, kind string, at time.Time, g *memGrant) {
	e := Event{Kind: kind, At: at.UTC(), Subject: g.subject, Owner: g.owner, FencingToken: g.fence}
	if kind == "acquired" || kind == "handed_over" || kind == "value_changed" {
		e.Value = g.value
	}
	m.recordLocked(key, e)
}

// recordLocked adds e to key's history. m.mu must be held.
func (m *Memory) recordLocked(key Key, e Event) {
	if m.opts.History <= 0 {
		return
	}
	h := m.histories[key]
	if h == nil {
		h = &memHistory{}
		m.histories[key] = h
	}
	if len(h.events) == m.opts.History {
		copy(h.events, h.events[1:])
		h.events = h.events[:len(h.events)-1]
	}
	h.index++
	e.Index = h.index
	h.events = append(h.events, e)
	h.last = e.At
	if w := m.watched[key]; w != nil {
		close(w)
		delete(m.watched, key)
	}
}

// History implements Historian.
func (m *Memory) History(_ context.Context, key Key) ([]Event, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.expireLocked(key, time.Now())
	h := m.histories[key]
	if h == nil {
		return nil, nil
	}
	events := make([]Event, len(h.events))
	for i, e := range h.events {
		events[len(events)-1-i] = e
	}
	return events, nil
}

// pruneHistoriesLocked forgets the histories idle for historyKeep. m.mu
// must be held.
func (m *Memory) pruneHistoriesLocked(now time.Time) {
	for key, h := range m.histories {
		if now.Sub(h.last) > historyKeep {
			delete(m.histories, key)
		}
	}
}
