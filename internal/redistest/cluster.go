package redistest

import (
	"context"
	"fmt"
	"net"
	"path/filepath"
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

// ready reports whether every node knows all the others and says ok.
func ready(clients []*redis.Client) bool {
	for _, cl := range clients {
		info, err := cl.ClusterInfo(context.Background()).Result()
		if err != nil || !strings.Contains(info, "cluster_state:ok") ||
			!strings.Contains(info, fmt.Sprintf("cluster_known_nodes:%d", len(clients))) {
			return false
		}
	}
	return true
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
