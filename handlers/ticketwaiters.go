package handlers

import (
	"crypto/sha256"
	"crypto/subtle"
	"sync"
	"time"

	"github.com/lockgate/lockgate/ratelimit"
)

// ticketWaiters counts the tickets opened on this gateway against their
// subject's cap on waiters (--subject-max-waiters), from the 202 until
// the ticket leaves: a poll here finds it granted or gone, it is closed
// here, or its wait runs out. A ticket that leaves through another
// gateway stays counted here until its wait would have run out (at most
// --max-wait): the cap errs on the side of counting. Only the ticket's
// token ends the count, so that nobody (its owner included) uncounts a
// ticket that lives on by polling it with another token.
type ticketWaiters struct {
	mu sync.Mutex
	m  map[string]*ticketWaiter // by ticket id
}

type ticketWaiter struct {
	tokenHash [sha256.Size]byte
	w         ratelimit.Waiting
	timer     *time.Timer
}

// add counts the ticket id, whose token is token, until it leaves or wait
// has passed; a w that counts against no cap is not kept.
func (tw *ticketWaiters) add(id, token string, w ratelimit.Waiting, wait time.Duration) {
	if !w.Counted() {
		return
	}
	tw.mu.Lock()
	defer tw.mu.Unlock()
	if tw.m == nil {
		tw.m = make(map[string]*ticketWaiter)
	}
	e := &ticketWaiter{tokenHash: sha256.Sum256([]byte(token)), w: w}
	e.timer = time.AfterFunc(wait, func() { tw.end(id, e) })
	tw.m[id] = e
}

// counted reports whether ticket id counts here, and token is its own.
func (tw *ticketWaiters) counted(id, token string) bool {
	tw.mu.Lock()
	defer tw.mu.Unlock()
	return tw.lookup(id, token) != nil
}

// done stops counting ticket id, if token is its own.
func (tw *ticketWaiters) done(id, token string) {
	tw.mu.Lock()
	e := tw.lookup(id, token)
	tw.mu.Unlock()
	if e != nil {
		tw.end(id, e)
	}
}

func (tw *ticketWaiters) lookup(id, token string) *ticketWaiter {
	e := tw.m[id]
	if e == nil {
		return nil
	}
	h := sha256.Sum256([]byte(token))
	if subtle.ConstantTimeCompare(h[:], e.tokenHash[:]) != 1 {
		return nil
	}
	return e
}

// end stops counting e, once, if it is still ticket id's entry.
func (tw *ticketWaiters) end(id string, e *ticketWaiter) {
	tw.mu.Lock()
	if tw.m[id] != e {
		tw.mu.Unlock()
		return
	}
	delete(tw.m, id)
	tw.mu.Unlock()
	e.timer.Stop()
	e.w.Done()
}
