package safety

import (
	"strings"
	"testing"

	"github.com/lockgate/lockgate/internal/redistest"
)

// proxiedCluster is a Redis Cluster of masters whose nodes each announce a
// proxy in front of them, so that every connection a gateway makes to the
// cluster, redirections included, goes through the proxy of its node.
type proxiedCluster struct {
	cluster *redistest.Cluster
	proxies []*proxy // proxies[i] is in front of cluster.Nodes[i]
}

func startProxiedCluster(t *testing.T, masters int) proxiedCluster {
	t.Helper()
	c := proxiedCluster{cluster: redistest.StartCluster(t, masters)}
	var addrs []string
	for _, n := range c.cluster.Nodes {
		p := startProxy(t, n.Addr)
		c.proxies = append(c.proxies, p)
		addrs = append(addrs, p.Addr)
	}
	c.cluster.AnnounceAt(t, addrs)
	return c
}

// gatewayArgs are the flags of a gateway on the cluster, through the
// proxies.
func (c proxiedCluster) gatewayArgs() []string {
	url := "redis://" + c.proxies[0].Addr
	var more []string
	for _, p := range c.proxies[1:] {
		more = append(more, "addr="+p.Addr)
	}
	if len(more) > 0 {
		url += "?" + strings.Join(more, "&")
	}
	return []string{"--redis-cluster", "--redis-url", url}
}

// addFault arms the same fault on every node's proxy: whichever node owns
// the key, the first matching command faults. It returns the faults.
func (c proxiedCluster) addFault(kind faultKind, match matcher, n int) []*fault {
	var fs []*fault
	for _, p := range c.proxies {
		fs = append(fs, p.addFault(kind, match, n))
	}
	return fs
}

// fired is how many commands the faults applied to.
func fired(fs []*fault) int {
	n := 0
	for _, f := range fs {
		n += f.count()
	}
	return n
}
