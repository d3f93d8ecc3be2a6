package embedded

import (
	"context"
	"time"

	"github.com/lockgate/lockgate/locks"
)

// historyKeep is how long the embedded backend keeps the history of a lock
// after its last event, as the Redis backend keeps it for the fencing
// counter's retention.
const historyKeep = 24 * time.Hour

// memHistory is the embedded backend's history of one lock.
type memHistory struct {
	events []locks.Event // oldest first
	last   time.Time
	index  int64 // the newest event's Index
	begin  int64 // the index before its first event
}

// first reports whether h still keeps its first event (see
// locks.ChangeAfter).
func (h *memHistory) first() bool {
	return len(h.events) == 0 || h.events[0].Index == h.begin+1
}

// eventLocked records what happened to key. m.mu must be held.
func (m *Backend) eventLocked(key locks.Key, kind string, at time.Time, g *memGrant) {
	e := locks.Event{Kind: kind, At: at.UTC(), Subject: g.subject, Owner: g.owner, FencingToken: g.fence}
	if kind == "acquired" || kind == "handed_over" || kind == "value_changed" {
		e.Value = g.value
	}
	m.recordLocked(key, e)
}

// recordLocked adds e to key's history. m.mu must be held.
func (m *Backend) recordLocked(key locks.Key, e locks.Event) {
	if m.opts.History <= 0 {
		return
	}
	h := m.histories[key]
	if h == nil {
		// Its index starts from the clock (see locks.Watcher): above every
		// index of a backend that ran before this one, and of the histories
		// this one forgot, whatever the clock did.
		begin := max(time.Now().UnixMicro(), m.forgotten)
		h = &memHistory{index: begin, begin: begin}
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
func (m *Backend) History(_ context.Context, key locks.Key) ([]locks.Event, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.expireLocked(key, time.Now())
	h := m.histories[key]
	if h == nil {
		return nil, nil
	}
	events := make([]locks.Event, len(h.events))
	for i, e := range h.events {
		events[len(events)-1-i] = e
	}
	return events, nil
}

// pruneHistoriesLocked forgets the histories idle for historyKeep. m.mu
// must be held.
func (m *Backend) pruneHistoriesLocked(now time.Time) {
	for key, h := range m.histories {
		if now.Sub(h.last) > historyKeep {
			m.forgetHistoryLocked(key)
		}
	}
}

// forgetHistoryLocked forgets key's history: the next begins above its
// index. m.mu must be held.
func (m *Backend) forgetHistoryLocked(key locks.Key) {
	if h := m.histories[key]; h != nil {
		m.forgotten = max(m.forgotten, h.index)
		delete(m.histories, key)
	}
}
