package redisbackend_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
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

// openRedis is redisbackend.New for a test, which fails when it refuses the
// client.
func openRedis(t testing.TB, client redis.UniversalClient, opts redisbackend.Options) *redisbackend.Backend {
	t.Helper()
	r, err := redisbackend.New(client, opts)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// newClient returns a client configured as the gateway configures its own:
// context deadlines reach the socket, and commands are never retried unseen.
func newClient(t testing.TB, srv *redistest.Server) *redis.Client {
	c := redis.NewClient(&redis.Options{
		Addr:                  srv.Addr,
		MaxRetries:            -1,
		ContextTimeoutEnabled: true,
	})
	t.Cleanup(func() { c.Close() })
	return c
}

func newRedis(t testing.TB, srv *redistest.Server, opts redisbackend.Options) *redisbackend.Backend {
	r := openRedis(t, newClient(t, srv), opts)
	t.Cleanup(func() { r.Close() })
	return r
}

func TestRedisConformance(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	locktest.Run(t, func(t *testing.T) locks.Locker { return newRedis(t, srv, redisbackend.Options{}) })
}

func TestRedisHistory(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	locktest.RunHistory(t, func(t *testing.T) locks.Backend {
		return newRedis(t, srv, redisbackend.Options{History: locktest.HistoryLen})
	})
	locktest.RunNoHistory(t, newRedis(t, srv, redisbackend.Options{}))
}

func TestRedisValues(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	locktest.RunValues(t, func(t *testing.T) locks.Backend {
		return newRedis(t, srv, redisbackend.Options{History: locktest.HistoryLen})
	})
}

func TestRedisLockDelay(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	locktest.RunLockDelay(t, func(t *testing.T) locks.Locker {
		return newRedis(t, srv, redisbackend.Options{LockDelay: locktest.LockDelay})
	})
}

func TestRedisSharedCap(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	locktest.RunSharedCap(t, func(t *testing.T) locks.Locker {
		return newRedis(t, srv, redisbackend.Options{MaxSharedHolders: locktest.SharedCap})
	})
}

func TestRedisListConformance(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	locktest.RunList(t, func(t *testing.T) locks.Backend { return newRedis(t, srv, redisbackend.Options{}) })
}

func TestRedisSemaphoreConformance(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	locktest.RunSemaphores(t, func(t *testing.T) locks.Backend { return newRedis(t, srv, redisbackend.Options{}) })
}

func TestRedisFencingSurvivesFlushAll(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	l := newRedis(t, srv, redisbackend.Options{})
	key := locktest.UniqueKey(t)
	var last int64
	for round := range 3 {
		g := locktest.MustAcquire(t, l, key, locks.AcquireRequest{TTL: time.Minute})
		if g.FencingToken <= last {
			t.Fatalf("round %d: got fencing token %d, want more than %d", round, g.FencingToken, last)
		}
		last = g.FencingToken
		if err := srv.Client(t).FlushAll(t.Context()).Err(); err != nil {
			t.Fatal(err)
		}
	}
	srv.Restart(t) // and a restart without persistence
	g := locktest.MustAcquire(t, l, key, locks.AcquireRequest{TTL: time.Minute})
	if g.FencingToken <= last {
		t.Fatalf("after restart: got fencing token %d, want more than %d", g.FencingToken, last)
	}
}

func TestRedisSurvivesScriptFlush(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	l := newRedis(t, srv, redisbackend.Options{})
	admin := srv.Client(t)
	key := locktest.UniqueKey(t)
	flush := func() { // the functions the engine calls, and the scripts it falls back on
		t.Helper()
		if err := admin.FunctionFlush(t.Context()).Err(); err != nil {
			t.Fatal(err)
		}
		if err := admin.ScriptFlush(t.Context()).Err(); err != nil {
			t.Fatal(err)
		}
	}
	flush()
	g := locktest.MustAcquire(t, l, key, locks.AcquireRequest{TTL: time.Minute, Subject: "s"})
	flush()
	if _, err := l.Inspect(t.Context(), key); err != nil {
		t.Fatalf("inspect after SCRIPT FLUSH: %v", err)
	}
	flush()
	if _, err := l.Renew(t.Context(), key, g.Token, 0); err != nil {
		t.Fatalf("renew after SCRIPT FLUSH: %v", err)
	}
	flush()
	if _, err := l.Release(t.Context(), key, g.Token); err != nil {
		t.Fatalf("release after SCRIPT FLUSH: %v", err)
	}
}

// A Redis past its maxmemory refuses new grants, and still takes releases.
func TestRedisFullTakesReleases(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	admin := srv.Client(t)
	l := newRedis(t, srv, redisbackend.Options{History: 10})
	key := locktest.UniqueKey(t)
	g := locktest.MustAcquire(t, l, key, locks.AcquireRequest{TTL: time.Minute})
	other := locktest.UniqueKey(t) // a cycle that loads the functions, which a full Redis would refuse
	if _, err := l.Release(t.Context(), other, locktest.MustAcquire(t, l, other, locks.AcquireRequest{TTL: time.Minute}).Token); err != nil {
		t.Fatal(err)
	}
	if err := admin.ConfigSet(t.Context(), "maxmemory", "1").Err(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { admin.ConfigSet(context.Background(), "maxmemory", "0") })
	if _, err := l.Acquire(t.Context(), locktest.UniqueKey(t), locks.AcquireRequest{TTL: time.Minute}); !errors.Is(err, locks.ErrUnavailable) {
		t.Fatalf("acquire on a full Redis: got %v, want ErrUnavailable", err)
	}
	if _, err := l.Release(t.Context(), key, g.Token); err != nil {
		t.Fatalf("release on a full Redis: got %v, want it released", err)
	}
}

// cycleCommands runs one acquire and release of a new lock, and returns the
// script and function calls Redis received for it, by command, those it
// refused or did not find included.
func cycleCommands(t *testing.T, l *redisbackend.Backend, admin *redis.Client) map[string]int {
	t.Helper()
	if err := admin.ConfigResetStat(t.Context()).Err(); err != nil {
		t.Fatal(err)
	}
	key := locktest.UniqueKey(t)
	g := locktest.MustAcquire(t, l, key, locks.AcquireRequest{TTL: time.Minute})
	if _, err := l.Release(t.Context(), key, g.Token); err != nil {
		t.Fatal(err)
	}
	info, err := admin.Info(t.Context(), "commandstats").Result()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]int{}
	for line := range strings.Lines(info) {
		name, stats, _ := strings.Cut(strings.TrimSpace(line), ":")
		name, ok := strings.CutPrefix(name, "cmdstat_")
		if !ok || !(strings.HasPrefix(name, "eval") || strings.HasPrefix(name, "fcall") || strings.HasPrefix(name, "function")) {
			continue
		}
		calls, _, _ := strings.Cut(strings.TrimPrefix(stats, "calls="), ",")
		n, _ := strconv.Atoi(calls)
		rejected := 0
		if _, r, ok := strings.Cut(stats, "rejected_calls="); ok {
			r, _, _ = strings.Cut(r, ",")
			rejected, _ = strconv.Atoi(r)
		}
		got[name] = n + rejected
	}
	return got
}

// The engine calls each script as a function, loaded once per node: the
// first call of each on a new Redis finds none and loads it, every call
// after is one FCALL.
func TestRedisCallsFunctions(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	admin := srv.Client(t)
	l := newRedis(t, srv, redisbackend.Options{})
	first := cycleCommands(t, l, admin)
	if first["function|load"] != 2 || first["fcall"] != 4 {
		t.Errorf("first cycle: got %v, want 2 FUNCTION LOADs and 4 FCALLs (2 not found, 2 run)", first)
	}
	if got, want := cycleCommands(t, l, admin), map[string]int{"fcall": 2}; !maps.Equal(got, want) {
		t.Errorf("second cycle: got %v, want %v", got, want)
	}
}

// LoadFunctions, which a gateway runs as it starts, leaves the first cycle
// nothing to load; on a Redis that refuses functions it says so, and the
// first calls go as EVALSHA at once.
func TestRedisLoadFunctions(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	admin := srv.Client(t)
	l := newRedis(t, srv, redisbackend.Options{})
	if err := l.LoadFunctions(t.Context()); err != nil {
		t.Fatal(err)
	}
	if got, want := cycleCommands(t, l, admin), map[string]int{"fcall": 2}; !maps.Equal(got, want) {
		t.Errorf("first cycle after LoadFunctions: got %v, want %v", got, want)
	}

	if err := admin.Do(t.Context(), "ACL", "SETUSER", "nofunctions", "on", ">pw", "~*", "&*", "+@all", "-fcall", "-fcall_ro", "-function").Err(); err != nil {
		t.Fatal(err)
	}
	c := redis.NewClient(&redis.Options{Addr: srv.Addr, Username: "nofunctions", Password: "pw", MaxRetries: -1, ContextTimeoutEnabled: true})
	t.Cleanup(func() { c.Close() })
	refused := openRedis(t, c, redisbackend.Options{})
	t.Cleanup(func() { refused.Close() })
	if err := refused.LoadFunctions(t.Context()); err == nil {
		t.Fatal("LoadFunctions on a Redis that refuses functions: no error")
	}
	if got, want := cycleCommands(t, refused, admin), map[string]int{"evalsha": 2, "eval": 2}; !maps.Equal(got, want) {
		t.Errorf("first cycle where functions are refused: got %v, want %v: no FCALL, each EVALSHA without its script, then its EVAL", got, want)
	}
}

// A Redis that refuses functions (here an ACL; Redis 6 does not know them)
// gets EVALSHA, after one refused FCALL.
func TestRedisFallsBackToScripts(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	admin := srv.Client(t)
	if err := admin.Do(t.Context(), "ACL", "SETUSER", "nofunctions", "on", ">pw", "~*", "&*", "+@all", "-fcall", "-fcall_ro", "-function").Err(); err != nil {
		t.Fatal(err)
	}
	c := redis.NewClient(&redis.Options{Addr: srv.Addr, Username: "nofunctions", Password: "pw", MaxRetries: -1, ContextTimeoutEnabled: true})
	t.Cleanup(func() { c.Close() })
	l := openRedis(t, c, redisbackend.Options{})
	t.Cleanup(func() { l.Close() })
	if got, want := cycleCommands(t, l, admin), map[string]int{"fcall": 1, "eval": 2, "evalsha": 1}; !maps.Equal(got, want) {
		t.Errorf("first cycle: got %v, want %v: the acquire's refused FCALL and its EVAL, the release's EVALSHA without the script and its EVAL", got, want)
	}
	if got, want := cycleCommands(t, l, admin), map[string]int{"evalsha": 2}; !maps.Equal(got, want) {
		t.Errorf("second cycle: got %v, want %v", got, want)
	}
}

func TestRedisUnavailable(t *testing.T) {
	t.Parallel()
	const timeout = 800 * time.Millisecond
	for _, tc := range []struct {
		name   string
		break_ func(t *testing.T, srv *redistest.Server)
	}{
		{"Stopped", func(t *testing.T, srv *redistest.Server) { srv.Stop() }},
		{"Paused", func(t *testing.T, srv *redistest.Server) {
			srv.Pause(t)
			t.Cleanup(func() { srv.Resume(t) })
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := redistest.Start(t)
			l := newRedis(t, srv, redisbackend.Options{Timeout: timeout})
			key := locktest.UniqueKey(t)
			g := locktest.MustAcquire(t, l, key, locks.AcquireRequest{TTL: time.Minute})
			tc.break_(t, srv)
			calls := map[string]func() error{
				"acquire": func() error {
					_, err := l.Acquire(t.Context(), locktest.UniqueKey(t), locks.AcquireRequest{TTL: time.Minute})
					return err
				},
				"waiting acquire": func() error {
					_, err := l.Acquire(t.Context(), key, locks.AcquireRequest{TTL: time.Minute, Wait: time.Minute})
					return err
				},
				"release": func() error {
					_, err := l.Release(t.Context(), key, g.Token)
					return err
				},
				"renew": func() error {
					_, err := l.Renew(t.Context(), key, g.Token, 0)
					return err
				},
				"inspect": func() error {
					_, err := l.Inspect(t.Context(), key)
					return err
				},
				"check": func() error { return l.Check(t.Context()) },
			}
			for name, call := range calls {
				start := time.Now()
				err := call()
				elapsed := time.Since(start)
				if !errors.Is(err, locks.ErrUnavailable) {
					t.Errorf("%s: got %v, want ErrUnavailable", name, err)
				}
				// A bound, not a benchmark: the answer comes within the one
				// timeout, not after a second call (clean-ups run behind it);
				// but a renew, whose outcome must be known before its caller
				// is answered, runs once more to fence itself off
				// (renewFencing): two timeouts.
				bound := timeout + timeout/2
				if name == "renew" {
					bound = 2*timeout + timeout/2
				}
				if elapsed > bound {
					t.Errorf("%s: took %v, want within %v", name, elapsed, bound)
				}
			}
		})
	}
}

// TestRedisStoresNoPlaintextToken reads everything Redis holds and logs
// (keys, values, the slow log of every command with its arguments) and
// looks for the owner token.
func TestRedisStoresNoPlaintextToken(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	admin := srv.Client(t)
	ctx := t.Context()
	if err := admin.ConfigSet(ctx, "slowlog-log-slower-than", "0").Err(); err != nil {
		t.Fatal(err)
	}
	admin.ConfigSet(ctx, "slowlog-max-len", "1000")
	l := newRedis(t, srv, redisbackend.Options{})
	key := locktest.UniqueKey(t)
	g := locktest.MustAcquire(t, l, key, locks.AcquireRequest{TTL: time.Minute, Subject: "s", Owner: "o"})
	if _, err := l.Renew(ctx, key, g.Token, 0); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Inspect(ctx, key); err != nil {
		t.Fatal(err)
	}

	var seen strings.Builder
	keys, err := admin.Keys(ctx, "*").Result()
	if err != nil || len(keys) == 0 {
		t.Fatalf("keys: %v %v", keys, err)
	}
	for _, k := range keys {
		dump, _ := admin.Dump(ctx, k).Result()
		fmt.Fprintf(&seen, "%s %s\n", k, dump)
		if typ, _ := admin.Type(ctx, k).Result(); typ == "hash" {
			fmt.Fprintln(&seen, admin.HGetAll(ctx, k).Val())
		}
	}
	slow, err := admin.SlowLogGet(ctx, -1).Result()
	if err != nil || len(slow) == 0 {
		t.Fatalf("slowlog: %v %v", slow, err)
	}
	for _, entry := range slow {
		fmt.Fprintln(&seen, entry.Args)
	}
	if !strings.Contains(seen.String(), "lockgate:{"+key.String()+"}") {
		t.Fatal("the check read nothing of the lock: it could not fail")
	}
	if strings.Contains(seen.String(), g.Token) {
		t.Fatal("Redis holds the plaintext owner token")
	}
	if _, err := l.Release(ctx, key, g.Token); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(fmt.Sprint(admin.SlowLogGet(ctx, -1).Val()), g.Token) {
		t.Fatal("the release sent the plaintext owner token to Redis")
	}
}

// TestRedisWakeUpAcrossProcesses: two backends with their own connections
// and subscriptions, as two gateway processes have; a release on one wakes
// a waiter on the other long before the holder's lease would end.
func TestRedisWakeUpAcrossProcesses(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	one := newRedis(t, srv, redisbackend.Options{})
	two := newRedis(t, srv, redisbackend.Options{})
	key := locktest.UniqueKey(t)
	g := locktest.MustAcquire(t, two, key, locks.AcquireRequest{TTL: 30 * time.Second})
	done := make(chan error, 1)
	start := time.Now()
	go func() {
		_, err := one.Acquire(context.Background(), key, locks.AcquireRequest{TTL: time.Minute, Wait: 20 * time.Second})
		done <- err
	}()
	time.AfterFunc(50*time.Millisecond, func() { two.Release(context.Background(), key, g.Token) })
	if err := <-done; err != nil {
		t.Fatalf("waiter on the other process: %v", err)
	}
	if elapsed := time.Since(start); elapsed > 5*time.Second {
		t.Fatalf("waiter took %v, want far less than the holder's 30s TTL", elapsed)
	}
}

// TestRedisKeysShareHashTag: every key of one lock lands in one Redis
// Cluster slot, so the scripts run unchanged on a cluster; so does every
// key of its namespace's index of held locks, under the namespace's tag.
func TestRedisKeysShareHashTag(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	l := newRedis(t, srv, redisbackend.Options{Prefix: "p:"})
	key := locktest.UniqueKey(t)
	locktest.MustAcquire(t, l, key, locks.AcquireRequest{TTL: time.Minute})
	var lockKeys, indexKeys []string
	for _, k := range srv.Client(t).Keys(t.Context(), "*").Val() {
		switch {
		case strings.HasPrefix(k, "p:{"+key.String()+"}"):
			lockKeys = append(lockKeys, k)
		case strings.HasPrefix(k, "p:names:{"+key.Namespace+"}"):
			indexKeys = append(indexKeys, k)
		default:
			t.Errorf("key %q does not start with the prefix and the lock's or its namespace's hash tag", k)
		}
	}
	if len(lockKeys) != 3 {
		t.Errorf("got lock keys %v, want the lock, its fencing counter and the grant's record (an acquire keeps no call record)", lockKeys)
	}
	if len(indexKeys) != 2 {
		t.Errorf("got index keys %v, want its directory and its bucket (the acquire's script writes them: no call of index.lua)", indexKeys)
	}
}

// TestRedisEveryKeyExpires: whatever the scripts write, they give an
// expiry, so that a lock nobody uses again leaves nothing behind. A mix of
// grants, waits, shared holds, give-ups and permits, then every key Redis
// holds must have one.
func TestRedisEveryKeyExpires(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	admin := srv.Client(t)
	ctx := t.Context()
	l := newRedis(t, srv, redisbackend.Options{History: 10, LockDelay: 10 * time.Millisecond})
	key := locktest.UniqueKey(t)
	long := locks.AcquireRequest{TTL: time.Minute, Subject: "s"}

	// A grant and two waiters queued behind it: one is handed the lock,
	// the other gives up.
	g := locktest.MustAcquire(t, l, key, long)
	handed := make(chan locks.Grant, 1)
	go func() {
		w, err := l.Acquire(ctx, key, locks.AcquireRequest{TTL: time.Minute, Wait: time.Minute, Subject: "w"})
		if err != nil {
			t.Error(err)
		}
		handed <- w
	}()
	locktest.WaitUntilQueued(t, l, key, 1)
	if _, err := l.Acquire(ctx, key, locks.AcquireRequest{TTL: time.Minute, Wait: 50 * time.Millisecond}); !errors.Is(err, locks.ErrHeld) {
		t.Fatalf("a waiter whose wait ran out: got %v, want ErrHeld", err)
	}
	if _, err := l.Release(ctx, key, g.Token); err != nil {
		t.Fatal(err)
	}
	w := <-handed
	if _, err := l.Release(ctx, key, w.Token); err != nil {
		t.Fatal(err)
	}
	// Shared holds, one renewed and re-entered.
	s1 := locktest.MustAcquire(t, l, key, locks.AcquireRequest{TTL: time.Minute, Mode: locks.Shared})
	locktest.MustAcquire(t, l, key, locks.AcquireRequest{TTL: time.Minute, Mode: locks.Shared})
	if _, err := l.Renew(ctx, key, s1.Token, 2*time.Minute); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Reenter(ctx, key, s1.Token, time.Minute, locks.Shared); err != nil {
		t.Fatal(err)
	}
	// A permit of a semaphore of the same name.
	p, err := l.AcquirePermit(ctx, key, locks.SemaphoreRequest{AcquireRequest: long, Limit: 2})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.ReleasePermit(ctx, key, p.Token); err != nil {
		t.Fatal(err)
	}

	keys, err := admin.Keys(ctx, "*").Result()
	if err != nil {
		t.Fatal(err)
	}
	if len(keys) < 8 {
		t.Fatalf("only %d keys (%v): the mix did not write what it should", len(keys), keys)
	}
	for _, k := range keys {
		if ttl := admin.PTTL(ctx, k).Val(); ttl < 0 {
			t.Errorf("key %s has no expiry (PTTL %v)", k, ttl)
		}
	}
}

// TestRedisHistoryExpiry: a lock's name record, its fencing counter and
// history, lives --fence-retention after the last grant or renewal it
// records, and a record that begins anew with an event that does not move
// its expiry (a release, once the old record has gone) gets one all the
// same.
func TestRedisHistoryExpiry(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	admin := srv.Client(t)
	ctx := t.Context()
	const retention = time.Hour
	l := newRedis(t, srv, redisbackend.Options{History: 10, FenceRetention: retention})
	key := locktest.UniqueKey(t)
	record := "lockgate:{" + key.String() + "}:fence"
	pttl := func() time.Duration {
		t.Helper()
		d, err := admin.PTTL(ctx, record).Result()
		if err != nil {
			t.Fatal(err)
		}
		return d
	}

	g := locktest.MustAcquire(t, l, key, locks.AcquireRequest{TTL: time.Minute, Subject: "s"})
	if d := pttl(); d < retention-time.Minute {
		t.Fatalf("after a grant the history expires in %v, want about %v", d, retention)
	}
	admin.PExpire(ctx, record, time.Second) // as if most of the retention had passed
	if _, err := l.Renew(ctx, key, g.Token, time.Minute); err != nil {
		t.Fatal(err)
	}
	if d := pttl(); d < retention-time.Minute {
		t.Fatalf("after a renewal the history expires in %v, want about %v", d, retention)
	}

	admin.Del(ctx, record) // gone, as an idle lock's record goes
	if _, err := l.Release(ctx, key, g.Token); err != nil {
		t.Fatal(err)
	}
	if evs, err := l.History(ctx, key); err != nil || len(evs) != 1 || evs[0].Kind != "released" {
		t.Fatalf("the release's history is %+v (%v), want one release", evs, err)
	}
	if d := pttl(); d < 0 {
		t.Fatalf("a history begun by a release has no expiry (PTTL %v)", d)
	}
}

// TestRedisBreak runs the break cases on two gateways of one Redis.
func TestRedisBreak(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	locktest.RunBreak(t, func(t *testing.T) (locks.Backend, locks.Backend) {
		opts := redisbackend.Options{History: locktest.HistoryLen}
		return newRedis(t, srv, opts), newRedis(t, srv, opts)
	})
}

// TestRedisSessions runs the session cases on one Redis.
func TestRedisSessions(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	locktest.RunSessions(t, func(t *testing.T) locks.Backend {
		return newRedis(t, srv, redisbackend.Options{History: locktest.HistoryLen})
	})
}

// TestRedisLockSets runs the lock set cases on one Redis, where a set
// that does not wait is one script.
func TestRedisLockSets(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	locktest.RunLockSets(t, func(t *testing.T) locks.Backend {
		return newRedis(t, srv, redisbackend.Options{History: locktest.HistoryLen})
	})
}

// TestRedisWatches runs the watch cases on two gateways of one Redis: the
// changes through one, the watches through the other.
func TestRedisWatches(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	locktest.RunWatches(t, func(t *testing.T) (locks.Backend, locks.Backend) {
		opts := redisbackend.Options{History: locktest.HistoryLen}
		return newRedis(t, srv, opts), newRedis(t, srv, opts)
	}, dropNameRecord)
	locktest.RunNoWatches(t, newRedis(t, srv, redisbackend.Options{}))
}

// dropNameRecord loses key's name record, as its expiry or a Redis
// restarted empty would (see locktest.RunWatches).
func dropNameRecord(t *testing.T, b locks.Backend, key locks.Key) {
	if err := b.(*redisbackend.Backend).DropNameRecord(t.Context(), key); err != nil {
		t.Fatalf("drop the name record: %v", err)
	}
}

func TestRedisMaxHold(t *testing.T) {
	srv := redistest.Start(t)
	locktest.RunMaxHold(t, func(t *testing.T) locks.Backend {
		return newRedis(t, srv, redisbackend.Options{History: locktest.HistoryLen})
	})
}

func TestRedisPriority(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	locktest.RunPriority(t, func(t *testing.T, aging time.Duration) locks.Backend {
		return newRedis(t, srv, redisbackend.Options{PriorityAging: aging})
	})
}
