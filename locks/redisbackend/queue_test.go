package redisbackend_test

import (
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockgate/lockgate/internal/redistest"
	"github.com/lockgate/lockgate/locks"
	"github.com/lockgate/lockgate/locks/locktest"
	"github.com/lockgate/lockgate/locks/redisbackend"
)

// TestRedisFIFOAcrossGateways: waiters on three backends, as on three
// gateway processes, get the lock in the order they queued.
func TestRedisFIFOAcrossGateways(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	one := newRedis(t, srv, redisbackend.Options{})
	two := newRedis(t, srv, redisbackend.Options{})
	three := newRedis(t, srv, redisbackend.Options{})
	key := locktest.UniqueKey(t)
	holder := locktest.MustAcquire(t, three, key, locks.AcquireRequest{TTL: time.Minute})
	lockers := []locks.Locker{one, two, three, two, one, three}
	locktest.CheckFIFO(t, three, key, holder, lockers, locktest.QueueInOrder(t, key, lockers...))
}

// TestRedisDeadWaiterSkipped: a waiter whose gateway crashed does not get
// the lock ahead of a live one. On a single Redis the release sees that
// nobody hears the hand-off and moves on at once; where it cannot tell
// (Cluster), the dead waiter's missing heartbeats drop it after the waiter
// lease.
func TestRedisDeadWaiterSkipped(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		cluster bool
		lease   time.Duration
	}{
		{"UnheardHandoff", false, time.Minute},
		{"NoHeartbeat", true, 200 * time.Millisecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := redistest.Start(t)
			l := newRedis(t, srv, redisbackend.Options{WaiterLease: tc.lease})
			if tc.cluster {
				l.PretendCluster()
			}
			key := locktest.UniqueKey(t)
			holder := locktest.MustAcquire(t, l, key, locks.AcquireRequest{TTL: time.Minute})
			queued := time.Now()
			if err := l.QueueGhost(t.Context(), key, locks.AcquireRequest{TTL: time.Minute, Wait: time.Minute}, ""); err != nil {
				t.Fatal(err)
			}
			live := locktest.QueueInOrder(t, key, l)[0] // behind the ghost
			if tc.cluster {
				for time.Since(queued) <= tc.lease { // let the ghost's lease lapse
					time.Sleep(10 * time.Millisecond)
				}
			}
			released := time.Now()
			if _, err := l.Release(t.Context(), key, holder.Token); err != nil {
				t.Fatal(err)
			}
			res := <-live
			if res.Err != nil {
				t.Fatalf("live waiter: %v", res.Err)
			}
			// Far below the ghost's one-minute TTL and wait: it was skipped,
			// not waited out.
			if waited := time.Since(released); waited > 10*time.Second {
				t.Fatalf("live waiter got the lock %v after the release, want at once", waited)
			}
			info, err := l.Inspect(t.Context(), key)
			if err != nil || info.FencingToken != res.Grant.FencingToken || info.Waiters != 0 {
				t.Fatalf("got %+v, %v; want held by the live waiter, nobody queued", info, err)
			}
		})
	}
}

// TestRedisGrantToFrozenGatewayExpires: the lock is handed to a waiter
// whose gateway hears the message but never acts on it (frozen). When that
// grant's lease ends, nobody releases and nobody publishes, yet the next
// waiter gets the lock: the heartbeats of its gateway hand it on.
func TestRedisGrantToFrozenGatewayExpires(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	l := newRedis(t, srv, redisbackend.Options{WaiterLease: 300 * time.Millisecond})
	key := locktest.UniqueKey(t)
	holder := locktest.MustAcquire(t, l, key, locks.AcquireRequest{TTL: time.Minute})

	frozen := srv.Client(t).Subscribe(t.Context(), "frozen-gateway")
	defer frozen.Close()
	if _, err := frozen.Receive(t.Context()); err != nil { // the subscription is confirmed
		t.Fatal(err)
	}
	ghostTTL := 300 * time.Millisecond
	// Alive for a minute, not the waiter lease: on a busy machine the
	// 300 ms went by before the release, and the hand-off passed over
	// the ghost as dead. Its grant's lease is still its TTL.
	if err := l.QueueGhostAlive(t.Context(), key, locks.AcquireRequest{TTL: ghostTTL, Wait: time.Minute}, "frozen-gateway", time.Minute); err != nil {
		t.Fatal(err)
	}
	// Queued behind the ghost, and waiting far longer than the test allows.
	live := locktest.QueueInOrder(t, key, l)[0]
	if _, err := l.Release(t.Context(), key, holder.Token); err != nil {
		t.Fatal(err)
	}
	info, err := l.Inspect(t.Context(), key)
	if err != nil || info.Subject != "ghost" {
		t.Fatalf("got %+v, %v; want the lock handed to the frozen gateway's waiter", info, err)
	}
	res := <-live
	if res.Err != nil {
		t.Fatalf("live waiter: %v", res.Err)
	}
	if res.Elapsed > 10*time.Second {
		t.Fatalf("live waiter took %v, want about the ghost's %v lease plus a heartbeat", res.Elapsed, ghostTTL)
	}
}

// TestRedisHandoffScriptCalls counts the scripts Redis runs from a release
// to the waiter's grant, however many wait. A release on another gateway
// than the waiter's: the release itself, and the waiter's pick-up of what
// was handed to it (the message that wakes it is only a hint; the script
// says what it holds). A release on the waiter's own gateway: the release
// alone, whose reply hands the grant to the waiter. (On a single Redis the
// same scripts keep the namespace's index of held locks: no call of
// index.lua.)
func TestRedisHandoffScriptCalls(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		sameGW bool
		want   int
	}{
		{"release on another gateway", false, 2},
		{"release on the waiters' gateway", true, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := redistest.Start(t)
			// A long waiter lease keeps heartbeats out of the count.
			l := newRedis(t, srv, redisbackend.Options{WaiterLease: time.Hour})
			releaser := newRedis(t, srv, redisbackend.Options{WaiterLease: time.Hour})
			if tc.sameGW {
				releaser = l
			}
			admin := srv.Client(t)
			key := locktest.UniqueKey(t)
			holder := locktest.MustAcquire(t, releaser, key, locks.AcquireRequest{TTL: time.Minute})
			lockers := make([]locks.Locker, 20)
			for i := range lockers {
				lockers[i] = l
			}
			waiters := locktest.QueueInOrder(t, key, lockers...)
			// Load the release script: its first call on a new server
			// finds no function, and is sent again once it is loaded.
			other := locktest.UniqueKey(t)
			g := locktest.MustAcquire(t, releaser, other, locks.AcquireRequest{TTL: time.Minute})
			if _, err := releaser.Release(t.Context(), other, g.Token); err != nil {
				t.Fatal(err)
			}

			if err := admin.ConfigResetStat(t.Context()).Err(); err != nil {
				t.Fatal(err)
			}
			if _, err := releaser.Release(t.Context(), key, holder.Token); err != nil {
				t.Fatal(err)
			}
			first := <-waiters[0]
			if first.Err != nil {
				t.Fatal(first.Err)
			}
			if got := scriptCalls(t, admin); got != tc.want {
				info, _ := admin.Info(t.Context(), "commandstats").Result()
				t.Fatalf("got %d script calls from release to grant, want %d\n%s", got, tc.want, info)
			}
			// The grant is whole: the TTL asked for, not a provisional lease.
			if info, err := l.Inspect(t.Context(), key); err != nil || info.TTL < 50*time.Second {
				t.Fatalf("inspect after the hand-off: got %+v, %v; want a lease of about a minute", info, err)
			}
			// Let the rest through in order, so nobody is left waiting.
			grant := first.Grant
			for i, w := range waiters[1:] {
				if _, err := l.Release(t.Context(), key, grant.Token); err != nil {
					t.Fatal(err)
				}
				res := <-w
				if res.Err != nil {
					t.Fatalf("waiter %d: %v", i+1, res.Err)
				}
				if res.Grant.FencingToken <= grant.FencingToken {
					t.Fatalf("waiter %d: fencing token %d after %d, want larger", i+1, res.Grant.FencingToken, grant.FencingToken)
				}
				grant = res.Grant
			}
			if _, err := l.Release(t.Context(), key, grant.Token); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// scriptCalls counts the script and function calls that ran, in INFO
// commandstats. An FCALL that found no function or an EVALSHA that failed
// with NOSCRIPT (the first use of a script on a new server, sent again)
// ran nothing, so it does not count.
func scriptCalls(t *testing.T, admin *redis.Client) int {
	t.Helper()
	info, err := admin.Info(t.Context(), "commandstats").Result()
	if err != nil {
		t.Fatal(err)
	}
	total := 0
	for line := range strings.Lines(info) {
		name, stats, ok := strings.Cut(strings.TrimSpace(line), ":")
		if !ok || !slices.Contains([]string{"cmdstat_evalsha", "cmdstat_eval", "cmdstat_fcall", "cmdstat_fcall_ro"}, name) {
			continue
		}
		fields := make(map[string]int)
		for kv := range strings.SplitSeq(stats, ",") {
			k, v, _ := strings.Cut(kv, "=")
			n, err := strconv.ParseFloat(v, 64)
			if err != nil {
				t.Fatalf("commandstats line %q: %v", line, err)
			}
			fields[k] = int(n)
		}
		total += fields["calls"] - fields["failed_calls"]
	}
	return total
}
