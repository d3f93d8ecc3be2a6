package handlers

import (
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/lockgate/lockgate/locks"
	"github.com/lockgate/lockgate/locks/embedded"
)

// TestSemaphoreGetShowsQueuePriorities: a semaphore's GET states its
// queue's priorities in serving order, as a lock's does, and leaves them
// out while nobody waits.
func TestSemaphoreGetShowsQueuePriorities(t *testing.T) {
	mem := embedded.New(embedded.Options{})
	_, ts := newTestServer(t, mem)
	ctx := context.Background()
	key := locks.Key{Namespace: "prio", Name: "pool"}
	sem := func(p int, wait time.Duration) locks.SemaphoreRequest {
		return locks.SemaphoreRequest{Limit: 1, AcquireRequest: locks.AcquireRequest{TTL: time.Minute, Wait: wait, Priority: p}}
	}
	if _, err := mem.AcquirePermit(ctx, key, sem(0, 0)); err != nil {
		t.Fatal(err)
	}
	type semState struct {
		Waiters         int    `json:"waiters"`
		QueuePriorities *[]int `json:"queue_priorities"`
	}
	get := func() semState {
		t.Helper()
		var st semState
		getJSON(t, ts.URL+"/semaphores/prio/pool", &st)
		return st
	}
	if st := get(); st.QueuePriorities != nil {
		t.Fatalf("nobody waits: got queue_priorities %v, want none", *st.QueuePriorities)
	}
	waiting, cancel := context.WithCancel(t.Context())
	done := make(chan struct{}, 2)
	defer func() {
		cancel()
		<-done
		<-done
	}()
	for i, p := range []int{2, 8} {
		go func() {
			mem.AcquirePermit(waiting, key, sem(p, time.Minute))
			done <- struct{}{}
		}()
		pollUntil(t, "a waiter to queue", func() bool { return get().Waiters == i+1 })
	}
	if st := get(); st.QueuePriorities == nil || !slices.Equal(*st.QueuePriorities, []int{8, 2}) {
		t.Fatalf("got queue_priorities %v, want [8 2]", st.QueuePriorities)
	}
}

// getJSON GETs url with a test token, and decodes its 200.
func getJSON(t *testing.T, url string, v any) http.Header {
	t.Helper()
	req, _ := http.NewRequestWithContext(t.Context(), "GET", url, nil)
	req.Header.Set("Authorization", "Bearer "+testToken(t))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: status %d, want 200", url, resp.StatusCode)
	}
	if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	return resp.Header
}

// pollUntil polls cond until it holds, for at most 10 seconds.
func pollUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("waited 10s for %s", what)
		}
		time.Sleep(5 * time.Millisecond) // polling
	}
}
