package handlers

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"
	"time"

	"github.com/lockgate/lockgate/locks"
	"github.com/lockgate/lockgate/locks/embedded"
	"github.com/lockgate/lockgate/locks/locktest"
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

// TestLongPollShowsQueuePriorities: a long-poll's answer (GET with index)
// states the queue's priorities as the plain GET does: at once (index 0),
// and in the answer to a change (the hand-off to the first waiter).
func TestLongPollShowsQueuePriorities(t *testing.T) {
	mem := embedded.New(embedded.Options{History: 10})
	_, h := newTestHandler(t, Config{Backend: mem, History: 10})
	ts := httptest.NewServer(h)
	t.Cleanup(ts.Close)
	ctx := context.Background()
	key := locks.Key{Namespace: "prio", Name: "job"}
	g, err := mem.Acquire(ctx, key, locks.AcquireRequest{TTL: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	waiting, cancel := context.WithCancel(t.Context())
	defer cancel()
	var waiters []<-chan locktest.Result
	for i, p := range []int{0, 6, 3} {
		waiters = append(waiters, locktest.AcquireAsync(waiting, mem, key, locks.AcquireRequest{TTL: time.Minute, Wait: time.Minute, Priority: p}))
		locktest.WaitUntilQueued(t, mem, key, i+1)
	}
	type lockState struct {
		QueuePriorities *[]int `json:"queue_priorities"`
	}
	var plain, polled lockState
	getJSON(t, ts.URL+"/locks/prio/job", &plain)
	hdr := getJSON(t, ts.URL+"/locks/prio/job?index=0", &polled)
	if want := []int{6, 3, 0}; plain.QueuePriorities == nil || !slices.Equal(*plain.QueuePriorities, want) ||
		polled.QueuePriorities == nil || !slices.Equal(*polled.QueuePriorities, want) {
		t.Fatalf("GET: queue_priorities %v; long-poll from index 0: %v; want %v in both", plain.QueuePriorities, polled.QueuePriorities, want)
	}
	answer := make(chan lockState, 1)
	failed := make(chan error, 1)
	go func() {
		var st lockState
		if _, err := fetchJSON(t.Context(), ts.URL+"/locks/prio/job?wait=30s&index="+hdr.Get("Lockgate-Index"), testToken(t), &st); err != nil {
			failed <- err
			return
		}
		answer <- st
	}()
	if _, err := mem.Release(ctx, key, g.Token); err != nil {
		t.Fatal(err)
	}
	if res := <-waiters[1]; res.Err != nil {
		t.Fatalf("the priority-6 waiter: %v", res.Err)
	}
	select {
	case err := <-failed:
		t.Fatalf("the long-poll: %v", err)
	case st := <-answer:
		if st.QueuePriorities == nil || !slices.Equal(*st.QueuePriorities, []int{3, 0}) {
			t.Fatalf("the long-poll's answer to the hand-off: queue_priorities %v, want [3 0]", st.QueuePriorities)
		}
	}
}

// getJSON GETs url with a test token, and decodes its 200.
func getJSON(t *testing.T, url string, v any) http.Header {
	t.Helper()
	h, err := fetchJSON(t.Context(), url, testToken(t), v)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// fetchJSON GETs url with token, and decodes its 200; any other status is
// an error.
func fetchJSON(ctx context.Context, url, token string, v any) (http.Header, error) {
	req, err := http.NewRequestWithContext(ctx, "GET", url, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: status %d, want 200", url, resp.StatusCode)
	}
	if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
		return nil, fmt.Errorf("GET %s: %w", url, err)
	}
	return resp.Header, nil
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
