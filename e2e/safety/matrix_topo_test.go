package safety

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockgate/lockgate/internal/redistest"
)

// The columns of the fault matrix: where the gateways' Redis is, and the
// faults that only it has. Every topology puts a proxy in front of every
// connection a gateway makes (pub/sub included), so that the faults every
// topology shares (delays, lost replies, commands sent twice, cut links)
// reach all of them. Adding a topology is adding a column here.
var topologies = []topology{
	{name: "single", start: startSingle},
	{name: "cluster", start: startClusterTopology},
	{name: "failover", start: startFailoverTopology},
}

type topology struct {
	name  string
	start func(t *testing.T) *faulty
}

// faulty is a running topology: its gateways, every proxy in front of
// Redis, and its own faults.
type faulty struct {
	name     string // the topology's
	gateways []*gatewaySlot
	proxies  []*proxy
	// rowWorkers gives rows more workers than their own (primitive
	// workers), by row name, in this test's rounds.
	rowWorkers map[string]int
	// holdLoad, when set, keeps a round's load going past its length
	// until it is closed: an injector whose faults need the load (each of
	// the migrations of TestClusterSlotMigration) closes it once they
	// are done, however long a busy machine made them take.
	holdLoad chan struct{}
	// live is the round under way, for an injector that asks what its
	// calls met.
	live *roundState
	// redis are direct clients of the nodes that hold the data now, for
	// the lease check (matrix_leases_test.go).
	redis redisNodes
	// pause stops a Redis node (SIGSTOP) and returns what resumes it.
	pause func(t *testing.T, rng *rand.Rand) func()
	// own are the topology's own faults (a failover, a slot migration),
	// each returning what it did and whether it bit: the failover lost
	// writes, the migration moved keys of a round's name.
	own []func(t *testing.T, rng *rand.Rand, names []string) (string, bool)
	// lost are the times around which released grants may come back (a
	// failover that lost the releases): a 204 then is not trusted.
	mu   sync.Mutex
	lost []time.Time
	// timeline is every fault injected, in order, so that a finding can
	// say which ones came near it (see faultsBetween).
	timeline []faultNote
}

// faultNote is one fault injected: what, from when to when.
type faultNote struct {
	from, to time.Time
	what     string
}

// noteFault adds a fault that ran from from until now to the timeline.
func (f *faulty) noteFault(from time.Time, what string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.timeline = append(f.timeline, faultNote{from: from, to: time.Now(), what: what})
}

// faultsBetween describes the faults that overlapped [from, to], or says
// there were none.
func (f *faulty) faultsBetween(from, to time.Time) string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []string
	for _, n := range f.timeline {
		if n.to.Before(from) || n.from.After(to) {
			continue
		}
		if n.to.Sub(n.from) < time.Millisecond {
			out = append(out, stamp(n.from)+" "+n.what)
		} else {
			out = append(out, stamp(n.from)+"-"+stamp(n.to)+" "+n.what)
		}
	}
	if len(out) == 0 {
		return "none"
	}
	return strings.Join(out, "; ")
}

// trusted says whether a 204 answered at freed ended its grant for good:
// not within the 2 s before a failover (the replica's link was cut for
// part of them) or just after it.
func (f *faulty) trusted(freed time.Time) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, at := range f.lost {
		if freed.After(at.Add(-2*time.Second)) && freed.Before(at.Add(200*time.Millisecond)) {
			return false
		}
	}
	return true
}

// gatewaySlot is one gateway process, which a fault may kill (SIGKILL) and
// start again with the same flags, on a new port.
type gatewaySlot struct {
	args []string
	mu   sync.Mutex
	gw   *gateway
	c    *client
}

// matrixGatewayArgs are the flags every gateway of the matrix gets.
var matrixGatewayArgs = []string{"--redis-timeout", "500ms", "--ticket-liveness", ticketLiveness.String()}

func startSlot(t *testing.T, args ...string) *gatewaySlot {
	t.Helper()
	s := &gatewaySlot{args: append(append([]string{}, matrixGatewayArgs...), args...)}
	s.gw = startGatewayProcess(t, s.args...)
	s.c = newClient(t, s.gw)
	return s
}

func (s *gatewaySlot) client() *client {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.c
}

func (s *gatewaySlot) gateway() *gateway {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.gw
}

// restart kills the gateway (SIGKILL) and starts another with its flags.
func (s *gatewaySlot) restart(t *testing.T) {
	t.Helper()
	s.gateway().stop()
	gw := startGatewayProcess(t, s.args...)
	c := newClient(t, gw)
	s.mu.Lock()
	s.gw, s.c = gw, c
	s.mu.Unlock()
}

// startSingle: one Redis, three gateways, each through a proxy of its own.
func startSingle(t *testing.T) *faulty {
	rs := redistest.Start(t)
	f := &faulty{pause: func(t *testing.T, _ *rand.Rand) func() { rs.Pause(t); return func() { rs.Resume(t) } }}
	direct := []*redis.Client{directClient(t, rs.Addr)}
	f.redis = func() []*redis.Client { return direct }
	for range 3 {
		p := startProxy(t, rs.Addr)
		f.proxies = append(f.proxies, p)
		f.gateways = append(f.gateways, startSlot(t, "--redis-url", "redis://"+p.Addr))
	}
	return f
}

// startClusterTopology: a 3-master Cluster, each node behind a proxy it
// announces, three gateways; its own fault moves the slot of one of the
// round's names to another node under load.
func startClusterTopology(t *testing.T) *faulty {
	pc := startProxiedCluster(t, 3)
	f := &faulty{proxies: pc.proxies}
	var direct []*redis.Client
	for _, n := range pc.cluster.Nodes {
		direct = append(direct, directClient(t, n.Addr))
	}
	f.redis = func() []*redis.Client { return direct }
	f.pause = func(t *testing.T, rng *rand.Rand) func() {
		n := pc.cluster.Nodes[rng.IntN(len(pc.cluster.Nodes))]
		n.Pause(t)
		return func() { n.Resume(t) }
	}
	f.own = append(f.own, func(t *testing.T, rng *rand.Rand, names []string) (string, bool) {
		name := names[rng.IntN(len(names))]
		slot := pc.cluster.KeySlot(t, hashTag(name))
		m := pc.cluster.MigrateSlot(t, slot, otherNode(rng, len(pc.cluster.Nodes), pc.cluster.Owner(t, slot)))
		return fmt.Sprintf("migrated the slot of %s (%d keys) from node %d to %d", name, m.Keys, m.From, m.To), m.Keys > 0
	})
	for range 3 {
		f.gateways = append(f.gateways, startSlot(t, pc.gatewayArgs()...))
	}
	return f
}

// startFailoverTopology: a primary and a replica, three gateways with
// --redis-min-replicas 1, each through a proxy of its own (the service
// address). Its own fault is a failover that loses writes: the replica's
// link is cut while the load goes on (what the primary grants then is not
// acknowledged, 503), the primary is killed (SIGKILL), the replica is
// promoted (REPLICAOF NO ONE), the proxies move to it, and a new replica
// is started for it.
func startFailoverTopology(t *testing.T) *faulty {
	var mu sync.Mutex
	primary := redistest.Start(t)
	replica := redistest.StartReplica(t, primary)
	f := &faulty{}
	var direct atomic.Pointer[redis.Client] // the failover holds mu a while
	direct.Store(directClient(t, primary.Addr))
	f.redis = func() []*redis.Client {
		if c := direct.Load(); c != nil {
			return []*redis.Client{c}
		}
		return nil
	}
	f.pause = func(t *testing.T, _ *rand.Rand) func() {
		mu.Lock()
		p := primary
		mu.Unlock()
		p.Pause(t)
		return func() { p.Resume(t) }
	}
	f.own = append(f.own, func(t *testing.T, rng *rand.Rand, _ []string) (string, bool) {
		mu.Lock()
		defer mu.Unlock()
		cutReplication(t, primary, replica)
		time.Sleep(time.Duration(200+rng.IntN(300)) * time.Millisecond) // the load goes on, unacknowledged
		f.mu.Lock()
		f.lost = append(f.lost, time.Now())
		f.mu.Unlock()
		missing, state, checked := unreplicated(t, primary, replica)
		direct.Store(nil) // no lease check reads until the replica is the primary
		primary.Stop()
		replica.Promote(t)
		for _, p := range f.proxies {
			p.setUpstream(replica.Addr)
		}
		primary, replica = replica, redistest.StartReplica(t, replica)
		direct.Store(directClient(t, primary.Addr))
		return fmt.Sprintf("failed over to %s, losing %d of the old primary's %d keys (%d besides call records)", primary.Addr, missing, checked, state), missing > 0
	})
	for range 3 {
		p := startProxy(t, primary.Addr)
		f.proxies = append(f.proxies, p)
		f.gateways = append(f.gateways, startSlot(t, "--redis-url", "redis://"+p.Addr,
			"--redis-min-replicas", "1", "--redis-replica-timeout", "200ms"))
	}
	return f
}

// otherNode draws a node of n other than not.
func otherNode(rng *rand.Rand, n, not int) int {
	i := rng.IntN(n - 1)
	if i >= not {
		i++
	}
	return i
}

// unreplicated counts the keys the primary holds, with a second or more
// left to live (or no TTL), that its replica does not have: writes a
// failover to the replica loses; state of them are not call records
// (P13), but locks, queues, fences or idempotency records. A key that
// lives on past the check on the primary cannot have expired on the
// replica, which reads the primary's expiry times.
func unreplicated(t *testing.T, primary, replica *redistest.Server) (missing, state, checked int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	pc, rc := primary.Client(t), replica.Client(t)
	iter := pc.Scan(ctx, 0, "*", 1000).Iterator()
	var keys []string
	for iter.Next(ctx) {
		keys = append(keys, iter.Val())
	}
	if err := iter.Err(); err != nil {
		t.Fatalf("scan the primary %s: %v", primary.Addr, err)
	}
	ttls := make([]*redis.DurationCmd, len(keys))
	if _, err := pc.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, k := range keys {
			ttls[i] = p.PTTL(ctx, k)
		}
		return nil
	}); err != nil && err != redis.Nil {
		t.Fatalf("pttl on the primary %s: %v", primary.Addr, err)
	}
	var live []string
	for i, k := range keys {
		if d := ttls[i].Val(); d == -1 || d > time.Second {
			live = append(live, k)
		}
	}
	found := make([]*redis.IntCmd, len(live))
	if _, err := rc.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, k := range live {
			found[i] = p.Exists(ctx, k)
		}
		return nil
	}); err != nil {
		t.Fatalf("exists on the replica %s: %v", replica.Addr, err)
	}
	for i, e := range found {
		if e.Val() == 0 {
			missing++
			if !strings.Contains(live[i], "}:c:") {
				state++
			}
		}
	}
	return missing, state, len(live)
}
