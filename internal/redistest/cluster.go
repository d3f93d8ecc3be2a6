package redistest

import (
	"context"
	"fmt"
	"net"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// Cluster is a Redis Cluster of masters without replicas, each a
// redis-server owned by the test.
type Cluster struct {
	Nodes []*Server
}

// StartCluster runs n redis-servers in cluster mode on free loopback ports,
// splits the 16384 slots between them, joins them, and waits until every
// node says the cluster is ok.
func StartCluster(t testing.TB, n int) *Cluster {
	t.Helper()
	dir := t.TempDir()
	c := &Cluster{}
	buses := make([]string, n)
	for i := range n {
		c.Nodes = append(c.Nodes, start(t, func(port string) []string {
			_, bus, _ := net.SplitHostPort(freeAddr(t)) // port+10000 may not exist
			buses[i] = bus
			return []string{
				"--cluster-enabled", "yes",
				"--cluster-port", bus,
				"--cluster-config-file", filepath.Join(dir, "nodes-"+port+".conf"),
				"--cluster-node-timeout", "5000",
				"--dir", dir,
			}
		}))
	}
	ctx := context.Background()
	per := 16384 / n
	for i, node := range c.Nodes {
		cl := node.Client(t)
		// An epoch of its own, as redis-cli --cluster create gives each
		// master: left to gossip, the masters start at 0 and settle their
		// collisions a bump at a time, and a slot moved meanwhile can go
		// back to its old owner (TestStartClusterEpochsAreSettled).
		if err := cl.Do(ctx, "CLUSTER", "SET-CONFIG-EPOCH", i+1).Err(); err != nil {
			t.Fatalf("cluster set-config-epoch on %s: %v", node.Addr, err)
		}
		last := (i+1)*per - 1
		if i == n-1 {
			last = 16383
		}
		if err := cl.Do(ctx, "CLUSTER", "ADDSLOTSRANGE", i*per, last).Err(); err != nil {
			t.Fatalf("cluster addslotsrange on %s: %v", node.Addr, err)
		}
		if i > 0 {
			host, port, _ := net.SplitHostPort(node.Addr)
			if err := c.Nodes[0].Client(t).Do(ctx, "CLUSTER", "MEET", host, port, buses[i]).Err(); err != nil {
				t.Fatalf("cluster meet %s: %v", node.Addr, err)
			}
		}
	}
	clients := make([]*redis.Client, n)
	for i, node := range c.Nodes {
		clients[i] = node.Client(t)
	}
	deadline := time.Now().Add(30 * time.Second)
	for !ready(clients) { // poll until the nodes have gossiped
		if time.Now().After(deadline) {
			t.Fatalf("the cluster did not become ok within 30s")
		}
		time.Sleep(20 * time.Millisecond)
	}
	return c
}

// ready reports whether every node knows all the others, and the highest
// config epoch among them, and says ok.
func ready(clients []*redis.Client) bool {
	for _, cl := range clients {
		info, err := cl.ClusterInfo(context.Background()).Result()
		if err != nil || !strings.Contains(info, "cluster_state:ok") ||
			!strings.Contains(info, fmt.Sprintf("cluster_known_nodes:%d", len(clients))) ||
			infoField(info, "cluster_current_epoch") < len(clients) {
			return false
		}
	}
	return true
}

// infoField is the number field name of an INFO or CLUSTER INFO text, -1
// when it has none.
func infoField(info, name string) int {
	for line := range strings.Lines(info) {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), name+":"); ok {
			if n, err := strconv.Atoi(v); err == nil {
				return n
			}
		}
	}
	return -1
}

// maxEpoch returns the highest config epoch of the cluster's nodes, each by
// its own CLUSTER INFO.
func (c *Cluster) maxEpoch(t testing.TB) int {
	t.Helper()
	most := 0
	for _, n := range c.Nodes {
		info, err := n.Client(t).ClusterInfo(context.Background()).Result()
		if err != nil {
			t.Fatalf("cluster info on %s: %v", n.Addr, err)
		}
		most = max(most, infoField(info, "cluster_my_epoch"))
	}
	return most
}

// Addrs returns the nodes' host:port addresses.
func (c *Cluster) Addrs() []string {
	addrs := make([]string, len(c.Nodes))
	for i, node := range c.Nodes {
		addrs[i] = node.Addr
	}
	return addrs
}

// Client returns a cluster client set up as the gateway's: it never
// re-sends a command (MaxRetries and MaxRedirects -1) and call deadlines
// reach the network. It is closed when the test ends.
func (c *Cluster) Client(t testing.TB) *redis.ClusterClient {
	t.Helper()
	cl := redis.NewClusterClient(&redis.ClusterOptions{Addrs: c.Addrs(), MaxRetries: -1, MaxRedirects: -1, ContextTimeoutEnabled: true})
	t.Cleanup(func() { cl.Close() })
	return cl
}

// AnnounceAt makes each node tell clients that it is at addrs[i] (in
// CLUSTER SLOTS, MOVED and ASK), such as the address of a proxy in front
// of it, and waits until every node says so of every node. The nodes still
// talk to each other directly, on their bus ports.
func (c *Cluster) AnnounceAt(t testing.TB, addrs []string) {
	t.Helper()
	ctx := context.Background()
	for i, node := range c.Nodes {
		cl := node.Client(t)
		bus, err := cl.ConfigGet(ctx, "cluster-port").Result()
		if err != nil {
			t.Fatalf("config get cluster-port on %s: %v", node.Addr, err)
		}
		host, port, _ := net.SplitHostPort(addrs[i])
		if err := cl.ConfigSet(ctx, "cluster-announce-bus-port", bus["cluster-port"]).Err(); err != nil {
			t.Fatalf("config set cluster-announce-bus-port on %s: %v", node.Addr, err)
		}
		if err := cl.ConfigSet(ctx, "cluster-announce-ip", host).Err(); err != nil {
			t.Fatalf("config set cluster-announce-ip on %s: %v", node.Addr, err)
		}
		if err := cl.ConfigSet(ctx, "cluster-announce-port", port).Err(); err != nil {
			t.Fatalf("config set cluster-announce-port on %s: %v", node.Addr, err)
		}
	}
	want := make(map[string]bool)
	for _, a := range addrs {
		want[a] = true
	}
	deadline := time.Now().Add(30 * time.Second)
	for _, node := range c.Nodes {
		cl := node.Client(t)
		for {
			//lint:ignore SA1019 go-redis's ClusterClient reads CLUSTER SLOTS: check what it reads
			slots, err := cl.ClusterSlots(ctx).Result()
			if err == nil && announces(slots, want) {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s does not announce %v within 30s: %v %v", node.Addr, addrs, slots, err)
			}
			time.Sleep(20 * time.Millisecond) // poll until the nodes have gossiped
		}
	}
}

// announces reports whether slots name exactly the addresses of want.
func announces(slots []redis.ClusterSlot, want map[string]bool) bool {
	seen := make(map[string]bool)
	for _, s := range slots {
		for _, n := range s.Nodes {
			if !want[n.Addr] {
				return false
			}
			seen[n.Addr] = true
		}
	}
	return len(seen) == len(want)
}

// KeySlot returns the hash slot of key.
func (c *Cluster) KeySlot(t testing.TB, key string) int {
	t.Helper()
	n, err := c.Nodes[0].Client(t).ClusterKeySlot(context.Background(), key).Result()
	if err != nil {
		t.Fatalf("cluster keyslot %q: %v", key, err)
	}
	return int(n)
}

// MigrateSlot moves slot, and its keys, to node to, as redis-cli --cluster
// reshard does: the target imports it, the owner migrates it, the keys go
// over in batches (MIGRATE), then every node is told the new owner. Clients
// working on the slot meanwhile get ASK and TRYAGAIN replies (keys half
// moved), then MOVED. It does nothing when the slot is on to already.
func (c *Cluster) MigrateSlot(t testing.TB, slot, to int) Migration {
	t.Helper()
	return c.MigrateSlotPaced(t, slot, to, 100, 0, nil)
}

// Migration is what MigrateSlotPaced did.
type Migration struct {
	Slot, From, To int
	// Keys is how many keys went over.
	Keys int
	// Opened is when the slot was first marked importing on the target,
	// Closed when every node had been told its new owner: in between,
	// clients on the slot may be sent ASK or TRYAGAIN, and until their
	// slot map follows, MOVED.
	Opened, Closed time.Time
}

// MigrateSlotPaced is MigrateSlot moving batch keys per MIGRATE and waiting
// gap after each, as a reshard of a slot that holds many keys takes its
// time: the slot stays half moved (importing on the target, migrating on
// the owner) that long. loaded, when not nil, keeps the slot half moved
// after its keys went over until it says that callers met the slot half
// moved (asked every gap, up to maxHalfMoved): a test's load, whatever
// the machine's speed, then meets every migration, which time alone did
// not promise.
func (c *Cluster) MigrateSlotPaced(t testing.TB, slot, to, batch int, gap time.Duration, loaded func(opened time.Time) bool) Migration {
	t.Helper()
	ctx := context.Background()
	ids := make([]string, len(c.Nodes))
	for i, n := range c.Nodes {
		id, err := n.Client(t).ClusterMyID(ctx).Result()
		if err != nil {
			t.Fatalf("cluster myid on %s: %v", n.Addr, err)
		}
		ids[i] = id
	}
	m := Migration{Slot: slot, From: c.Owner(t, slot), To: to}
	if m.From == to {
		return m
	}
	src, dst := c.Nodes[m.From].Client(t), c.Nodes[to].Client(t)
	must := func(err error, what string) {
		if err != nil {
			t.Fatalf("migrate slot %d from %s to %s: %s: %v", slot, c.Nodes[m.From].Addr, c.Nodes[to].Addr, what, err)
		}
	}
	m.Opened = time.Now()
	must(dst.Do(ctx, "CLUSTER", "SETSLOT", slot, "IMPORTING", ids[m.From]).Err(), "importing")
	must(src.Do(ctx, "CLUSTER", "SETSLOT", slot, "MIGRATING", ids[to]).Err(), "migrating")
	host, port, _ := net.SplitHostPort(c.Nodes[to].Addr)
	for {
		keys, err := src.ClusterGetKeysInSlot(ctx, slot, batch).Result()
		must(err, "getkeysinslot")
		if len(keys) == 0 {
			break
		}
		args := []any{"MIGRATE", host, port, "", 0, 5000, "REPLACE", "KEYS"}
		for _, k := range keys {
			args = append(args, k)
		}
		must(src.Do(ctx, args...).Err(), "migrate")
		m.Keys += len(keys)
		time.Sleep(gap) // the pace of the reshard
	}
	for give := time.Now().Add(maxHalfMoved); loaded != nil && !loaded(m.Opened) && time.Now().Before(give); {
		time.Sleep(max(gap, time.Millisecond))
	}
	// The target takes the slot with an epoch above every other master's,
	// which it bumps to only if it has heard of the highest: else a
	// message of the owner sent before it let the slot go, with the
	// higher epoch, gives the slot back to the owner on the target, and
	// each node then sends the slot's callers to the other for good.
	most := c.maxEpoch(t)
	c.waitFor(t, fmt.Sprintf("%s to hear of config epoch %d", c.Nodes[to].Addr, most), func() bool {
		info, err := dst.ClusterInfo(ctx).Result()
		return err == nil && infoField(info, "cluster_current_epoch") >= most
	})
	// The target first, then the owner, then the rest: the order
	// redis-cli uses, so that no node sends clients back to the owner.
	for _, i := range append([]int{to, m.From}, others(len(c.Nodes), to, m.From)...) {
		must(c.Nodes[i].Client(t).Do(ctx, "CLUSTER", "SETSLOT", slot, "NODE", ids[to]).Err(), "setslot node")
	}
	m.Closed = time.Now()
	c.waitFor(t, fmt.Sprintf("every node to say that %s serves slot %d", c.Nodes[to].Addr, slot), func() bool {
		for _, n := range c.Nodes {
			if viewOwner(ctx, n.Client(t), slot) != ids[to] {
				return false
			}
		}
		return true
	})
	return m
}

// waitFor polls cond until it holds, and fails the test, with every
// node's CLUSTER NODES, if it does not within 30 s.
func (c *Cluster) waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); !cond(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			var views strings.Builder
			for _, n := range c.Nodes {
				out, _ := n.Client(t).ClusterNodes(context.Background()).Result()
				fmt.Fprintf(&views, "view of %s:\n%s", n.Addr, out)
			}
			t.Fatalf("waited 30s for %s:\n%s", what, views.String())
		}
	}
}

// viewOwner is the id of the node that serves slot by the view of the
// node behind cl, "" when it names none.
func viewOwner(ctx context.Context, cl *redis.Client, slot int) string {
	//lint:ignore SA1019 go-redis's ClusterClient reads CLUSTER SLOTS: check what it reads
	slots, err := cl.ClusterSlots(ctx).Result()
	if err != nil {
		return ""
	}
	for _, s := range slots {
		if slot >= s.Start && slot <= s.End && len(s.Nodes) > 0 {
			return s.Nodes[0].ID
		}
	}
	return ""
}

// maxHalfMoved bounds how long MigrateSlotPaced waits for its callers.
const maxHalfMoved = 30 * time.Second

// Owner returns the index of the node that serves slot, by its own view.
func (c *Cluster) Owner(t testing.TB, slot int) int {
	t.Helper()
	for i, n := range c.Nodes {
		if owns(context.Background(), n.Client(t), slot) {
			return i
		}
	}
	t.Fatalf("no node owns slot %d", slot)
	return -1
}

// CountKeysInSlot returns how many keys of slot node i holds.
func (c *Cluster) CountKeysInSlot(t testing.TB, i, slot int) int {
	t.Helper()
	n, err := c.Nodes[i].Client(t).ClusterCountKeysInSlot(context.Background(), slot).Result()
	if err != nil {
		t.Fatalf("cluster countkeysinslot %d on %s: %v", slot, c.Nodes[i].Addr, err)
	}
	return int(n)
}

// owns reports whether the node behind cl serves slot, by its own view.
func owns(ctx context.Context, cl *redis.Client, slot int) bool {
	//lint:ignore SA1019 go-redis's ClusterClient reads CLUSTER SLOTS: check what it reads
	slots, err := cl.ClusterSlots(ctx).Result()
	if err != nil {
		return false
	}
	myself, err := cl.ClusterMyID(ctx).Result()
	if err != nil {
		return false
	}
	for _, s := range slots {
		if slot >= s.Start && slot <= s.End && len(s.Nodes) > 0 && s.Nodes[0].ID == myself {
			return true
		}
	}
	return false
}

// others lists 0..n-1 but a and b.
func others(n, a, b int) []int {
	var out []int
	for i := range n {
		if i != a && i != b {
			out = append(out, i)
		}
	}
	return out
}
