package e2e

import (
	"fmt"
	"net/http"
	"slices"
	"testing"
	"time"
)

// TestPriorityAging is the acceptance of #39's priority waiting, through
// a real gateway on each backend with --priority-aging 1s: ten waiters at
// priority 0 and then one at priority 9, which is served next (GET shows
// the queue's priorities); and a priority-0 waiter behind a stream of
// priority-5 waiters is served before every one of them that arrived more
// than 5 agings after it. The stream is count-based (one more waiter and
// one hand-off a round, the holder working about 50 ms), and the check is
// the order against the arrival times the test saw, not a wall-clock
// bound. A priority out of 0 to 9 is a 400 invalid_priority, for a lock
// or a semaphore, whose permits take one too.
func TestPriorityAging(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, b backend) {
		const aging = time.Second
		gw := startGateway(t, append(b.args(t), "--priority-aging", aging.String())...)
		auth := bearer(token(t, nil))
		url := gw.URL + "/locks/prio/job"
		type lockState struct {
			Owner           string `json:"owner"`
			QueuePriorities []int  `json:"queue_priorities"`
		}
		// next releases g, and returns the owner label of whom the lock
		// went to, and its grant.
		next := func(g grant, waiters map[string]<-chan response) (string, grant) {
			t.Helper()
			if r := call(t, "DELETE", url, "", with(auth, []string{"Lock-Token", g.Token})...); r.status != http.StatusNoContent {
				t.Fatalf("release: %d %s", r.status, r.body)
			}
			var got grant
			for {
				var st lockState
				if r := call(t, "GET", url, "", auth...); r.status == http.StatusOK {
					wantJSON(t, r, http.StatusOK, &st)
				}
				if w, ok := waiters[st.Owner]; ok {
					wantJSON(t, <-w, http.StatusCreated, &got)
					delete(waiters, st.Owner)
					return st.Owner, got
				}
				time.Sleep(5 * time.Millisecond) // polling for the hand-off
			}
		}

		holder := acquire(t, url, `{"ttl_ms":60000,"owner":"holder"}`)
		waiters := map[string]<-chan response{}
		for i := range 11 {
			p := 0
			if i == 10 {
				p = 9
			}
			name := fmt.Sprintf("w%d", i)
			waiters[name] = callAsync(t, "POST", url, fmt.Sprintf(`{"ttl_ms":60000,"wait_ms":30000,"owner":%q,"priority":%d}`, name, p), auth...)
			waitForQueued(t, url, i+1)
		}
		var st lockState
		wantJSON(t, call(t, "GET", url, "", auth...), http.StatusOK, &st)
		if want := []int{9, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}; !slices.Equal(st.QueuePriorities, want) {
			t.Fatalf("GET: queue_priorities %v, want %v", st.QueuePriorities, want)
		}
		g := holder
		var order []string
		for len(waiters) > 0 {
			var who string
			who, g = next(g, waiters)
			order = append(order, who)
		}
		if want := []string{"w10", "w0", "w1", "w2", "w3", "w4", "w5", "w6", "w7", "w8", "w9"}; !slices.Equal(order, want) {
			t.Fatalf("served in the order %v, want %v", order, want)
		}

		// Aging: a priority-0 waiter behind a stream of priority-5 ones.
		sent := map[string]time.Time{}
		queued := 0
		queue := func(name string, p int) {
			sent[name] = time.Now()
			waiters[name] = callAsync(t, "POST", url, fmt.Sprintf(`{"ttl_ms":60000,"wait_ms":60000,"owner":%q,"priority":%d}`, name, p), auth...)
			queued++
			waitForQueued(t, url, queued)
		}
		queue("low", 0)
		lowSeen := time.Now()
		for i := range 3 {
			queue(fmt.Sprintf("p5-%d", i), 5)
		}
		const slack = 50 * time.Millisecond // the backend's clock and the test's
		for round := 3; ; round++ {
			if round == 1000 {
				t.Fatal("1000 hand-offs, and the priority-0 waiter is not served")
			}
			queue(fmt.Sprintf("p5-%d", round), 5)
			time.Sleep(50 * time.Millisecond) // the holder's work: the stream's pace
			var who string
			who, g = next(g, waiters)
			queued--
			if who == "low" {
				if round == 3 {
					t.Fatal("the priority-0 waiter went before the priority-5 waiters that came right after it")
				}
				t.Logf("the priority-0 waiter was served after %v, at hand-off %d", time.Since(sent["low"]), round-2)
				break
			}
			if late := sent[who].Sub(lowSeen); late > 5*aging+slack {
				t.Fatalf("%s, which arrived %v after the priority-0 waiter (more than 5 agings of %v), was served before it", who, late, aging)
			}
		}
		call(t, "DELETE", url, "", with(auth, []string{"Lock-Token", g.Token})...)

		for _, body := range []string{`{"wait_ms":1000,"priority":10}`, `{"wait_ms":1000,"priority":-1}`} {
			wantProblem(t, call(t, "POST", url+"-bad", body, auth...), http.StatusBadRequest, "invalid_priority")
		}
		wantProblem(t, call(t, "POST", gw.URL+"/semaphores/prio/sem", `{"limit":2,"priority":10}`, auth...), http.StatusBadRequest, "invalid_priority")
		var permit grant
		wantJSON(t, call(t, "POST", gw.URL+"/semaphores/prio/sem", `{"limit":2,"priority":3}`, auth...), http.StatusCreated, &permit)
	})
}
