package locks

import (
	"context"
	"fmt"
)

// Watcher is what a backend offers for watching locks. A lock's index is
// the number of its newest event (Event.Index), 0 while its history keeps
// none: it grows by one with every event, so a watcher that has seen index
// N has seen every event up to N, and asks for those after it.
type Watcher interface {
	// Watch returns what changed on key's lock after index after: at once
	// when the lock's index is not after, else as soon as it changes. When
	// ctx ends first it returns the lock's state at after, with ctx's
	// error. An index below 0 asks for the lock's index and state now, at
	// once, with no events. A backend that keeps no history (History 0)
	// cannot number events, and answers ErrInvalid.
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
	// history keeps fewer than happened since (or began again, after it
	// expired). Events are those it keeps, and the state is the lock's now.
	Missed bool
	// Held says whether anyone holds the lock; Info describes the holders
	// then, as Inspect does.
	Held bool
	Info Info
}

// ErrWatchesOff refuses a watch on a backend that keeps no history.
var ErrWatchesOff = fmt.Errorf("%w: watches need the history of locks (History above 0)", ErrInvalid)

// ChangeAfter is the change from index after to a lock whose last events
// are kept (oldest first, numbered up to index), held as info says.
func ChangeAfter(after, index int64, kept []Event, held bool, info Info) Change {
	c := Change{Index: index, Held: held, Info: info}
	if index == after || after < 0 {
		return c
	}
	first := 0
	for first < len(kept) && kept[first].Index <= after {
		first++
	}
	c.Events = kept[first:]
	// Lost: the oldest event kept after the watcher's is not the next one,
	// or the index went back (the history expired and began again).
	c.Missed = after > index || (len(c.Events) > 0 && c.Events[0].Index != after+1) ||
		(len(c.Events) == 0 && index > after)
	return c
}
