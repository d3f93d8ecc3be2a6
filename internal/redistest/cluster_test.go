package redistest

import (
	"context"
	"strconv"
	"strings"
	"testing"
)

// TestStartClusterEpochsAreSettled: when StartCluster returns, every master
// of the new cluster has a config epoch of its own, above 0, and every
// node knows them all. Masters left to settle their epochs by gossip (a
// node of epoch 0 and two that had collided, one bump at a time) made
// MigrateSlot's target keep its old epoch at the close, when it had not
// yet heard of the owner's higher one; a message of the owner sent before
// it let the slot go then gave the slot back to it on the target, and
// each node sent the slot's callers to the other for good
// (TestRedisClusterFollowsMoved, 2 runs in about 130: "release after the
// slot moved: … MOVED 13242 127.0.0.1:42035", the target's own view
// without slot 13242 and the owner's giving it to the target).
func TestStartClusterEpochsAreSettled(t *testing.T) {
	c := StartCluster(t, 3)
	for _, n := range c.Nodes {
		nodes, err := n.Client(t).ClusterNodes(context.Background()).Result()
		if err != nil {
			t.Fatalf("cluster nodes on %s: %v", n.Addr, err)
		}
		seen := map[string]string{}
		for line := range strings.Lines(nodes) {
			f := strings.Fields(line)
			if len(f) < 8 || !strings.Contains(f[2], "master") {
				continue
			}
			if e, _ := strconv.Atoi(f[6]); e < 1 {
				t.Fatalf("on %s, master %s has config epoch %s, want one of its own above 0:\n%s", n.Addr, f[1], f[6], nodes)
			}
			if other, ok := seen[f[6]]; ok {
				t.Fatalf("on %s, masters %s and %s share config epoch %s:\n%s", n.Addr, other, f[1], f[6], nodes)
			}
			seen[f[6]] = f[1]
		}
		if len(seen) != len(c.Nodes) {
			t.Fatalf("on %s, %d masters with an epoch of their own, want %d:\n%s", n.Addr, len(seen), len(c.Nodes), nodes)
		}
	}
}
