package redisbackend_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockgate/lockgate/internal/redistest"
	"github.com/lockgate/lockgate/locks"
	"github.com/lockgate/lockgate/locks/redisbackend"
)

// BenchmarkRedisScripts measures what the lock scripts cost Redis: the
// time Redis spends running EVALSHA (INFO commandstats, so neither the
// network nor the client counts) per uncontended cycle, an acquire and its
// release, next to the plainest lock there is, SET NX PX and a
// compare-and-delete script, measured the same way in the same run.
//
//	go test ./locks/redisbackend -run '^$' -bench RedisScripts
//
// The uncontended cycles go round 16 lock names, as a lock is usually taken
// again and again (so its history is full); the contended ones share one
// lock. redis-µs/cycle is Redis's time, calls/cycle the commands the
// scripts run inside Redis; x-plain divides the first by the plain lock's.
func BenchmarkRedisScripts(b *testing.B) {
	srv := redistest.Start(b)
	client := newClient(b, srv)
	ctx := context.Background()

	const names = 16
	var plain float64
	b.Run("plain", func(b *testing.B) {
		cad := redis.NewScript(`if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end return 0`)
		plain = measureScripts(b, client, func(n int) {
			for i := range n {
				key, tok := "plain:"+strconv.Itoa(i%names), "t"+strconv.Itoa(i)
				if err := client.SetNX(ctx, key, tok, 30*time.Second).Err(); err != nil {
					b.Fatal(err)
				}
				if err := cad.Run(ctx, client, []string{key}, tok).Err(); err != nil {
					b.Fatal(err)
				}
			}
		}, 0)
	})
	for _, history := range []int{0, 10} {
		b.Run(fmt.Sprintf("lock/history=%d", history), func(b *testing.B) {
			r := newRedis(b, srv, redisbackend.Options{History: history})
			measureScripts(b, client, func(n int) {
				for i := range n {
					key := locks.Key{Namespace: "bench", Name: "l" + strconv.Itoa(i%names)}
					g, err := r.Acquire(ctx, key, locks.AcquireRequest{TTL: 30 * time.Second, Subject: "bench"})
					if err != nil {
						b.Fatal(err)
					}
					if _, err := r.Release(ctx, key, g.Token); err != nil {
						b.Fatal(err)
					}
				}
			}, plain)
		})
	}
	// layout4-prototype: the one-record lock's common path as priced for
	// #36 (testdata/layout4_prototype.lua), driven as the gateway would:
	// an acquire and its release by the token's hash, round 16 names.
	b.Run("layout4-prototype", func(b *testing.B) {
		src, err := os.ReadFile("testdata/layout4_prototype.lua")
		if err != nil {
			b.Fatal(err)
		}
		if err := client.FunctionLoadReplace(ctx, string(src)).Err(); err != nil {
			b.Fatal(err)
		}
		measureScripts(b, client, func(n int) {
			for i := range n {
				key := []string{"lockgate:{bench/p" + strconv.Itoa(i%names) + "}:lock"}
				h := sha256.Sum256([]byte(locks.NewToken()))
				tok := hex.EncodeToString(h[:])
				got, err := client.FCall(ctx, "lean_acquire", key, tok, "30000", "bench", "").Slice()
				if err != nil || len(got) == 0 || got[0] != int64(1) {
					b.Fatalf("acquire: got %v, %v; want granted", got, err)
				}
				if n, err := client.FCall(ctx, "lean_release", key, tok).Int(); err != nil || n != 1 {
					b.Fatalf("release: got %v, %v; want released", n, err)
				}
			}
		}, plain)
	})
	// inspect: a plain GET of a lock, one held and one free, each with a
	// history of a few grants: what a GET costs, the index it answers (#39)
	// included. Two locks, so that their setting up, which
	// scripts/redis-instructions counts in both of its runs, costs little:
	// an acquire's cost moves with the clock (the namespace's index).
	runs := 0
	for _, history := range []int{0, 10} {
		b.Run(fmt.Sprintf("inspect/history=%d", history), func(b *testing.B) {
			r := newRedis(b, srv, redisbackend.Options{History: history})
			runs++ // each run of the sub-benchmark has locks of its own
			prefix := fmt.Sprintf("i%d.%d.", history, runs)
			key := func(i int) locks.Key { return locks.Key{Namespace: "bench", Name: prefix + strconv.Itoa(i%2)} }
			for i := range 2 {
				for range 3 {
					g, err := r.Acquire(ctx, key(i), locks.AcquireRequest{TTL: time.Hour, Subject: "bench"})
					if err != nil {
						b.Fatal(err)
					}
					if _, err := r.Release(ctx, key(i), g.Token); err != nil {
						b.Fatal(err)
					}
				}
			}
			if _, err := r.Acquire(ctx, key(0), locks.AcquireRequest{TTL: time.Hour, Subject: "bench"}); err != nil {
				b.Fatal(err)
			}
			measureScripts(b, client, func(n int) {
				for i := range n {
					if _, err := r.Inspect(ctx, key(i)); err != nil && !errors.Is(err, locks.ErrNotHeld) {
						b.Fatal(err)
					}
				}
			}, plain)
		})
	}
	kept := map[string]bool{} // keepalive's sessions that hold their lock
	// semaphore, shared and session: the other kinds of grant, each an
	// uncontended acquire and release with history 0, to hold against
	// lock/history=0 (#36: each at most 1.5x it).
	others := []struct {
		name  string
		cycle func(r *redisbackend.Backend, key locks.Key, session string) error
	}{
		{"semaphore", func(r *redisbackend.Backend, key locks.Key, _ string) error {
			g, err := r.AcquirePermit(ctx, key, locks.SemaphoreRequest{AcquireRequest: locks.AcquireRequest{TTL: 30 * time.Second, Subject: "bench"}, Limit: 4})
			if err == nil {
				_, err = r.ReleasePermit(ctx, key, g.Token)
			}
			return err
		}},
		{"shared", func(r *redisbackend.Backend, key locks.Key, _ string) error {
			g, err := r.Acquire(ctx, key, locks.AcquireRequest{TTL: 30 * time.Second, Subject: "bench", Mode: locks.Shared})
			if err == nil {
				_, err = r.Release(ctx, key, g.Token)
			}
			return err
		}},
		{"session", func(r *redisbackend.Backend, key locks.Key, session string) error {
			g, err := r.AcquireInSession(ctx, session, key, locks.AcquireRequest{Subject: "bench"})
			if err == nil {
				_, err = r.Release(ctx, key, g.Token)
			}
			return err
		}},
		// session-permit: a permit taken in a session and released by its
		// own token, to hold against semaphore.
		{"session-permit", func(r *redisbackend.Backend, key locks.Key, session string) error {
			g, err := r.AcquirePermitInSession(ctx, session, key, locks.SemaphoreRequest{AcquireRequest: locks.AcquireRequest{Subject: "bench"}, Limit: 4})
			if err == nil {
				_, err = r.ReleasePermit(ctx, key, g.Token)
			}
			return err
		}},
		// keepalive: a keep-alive of a session that holds one lock (taken
		// once, by the first cycle): the session's lease, its count, the
		// lock's renewal.
		{"keepalive", func(r *redisbackend.Backend, _ locks.Key, session string) error {
			if !kept[session] {
				kept[session] = true
				if _, err := r.AcquireInSession(ctx, session, locks.Key{Namespace: "bench", Name: "kept-" + session[:12]}, locks.AcquireRequest{Subject: "bench"}); err != nil {
					return err
				}
			}
			_, err := r.KeepSession(ctx, session, "bench", 0)
			return err
		}},
		// reenter: a grant re-entered once, both holds released.
		{"reenter", func(r *redisbackend.Backend, key locks.Key, _ string) error {
			g, err := r.Acquire(ctx, key, locks.AcquireRequest{TTL: 30 * time.Second, Subject: "bench"})
			if err != nil {
				return err
			}
			again, err := r.Reenter(ctx, key, g.Token, 30*time.Second, locks.Exclusive)
			if err == nil {
				_, err = r.ReleaseHold(ctx, key, g.Token, again.Hold)
			}
			if err == nil {
				_, err = r.Release(ctx, key, g.Token)
			}
			return err
		}},
		{"renew", func(r *redisbackend.Backend, key locks.Key, _ string) error {
			g, err := r.Acquire(ctx, key, locks.AcquireRequest{TTL: 30 * time.Second, Subject: "bench"})
			if err == nil {
				_, err = r.Renew(ctx, key, g.Token, 0)
			}
			if err == nil {
				_, err = r.Release(ctx, key, g.Token)
			}
			return err
		}},
		// renew with a hard cap (#39): what the feature costs a call that
		// uses it, to hold against renew, which does not.
		{"maxhold", func(r *redisbackend.Backend, key locks.Key, _ string) error {
			g, err := r.Acquire(ctx, key, locks.AcquireRequest{TTL: 30 * time.Second, MaxHold: time.Minute, Subject: "bench"})
			if err == nil {
				_, err = r.Renew(ctx, key, g.Token, 0)
			}
			if err == nil {
				_, err = r.Release(ctx, key, g.Token)
			}
			return err
		}},
		// A grant released on its own stays a member of its session until
		// the next keep-alive: one every names cycles, counted in.
	}
	for _, o := range others {
		b.Run(o.name, func(b *testing.B) {
			r := newRedis(b, srv, redisbackend.Options{})
			ss, err := r.OpenSession(ctx, "bench", time.Hour)
			if err != nil {
				b.Fatal(err)
			}
			measureScripts(b, client, func(n int) {
				for i := range n {
					if err := o.cycle(r, locks.Key{Namespace: "bench", Name: o.name + strconv.Itoa(i%names)}, ss.Token); err != nil {
						b.Fatal(err)
					}
					if strings.HasPrefix(o.name, "session") && i%names == names-1 {
						if _, err := r.KeepSession(ctx, ss.Token, "bench", 0); err != nil {
							b.Fatal(err)
						}
					}
				}
			}, plain)
		})
	}
	// contended: clients on one lock, each acquiring with a wait and
	// releasing at once, so that nearly every release hands the lock to a
	// waiter and nearly every acquire joins the queue: the path of one
	// contended lock at the gateway. history=0 and 10 with 4 clients;
	// clients=16 and clients=256 (history 0), the ends of #36's hand-off
	// cost from 16 to 256 waiters: 256 is a queue past Redis's packed
	// sizes (128 entries), 16 within them.
	contended := []struct {
		name, lock       string
		history, clients int
	}{{"history=0", "contended", 0, 4}, {"history=10", "contended", 10, 4}, {"clients=16", "contended16", 0, 16}, {"clients=256", "contended256", 0, 256}}
	for _, c := range contended {
		b.Run("contended/"+c.name, func(b *testing.B) {
			r := newRedis(b, srv, redisbackend.Options{History: c.history})
			key := locks.Key{Namespace: "bench", Name: c.lock}
			clients := c.clients
			measureScripts(b, client, func(n int) {
				var next atomic.Int64
				var wg sync.WaitGroup
				for range clients {
					wg.Go(func() {
						for next.Add(1) <= int64(n) {
							g, err := r.Acquire(ctx, key, locks.AcquireRequest{TTL: 30 * time.Second, Wait: 30 * time.Second, Subject: "bench"})
							if err != nil {
								b.Error(err)
								return
							}
							if _, err := r.Release(ctx, key, g.Token); err != nil {
								b.Error(err)
								return
							}
						}
					})
				}
				wg.Wait()
			}, plain)
		})
	}
	for _, p := range []int{0, 9} {
		b.Run(fmt.Sprintf("queued/priority=%d", p), func(b *testing.B) { benchQueued(b, srv, client, plain, p) })
	}
}

// benchQueued is the sub-benchmark queued: behind a holder, a ticket
// opened and closed, one after the other, so that each cycle joins the
// lock's queue once and leaves it. Unlike contended, whose share of
// acquires that queue moves with the scheduling of its clients, its count
// of Redis instructions is the same from run to run: the cost of a
// waiter's arrival (lua/lib_queue.lua enqueue) that a change to the queue
// quotes (#39's priorities), without a priority and with one.
func benchQueued(b *testing.B, srv *redistest.Server, client *redis.Client, plain float64, priority int) {
	ctx := context.Background()
	r := newRedis(b, srv, redisbackend.Options{})
	key := locks.Key{Namespace: "bench", Name: "queued"}
	// Held by the run before, for the hour: this run's tickets queue too.
	if _, err := r.Acquire(ctx, key, locks.AcquireRequest{TTL: time.Hour, Subject: "bench"}); err != nil && !errors.Is(err, locks.ErrHeld) {
		b.Fatal(err)
	}
	measureScripts(b, client, func(n int) {
		for range n {
			st, err := r.OpenTicket(ctx, key, locks.AcquireRequest{TTL: 30 * time.Second, Wait: 30 * time.Second, Subject: "bench", Priority: priority})
			if err != nil || st.Grant != nil {
				b.Fatalf("open a ticket: %+v, %v; want it queued", st, err)
			}
			if err := r.CloseTicket(ctx, key, st.ID, st.Token); err != nil {
				b.Fatal(err)
			}
		}
	}, plain)
}

// measureScripts runs b.N cycles and reports Redis's time in scripts
// per cycle, the commands run per cycle, and that time over plain's; plain
// 0 measures the plain lock itself, whose SET NX PX is not in a script.
func measureScripts(b *testing.B, client *redis.Client, cycles func(n int), plain float64) float64 {
	ctx := context.Background()
	if err := client.ConfigResetStat(ctx).Err(); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	cycles(b.N)
	b.StopTimer()
	stats, err := client.Info(ctx, "commandstats").Result()
	if err != nil {
		b.Fatal(err)
	}
	var usec, calls float64
	for _, line := range strings.Split(stats, "\n") {
		name, rest, ok := strings.Cut(strings.TrimSpace(line), ":")
		if !ok || !strings.HasPrefix(name, "cmdstat_") {
			continue
		}
		name = strings.TrimPrefix(name, "cmdstat_")
		var n, u float64
		for _, field := range strings.Split(rest, ",") {
			k, v, _ := strings.Cut(field, "=")
			switch k {
			case "calls":
				n, _ = strconv.ParseFloat(v, 64)
			case "usec":
				u, _ = strconv.ParseFloat(v, 64)
			}
		}
		switch name {
		case "evalsha", "eval", "fcall", "fcall_ro":
			usec += u // a script's time includes the commands it runs
		case "set":
			if plain == 0 {
				usec += u // the plain lock's SET NX PX, sent on its own
			}
			calls += n
		case "script|load", "function|load", "info", "config|resetstat", "ping", "hello", "client|setinfo", "subscribe":
		default:
			calls += n
		}
	}
	perCycle := usec / float64(b.N)
	b.ReportMetric(perCycle, "redis-µs/cycle")
	b.ReportMetric(calls/float64(b.N), "calls/cycle")
	if plain > 0 {
		b.ReportMetric(perCycle/plain, "x-plain")
	}
	return perCycle
}
