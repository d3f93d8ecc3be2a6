package redisbackend

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/lockgate/lockgate/locks"
)

// TestSemPollsCloseWaitsForTheRead: close returns only once a poll's read
// that was in flight has come back, so that no read of a closed backend
// runs on after its Close (on a client its owner may close next).
func TestSemPollsCloseWaitsForTheRead(t *testing.T) {
	reading, release := make(chan struct{}), make(chan struct{})
	returned := make(chan struct{})
	var first sync.Once
	s := newSemPolls(time.Millisecond, func(locks.Key) (locks.SemaphoreWatch, error) {
		first.Do(func() { // the read in flight; any after it answers at once
			close(reading)
			<-release
			close(returned)
		})
		return locks.SemaphoreWatch{}, nil
	})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go s.wait(ctx, locks.Key{Namespace: "ns", Name: "sem"}, 0, locks.SemaphoreWatch{})
	<-reading
	closed := make(chan struct{})
	go func() {
		s.close()
		close(closed)
	}()
	select {
	case <-closed:
		t.Fatal("close returned while a poll's read was in flight")
	case <-time.After(50 * time.Millisecond):
	}
	close(release)
	<-closed
	select {
	case <-returned:
	default:
		t.Fatal("close returned before the read did")
	}
}
