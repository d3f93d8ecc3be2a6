package locks

import (
	"context"
	"fmt"
)

// Watcher is what a backend offers for watching locks. A lock's index is
// the number of its newest event (Event.Index), 0 while its history keeps
// none: it grows by one with every event, so a watcher that has seen index
// N has seen every event up to N, and asks for those after it. A history
// that begins (the lock's first event, or the first after the backend lost
// or dropped its history: Redis restarted empty, the name record expired,
// an idle history pruned) starts its index from the backend's clock in
// microseconds, as fencing tokens do: an index never repeats, as long as a
// lock's events came fewer than one per microsecond on average, so a
// watcher with an index of a lost history learns that it missed events,
// and does not take the new ones for those it saw. Index 0 is a watcher
// that has seen no event: it misses none while the history still keeps
// its first.
type Watcher interface {
	// Watch returns what changed on key's lock after index after: at once
	// when the lock's index is not after, else as soon as it changes. When
	// ctx ends first it returns the lock's state at after, with ctx's
	// error; a backend that had not read the lock yet has no state to
	// return then, and fails with ErrUnavailable, so a caller whose ctx
	// bounds a short wait looks first (below). An index below 0 asks for
	// the lock's index and state now, at once, with no events. A backend
	// that keeps no history (History 0) cannot number events, and answers
	// ErrInvalid.
	Watch(ctx context.Context, key Key, after int64) (Change, error)
}

// Change is what a watch returns: the lock's events after the index the
// watcher had, and its state at the newest of them.
type Change struct {
	// Index is the lock's index (see Watcher).
	Index int64
	// Events are the events after the watcher's index, oldest first.
	Events []Event
	// Missed says that events after the watcher's index are lost: the
	// history keeps fewer than happened since, or it was lost and began
	// again (see Watcher). Events are those it keeps, and the state is the
	// lock's now.
	Missed bool
	// Held says whether anyone holds the lock; Info describes the holders
	// then, as Inspect does.
	Held bool
	Info Info
}

// ErrWatchesOff refuses a watch on a backend that keeps no history.
var ErrWatchesOff = fmt.Errorf("%w: watches need the history of locks (History above 0)", ErrInvalid)

// ChangeAfter is the change from index after to a lock whose last events
// are kept (oldest first, numbered up to index), held as info says. first
// says that kept begins with the first event of the lock's history (or is
// empty): a watcher that has seen no event (index 0) then missed none.
func ChangeAfter(after, index int64, kept []Event, first, held bool, info Info) Change {
	c := Change{Index: index, Held: held, Info: info}
	if index == after || after < 0 {
		return c
	}
	n := 0
	for n < len(kept) && kept[n].Index <= after {
		n++
	}
	c.Events = kept[n:]
	switch {
	case after > index:
		// The index went back: the history was lost, and began again
		// before the clock passed the watcher's index.
		c.Missed = true
	case after == 0:
		c.Missed = !first
	default:
		// Lost: the oldest event kept after the watcher's is not the next
		// one. A history that began again numbers its events above every
		// index of the one before (see Watcher): an index of that one is
		// never followed by the next.
		c.Missed = len(c.Events) == 0 || c.Events[0].Index != after+1
	}
	return c
}
