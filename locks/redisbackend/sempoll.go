package redisbackend

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/lockgate/lockgate/locks"
)

// semPolls shares the reads of a semaphore among this gateway's watches
// of it. A watch reads the semaphore itself when it comes, so that it is
// answered from a read sent after it came; while the index stays the one
// it has seen, it waits on the semaphore's poll: one read every
// semWatchPoll, however many watches wait. So Redis reads a watched
// semaphore five times a second per gateway, not per watch (before, 100
// watches of one semaphore cost Redis 500 reads a second). The semaphore
// scripts still send no hint: a semaphore nobody watches costs nothing
// more to use.
type semPolls struct {
	read  func(locks.Key) (locks.SemaphoreWatch, error)
	every time.Duration
	// onRound, when not nil, sees each read of a poll with the number of
	// watches waiting on it (tests count reads with it).
	onRound func(key locks.Key, watches int)

	mu     sync.Mutex
	polls  map[locks.Key]*semPoll
	closed bool
	done   chan struct{}
	// running counts the polls' goroutines, for close to wait for a read
	// in flight.
	running sync.WaitGroup
}

// semPoll is the poll of one semaphore, its fields semPolls.mu's.
type semPoll struct {
	watches int
	// sent counts the reads sent, and w and err are the last read's
	// answer, read the sent-th: a watch takes only answers of reads sent
	// after it joined, which an earlier read, slower to come back, could
	// otherwise answer with an index older than the one it has seen.
	sent, answered int
	w              locks.SemaphoreWatch
	err            error
	// next is closed when a read's answer is in, and replaced.
	next chan struct{}
}

// errSemPollsClosed is a watch's answer when the backend closes.
var errSemPollsClosed = errors.New("the backend is closing")

func newSemPolls(every time.Duration, read func(locks.Key) (locks.SemaphoreWatch, error)) *semPolls {
	return &semPolls{read: read, every: every, polls: make(map[locks.Key]*semPoll), done: make(chan struct{})}
}

// wait returns the semaphore's state as soon as a read sent after the call
// finds its index other than after, or ctx's error with the last state
// read (w, the watch's own first read, when none came since).
func (s *semPolls) wait(ctx context.Context, key locks.Key, after int64, w locks.SemaphoreWatch) (locks.SemaphoreWatch, error) {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return w, errSemPollsClosed
	}
	p := s.polls[key]
	if p == nil {
		p = &semPoll{next: make(chan struct{})}
		s.polls[key] = p
		s.running.Go(func() { s.run(key, p) })
	}
	p.watches++
	joined := p.sent
	defer func() {
		s.mu.Lock()
		p.watches--
		s.mu.Unlock()
	}()
	for {
		next := p.next
		s.mu.Unlock()
		select {
		case <-next:
		case <-ctx.Done():
			return w, ctx.Err()
		}
		s.mu.Lock()
		if p.answered <= joined {
			continue // a read sent before this watch joined
		}
		if p.err != nil {
			err := p.err
			s.mu.Unlock()
			return w, err
		}
		w = p.w
		if w.Index != after {
			s.mu.Unlock()
			return w, nil
		}
	}
}

// run reads the semaphore every s.every while a watch waits on p, and
// stops when none does or the backend closes.
func (s *semPolls) run(key locks.Key, p *semPoll) {
	tick := time.NewTicker(s.every)
	defer tick.Stop()
	for {
		select {
		case <-tick.C:
		case <-s.done:
			s.mu.Lock()
			p.answered, p.err = p.sent+1, errSemPollsClosed
			close(p.next)
			s.mu.Unlock()
			return
		}
		s.mu.Lock()
		if p.watches == 0 {
			delete(s.polls, key)
			s.mu.Unlock()
			return
		}
		p.sent++
		sent, watches := p.sent, p.watches
		s.mu.Unlock()
		if s.onRound != nil {
			s.onRound(key, watches)
		}
		w, err := s.read(key)
		s.mu.Lock()
		p.answered, p.w, p.err = sent, w, err
		close(p.next)
		p.next = make(chan struct{})
		s.mu.Unlock()
	}
}

// close ends every poll: the watches waiting on one are answered
// errSemPollsClosed, and none starts after. It returns once no read of a
// poll is in flight (each ends within the Redis timeout).
func (s *semPolls) close() {
	s.mu.Lock()
	if !s.closed {
		s.closed = true
		close(s.done)
	}
	s.mu.Unlock()
	s.running.Wait()
}
