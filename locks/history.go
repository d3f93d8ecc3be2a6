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
// change of its grant's value (see Valuer), and a grant whose hard cap
// (AcquireRequest.MaxHold) ended it (max_hold, where a lease that ended
// before its cap says expired). Redis keeps a kind as its
// place in this list (lua/lib_history.lua EVENT_KINDS): a new kind goes
// at the end.
var EventKinds = []string{"acquired", "handed_over", "re_entered", "renewed", "released", "expired", "broken", "waiter_dropped", "value_changed", "max_hold"}

// Historian is what a backend offers for lock histories.
type Historian interface {
	// History returns the last events of the lock, newest first, at most
	// as many as the backend was configured to keep (none when 0).
	History(ctx context.Context, key Key) ([]Event, error)
}
