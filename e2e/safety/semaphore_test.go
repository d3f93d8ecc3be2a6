package safety

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/lockgate/lockgate/internal/redistest"
)

// The workload's calls on a lock (limit 0) or on a semaphore of limit
// permits; a semaphore's 201 and 200 bodies name it in "semaphore", which
// grant does not read.

func (c *client) acquireAny(ctx context.Context, limit int, name string, ttl, wait time.Duration) (grant, result) {
	if limit == 0 {
		return c.acquire(ctx, name, ttl, wait)
	}
	body := fmt.Sprintf(`{"limit":%d,"ttl_ms":%d,"wait_ms":%d}`, limit, ttl.Milliseconds(), wait.Milliseconds())
	r := c.do(ctx, "POST", "/semaphores/"+name, body)
	var g grant
	if r.status == http.StatusCreated {
		if err := json.Unmarshal(r.body, &g); err != nil {
			r.err = err
		}
	}
	return g, r
}

func (c *client) renewAny(ctx context.Context, limit int, name, tok string, ttl time.Duration) (grant, result) {
	if limit == 0 {
		return c.renew(ctx, name, tok, ttl)
	}
	r := c.do(ctx, "PUT", "/semaphores/"+name+"/lease", fmt.Sprintf(`{"ttl_ms":%d}`, ttl.Milliseconds()), "Lock-Token", tok)
	var g grant
	if r.status == http.StatusOK {
		if err := json.Unmarshal(r.body, &g); err != nil {
			r.err = err
		}
	}
	return g, r
}

func (c *client) releaseAny(ctx context.Context, limit int, name, tok string) result {
	if limit == 0 {
		return c.release(ctx, name, tok)
	}
	return c.do(ctx, "DELETE", "/semaphores/"+name, "", "Lock-Token", tok)
}

// overLimit says where more than limit of gs (the grants of one name)
// certainly held it at once. The most overlapping intervals all contain
// the latest start among them, so counting at every start is enough.
func overLimit(gs []*grantRec, limit int) []string {
	var out []string
	for _, a := range gs {
		at := a.acquired.ret
		if !at.Before(a.end()) {
			continue
		}
		var in []int64
		for _, b := range gs {
			if !b.acquired.ret.After(at) && at.Before(b.end()) {
				in = append(in, b.fence)
			}
		}
		if len(in) > limit && len(out) < 5 {
			slices.Sort(in)
			out = append(out, fmt.Sprintf("at %s, %d grants certainly held it, over the limit of %d: fencing tokens %v", stamp(at), len(in), limit, in))
		}
	}
	return out
}

// maxPermits bounds the limits semaphoreModel handles; its state must be
// comparable, so it holds a fixed array.
const maxPermits = 8

// semaphoreState is the model's view of one semaphore: the fencing tokens
// of its holders, and the largest handed out so far.
type semaphoreState struct {
	held [maxPermits]int64 // sorted, zeros first
	max  int64
}

func (s semaphoreState) holds(fence int64) bool { return slices.Contains(s.held[:], fence) }

func (s semaphoreState) count() int {
	n := 0
	for _, f := range s.held {
		if f != 0 {
			n++
		}
	}
	return n
}

func (s semaphoreState) with(fence int64) semaphoreState {
	for i, f := range s.held {
		if f == 0 {
			s.held[i] = fence
			break
		}
	}
	slices.Sort(s.held[:])
	return s
}

func (s semaphoreState) without(fence int64) semaphoreState {
	for i, f := range s.held {
		if f == fence {
			s.held[i] = 0
		}
	}
	slices.Sort(s.held[:])
	return s
}

// semaphoreModel is a semaphore of limit permits as the API promises it,
// for porcupine; as in lockModel, a 409 acquire is legal in any state.
func semaphoreModel(limit int) porcupine.Model {
	m := lockModel // its partition and description
	m.Init = func() any { return semaphoreState{} }
	m.Step = func(state, input, output any) (bool, any) {
		s, in, st := state.(semaphoreState), input.(op), output.(int)
		holds := s.holds(in.fence)
		switch in.kind {
		case opAcquire:
			if st != http.StatusCreated {
				return true, s
			}
			if s.count() >= limit || in.fence <= s.max {
				return false, s
			}
			s = s.with(in.fence)
			s.max = in.fence
			return true, s
		case opRenew:
			return holds == (st == http.StatusOK), s
		case opRelease:
			if st == http.StatusNoContent {
				if !holds {
					return false, s
				}
				return true, s.without(in.fence)
			}
			return !holds, s
		}
		return false, s
	}
	return m
}

// TestSemaphoreHistoryTwoGateways: clients of two gateways sharing one
// Redis take permits of two semaphores of limit 3, waiting for each
// other; the history shows at most 3 grants of a semaphore certainly
// holding it at any moment, tokens unique and increasing in real-time
// order, and is linearizable against a model of the semaphore.
func TestSemaphoreHistoryTwoGateways(t *testing.T) {
	rs := redistest.Start(t)
	gw1 := startGateway(t, "--redis-url", rs.URL())
	gw2 := startGateway(t, "--redis-url", rs.URL())
	const limit = 3
	h := workload{
		clients:  []*client{newClient(t, gw1), newClient(t, gw2)},
		workers:  16,
		locks:    []string{"semhist/a", "semhist/b"},
		ttl:      20 * time.Second, // no lease runs out during the run
		wait:     10 * time.Second,
		duration: 3 * time.Second,
		limit:    limit,
		enough:   func(h *history) bool { return h.created >= 30 },
	}.run(t)
	n := h.checkLimit(t, nil, limit)
	if n < 30 {
		t.Skipf("only %d grants, run on to %d times the run's length (a busy machine): too few to show anything; every check still ran and passed", n, workloadStretch)
	}
	t.Logf("%d calls, %d grants", len(h.ops), n)
	h.linearizableAgainst(t, semaphoreModel(limit))
}

// TestSemaphoreRandomFaults is TestRandomFaults for a semaphore of limit
// 3: three gateways, each through a proxy that delays and now and then
// cuts its Redis connections, Redis paused now and then, contended
// clients with short leases and waits; at no moment may more than 3
// grants certainly hold the semaphore, and tokens must be unique and
// increase in real-time order. LOCKGATE_FAULT_SEED replays the faults.
func TestSemaphoreRandomFaults(t *testing.T) {
	t.Parallel() // long, and much of it waiting: it runs beside the other long ones
	seed := faultSeed(t)
	const (
		limit        = 3
		redisTimeout = 500 * time.Millisecond
		minGrants    = 100
	)
	maxCalls, maxRun := bySoak(3000, 30000), bySoak(10*time.Second, 2*time.Minute)
	f := startFaultyGateways(t, seed, 3, redisTimeout)
	gateways, clients := f.gateways, f.clients
	names := []string{"semfault/a", "semfault/b"}
	h := &history{}
	w := workload{limit: limit}

	start := time.Now()
	drops, pauses := f.run(t, seed, h, w, 20, names, maxCalls, maxRun, minGrants)

	var granted, full, unknown int
	for _, o := range h.ops {
		if o.status == 0 || o.status >= 500 {
			unknown++
		}
		if o.kind == opAcquire {
			switch o.status {
			case http.StatusCreated:
				granted++
			case http.StatusConflict:
				full++
			}
		}
	}
	t.Logf("%d calls in %v (%d with an unknown outcome), %d grants, %d acquires refused; %d link cuts, %d Redis pauses",
		len(h.ops), time.Since(start).Round(time.Millisecond), unknown, granted, full, drops, pauses)
	h.checkLimit(t, nil, limit)
	eventually(t, 15*time.Second, "nothing held or waiting once the faults stop", func() bool {
		for _, n := range names {
			if r := clients[0].do(t.Context(), "GET", "/semaphores/"+n, ""); r.status != http.StatusNotFound {
				return false
			}
		}
		for _, gw := range gateways {
			if waiters(t, gw) != 0 {
				return false
			}
		}
		return true
	})
	tooFew(t, granted, minGrants, runStretch*maxRun)
}
