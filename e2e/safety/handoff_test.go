package safety

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockgate/lockgate/internal/redistest"
)

// TestLateHandoffMessage: the hand-off messages to one gateway are held
// back (delayed, not lost, in order) while the lock is handed to its waiter
// W twice: grant G1, which ends unseen, then, after W rejoins the queue,
// grant G2, with a third caller Y queued behind W. When the messages
// arrive at last, the late one for G1 must not release G2 (nor anything
// else), and no message may make the gateway answer 201 for a grant that
// is not live in Redis: every 201 is checked against Redis as it arrives,
// Y's release must answer 204, and the history shows no two holders.
func TestLateHandoffMessage(t *testing.T) {
	rs := redistest.Start(t)
	p := startProxy(t, rs.Addr)
	// W waits on gateway A, whose hand-off messages the proxy holds back;
	// everyone else uses gateway B.
	gwA := startGateway(t, "--redis-url", "redis://"+p.Addr)
	gwB := startGateway(t, "--redis-url", rs.URL())
	ca, cb := newClient(t, gwA), newClient(t, gwB)
	rc := rs.Client(t)
	h, res := &history{}, newResource()
	const wTTL = 1500 * time.Millisecond
	for round := range 3 {
		s := newScene(t, rc, fmt.Sprintf("late/r%d", round), h, res)
		// H's lease is when W, first in line, looks again without a
		// message (on 50a489c): after G1 has ended, and X taken the lock.
		hH := s.take(cb, "H", 4*time.Second)
		w := s.wait(ca, "W", wTTL, 20*time.Second, nil)
		s.queued(1)
		p.holdSubscriptions()
		s.mustRelease(cb, hH) // G1 goes to W: its message is held back

		// G1 ends unseen, and X takes the lock; or W learns of G1 without
		// the message and answers.
		var x *holding
		if !poll(15*time.Second, func() bool {
			if w.answered() {
				return true
			}
			x, _, _ = s.acquire(cb, "X", time.Minute, 0)
			return x != nil
		}) {
			t.Fatalf("round %d: neither did W answer nor X get the lock within 15s", round)
		}
		if x != nil {
			// W looks again and queues behind X (the only one who can
			// queue now, under whatever id), or answers.
			if !poll(15*time.Second, func() bool { return w.answered() || len(s.queue()) == 1 }) {
				t.Fatalf("round %d: W neither answered nor queued again within 15s", round)
			}
			var y *waiting
			if !w.answered() {
				y = s.wait(cb, "Y", time.Minute, 20*time.Second, nil)
				if !poll(10*time.Second, func() bool { return w.answered() || y.answered() || len(s.queue()) == 2 }) {
					t.Fatalf("round %d: Y did not queue behind W within 10s", round)
				}
			}
			s.mustRelease(cb, x) // G2 goes to W: its message is held back behind G1's
			p.releaseSubscriptions()
			if y != nil {
				y.await(t, 30*time.Second)
				if y.res.status != http.StatusCreated {
					t.Errorf("round %d: Y: got %s, want 201", round, y.res)
				}
			}
		}
		p.releaseSubscriptions()
		w.await(t, 30*time.Second)
		if w.res.status != http.StatusCreated {
			t.Errorf("round %d: W: got %s, want 201", round, w.res)
		}
		if t.Failed() {
			break
		}
		eventually(t, 10*time.Second, "the lock free at the end of the round", func() bool {
			n, err := rc.Exists(t.Context(), s.key).Result()
			return err == nil && n == 0
		})
	}
	h.check(t, res)
}

// TestDroppedWaiterRejoins: a hand-off drops W, a waiter whose alive time
// in Redis lapsed (as when its gateway's heartbeat is late); the lock goes
// to Z, queued after W. W must learn it and rejoin, keeping its place:
// when Z releases, W gets the lock within a few seconds, ahead of Z2, who
// queued after W; not a 409 at its deadline while the lock is free.
func TestDroppedWaiterRejoins(t *testing.T) {
	rs := redistest.Start(t)
	gw := startGateway(t, "--redis-url", rs.URL())
	c := newClient(t, gw)
	rc := rs.Client(t)
	h, res := &history{}, newResource()
	s := newScene(t, rc, "dropped/x", h, res)
	alive := s.key + ":alive"

	hH := s.take(c, "H", time.Minute)
	const wWait = 10 * time.Second
	w := s.wait(c, "W", time.Minute, wWait, nil)
	wid := s.queued(1)[0]
	zHold := make(chan struct{})
	z := s.wait(c, "Z", time.Minute, 30*time.Second, zHold)
	s.queued(2)
	z2 := s.wait(c, "Z2", time.Minute, 30*time.Second, nil)
	s.queued(3)

	// Right after a heartbeat renewed W (the next comes a period later),
	// W's alive time lapses, and H releases: the hand-off drops W.
	score := func() float64 { return rc.ZScore(t.Context(), alive, wid).Val() }
	first := score()
	eventually(t, 10*time.Second, "a heartbeat renews W", func() bool { return score() != first })
	if err := rc.ZAddXX(t.Context(), alive, redis.Z{Score: 0, Member: wid}).Err(); err != nil {
		t.Fatal(err)
	}
	s.mustRelease(c, hH)
	select {
	case <-z.granted:
	case <-w.done:
		t.Fatalf("W got the lock although its alive time had lapsed (a heartbeat came first?): %s", w.res)
	case <-time.After(10 * time.Second):
		t.Fatal("Z did not get the lock within 10s of H's release")
	}
	// A dropped waiter learns within a heartbeat period (1 s); give it 5
	// to queue again (under whatever id), behind Z2 or ahead.
	rejoined := poll(5*time.Second, func() bool { return len(s.queue()) == 2 })
	t.Logf("W back in the queue before Z's release: %v", rejoined)
	close(zHold)
	z.await(t, 10*time.Second)
	freed := z.hd.rec.releaseCall

	w.await(t, wWait+10*time.Second)
	z2.await(t, 30*time.Second)
	if w.res.status != http.StatusCreated {
		t.Fatalf("W, dropped from the queue: got %s after %v, want 201 when Z released the lock", w.res, w.ret.Sub(w.call).Round(time.Millisecond))
	}
	if d := w.ret.Sub(freed); d > 5*time.Second {
		t.Errorf("W got the lock %v after Z released it, want within 5s", d)
	}
	if z2.res.status == http.StatusCreated && z2.hd.g.FencingToken < w.hd.g.FencingToken {
		t.Errorf("Z2, queued after W, got the lock first (fencing token %d, W's %d): W lost its place", z2.hd.g.FencingToken, w.hd.g.FencingToken)
	}
	h.check(t, res)
}

// TestUnpickedGrantEndsWithinWaiterLease: the lock is handed to a waiter
// whose gateway cannot pick it up (stopped with SIGSTOP, its subscription
// half open, on a single Redis; killed just before, on Redis Cluster). The
// waiter asked for 60 s, but a grant nobody picks up must end within the
// waiter lease (3 s), and the queue move on within about one heartbeat
// more: a waiter on a live gateway gets the lock within 10 s.
func TestUnpickedGrantEndsWithinWaiterLease(t *testing.T) {
	t.Parallel() // long, and much of it waiting: it runs beside the other long ones
	t.Run("redis", func(t *testing.T) {
		rs := redistest.Start(t)
		doomed := startGatewayProcess(t, "--redis-url", rs.URL())
		live := startGateway(t, "--redis-url", rs.URL())
		unpickedGrant(t, doomed, live, sigstop, rs.Client(t))
	})
	t.Run("cluster", func(t *testing.T) {
		cl := redistest.StartCluster(t, 3)
		url := "redis://" + cl.Nodes[0].Addr
		doomed := startGatewayProcess(t, "--redis-cluster", "--redis-url", url)
		live := startGateway(t, "--redis-cluster", "--redis-url", url)
		unpickedGrant(t, doomed, live, sigkill, nil)
	})
}

// redisState describes the Redis keys of lock, to say what a failed test
// saw; "" without a client.
func redisState(t *testing.T, rc *redis.Client, lock string) string {
	if rc == nil {
		return ""
	}
	ctx := context.WithoutCancel(t.Context())
	var b strings.Builder
	fmt.Fprintf(&b, "Redis time %d ms\n", rc.Time(ctx).Val().UnixMilli())
	for _, suffix := range []string{"", ":queue", ":alive", ":waiters"} {
		key := "lockgate:{" + lock + "}" + suffix
		var v any
		switch rc.Type(ctx, key).Val() {
		case "hash":
			v = rc.HGetAll(ctx, key).Val()
		case "zset":
			v = rc.ZRangeWithScores(ctx, key, 0, -1).Val()
		}
		fmt.Fprintf(&b, "%s (pttl %v): %v\n", key, rc.PTTL(ctx, key).Val(), v)
	}
	return b.String()
}

// unpickedGrant queues a waiter on doomed, then one on live, sends sig to
// doomed and releases the lock: the waiter on live must get it within 10 s.
// rc, when not nil, reads the lock's keys for the failure message.
func unpickedGrant(t *testing.T, doomed, live *gateway, sig os.Signal, rc *redis.Client) {
	cd, cl := newClient(t, doomed), newClient(t, live)
	const lock = "unpicked/x"
	h := cl.mustAcquire(t, lock, time.Minute)
	ctx, giveUp := context.WithCancel(t.Context())
	defer giveUp()
	doomedWait := waitAsync(ctx, cd, lock, time.Minute, 30*time.Second)
	eventually(t, 10*time.Second, "a waiter on the doomed gateway", func() bool { return waiters(t, doomed) == 1 })
	liveWait := waitAsync(t.Context(), cl, lock, time.Minute, 30*time.Second)
	eventually(t, 10*time.Second, "a waiter on the live gateway", func() bool { return waiters(t, live) == 1 })

	if err := doomed.proc.Signal(sig); err != nil {
		t.Fatal(err)
	}
	// A signal takes effect a moment after it is sent: a gateway still
	// running picks the grant up, for the full TTL, and then stops (seen
	// under load: the doomed waiter's grant had 60 s, no "p"). Release
	// only once it has stopped, or is gone.
	eventually(t, 10*time.Second, "the doomed gateway to stop", func() bool { return stopped(doomed.proc.Pid) })
	released := time.Now()
	wantStatus(t, "release", cl.release(t.Context(), lock, h.Token), http.StatusNoContent)
	var r result
	select {
	case r = <-liveWait:
	case <-time.After(10 * time.Second):
		t.Fatalf("the live waiter (the doomed gateway's waiter asked for 60 s): no answer within 10s\n%s\nlive gateway's log:\n%s",
			redisState(t, rc, lock), live.logs)
	}
	if r.status != http.StatusCreated {
		t.Fatalf("the live waiter: got %s, want 201", r)
	}
	t.Logf("the live waiter got the lock %v after the release", time.Since(released).Round(time.Millisecond))
	var g grant
	mustDecode(t, r, &g)
	if g.FencingToken <= h.FencingToken {
		t.Fatalf("fencing token: got %d after %d, want larger", g.FencingToken, h.FencingToken)
	}
	giveUp()
	doomed.stop() // SIGCONT and SIGKILL: its client gets an error
	if r := within(t, 10*time.Second, "the doomed gateway's client", doomedWait); r.status == http.StatusCreated {
		t.Fatalf("the client of a doomed gateway got a grant: %s", r)
	}
	wantStatus(t, "release", cl.release(t.Context(), lock, g.Token), http.StatusNoContent)
	eventually(t, 10*time.Second, "nothing held or waiting", func() bool {
		return cl.holder(t, lock) == 0 && waiters(t, live) == 0
	})
}

// stopped reports whether process pid is stopped (SIGSTOP) or gone
// (SIGKILL), as /proc says.
func stopped(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return true // gone
	}
	// The state follows the command name, which is in parentheses.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 || i+2 >= len(b) {
		return false
	}
	switch b[i+2] {
	case 'T', 't', 'Z', 'X':
		return true
	}
	return false
}
