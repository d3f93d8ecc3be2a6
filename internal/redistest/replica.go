package redistest

import (
	"context"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// StartReplica runs a redis-server that replicates primary (--replicaof),
// on a free loopback port, and waits until it has every write primary had.
// Replication is asynchronous, as in production: writes made later reach
// it only if it is still a replica; see WaitSynced and Promote.
func StartReplica(t testing.TB, primary *Server) *Server {
	t.Helper()
	// A full sync streams the snapshot (diskless, the default since Redis
	// 7), without the 5 s wait for more replicas to join.
	if err := primary.Client(t).ConfigSet(context.Background(), "repl-diskless-sync-delay", "0").Err(); err != nil {
		t.Fatalf("config set on %s: %v", primary.Addr, err)
	}
	host, port, _ := net.SplitHostPort(primary.Addr)
	dir := t.TempDir() // a replica writes the snapshot it receives there
	s := start(t, func(string) []string { return []string{"--replicaof", host, port, "--dir", dir} })
	s.WaitSynced(t, primary)
	return s
}

// StartPersistent runs a redis-server like Start, but in a data directory
// of its own that Restart keeps: a restart loads the RDB file that the last
// SAVE wrote (nothing is saved on its own), as a Redis restarting from a
// stale snapshot does.
func StartPersistent(t testing.TB) *Server {
	t.Helper()
	dir := t.TempDir()
	return start(t, func(string) []string { return []string{"--dir", dir, "--dbfilename", "dump.rdb"} })
}

// WaitSynced waits, for at most 10 s, until this replica is linked to
// primary, has applied every write primary had when it was called, and
// acknowledges primary's new writes (WAIT 1 answers 1).
//
// The last is not implied by the others. After a diskless full sync, Redis
// 7.0 starts streaming writes to the replica only on the replica's first
// REPLCONF ACK that comes after the primary saw the snapshot sent; the
// replica sends one at once when it has loaded it, which the primary may
// read before it notices the end of the snapshot (on its next cron tick),
// and the next one comes a second later. Meanwhile the replica says its
// link is up and the primary says it is online, yet every WAIT times out:
// a gateway with --redis-min-replicas answers 503 to its first calls.
func (s *Server) WaitSynced(t testing.TB, primary *Server) {
	t.Helper()
	ctx := context.Background()
	pc, rc := primary.Client(t), s.Client(t)
	info, err := pc.Info(ctx, "replication").Result()
	if err != nil {
		t.Fatalf("info replication on %s: %v", primary.Addr, err)
	}
	want := infoInt(info, "master_repl_offset")
	deadline := time.Now().Add(10 * time.Second)
	for {
		info, err := rc.Info(ctx, "replication").Result()
		if err == nil && strings.Contains(info, "master_link_status:up") &&
			!strings.Contains(info, "master_sync_in_progress:1") && infoInt(info, "slave_repl_offset") >= want {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("replica %s did not reach offset %d of %s within 10s: %v\n%s", s.Addr, want, primary.Addr, err, info)
		}
		time.Sleep(10 * time.Millisecond) // poll interval
	}
	// A PUBLISH is replicated and leaves no key; WAIT's timeout paces the
	// polling.
	c := redis.NewClient(&redis.Options{Addr: primary.Addr, PoolSize: 1})
	defer c.Close()
	for {
		var acked *redis.Cmd
		_, err := c.Pipelined(ctx, func(p redis.Pipeliner) error { // one connection: WAIT counts its writes
			p.Publish(ctx, "redistest:synced", "")
			acked = p.Do(ctx, "WAIT", 1, 100)
			return nil
		})
		if n, _ := acked.Int64(); err == nil && n >= 1 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("replica %s does not acknowledge the writes of %s (WAIT 1) within 10s: %v", s.Addr, primary.Addr, err)
		}
	}
}

// Promote makes a replica a primary of its own (REPLICAOF NO ONE), as a
// failover does: what the old primary writes from now on never reaches it.
func (s *Server) Promote(t testing.TB) {
	t.Helper()
	c := redis.NewClient(&redis.Options{Addr: s.Addr})
	defer c.Close()
	if err := c.Do(context.Background(), "REPLICAOF", "NO", "ONE").Err(); err != nil {
		t.Fatalf("promote %s: %v", s.Addr, err)
	}
}

// infoInt reads one integer field of an INFO answer; -1 when absent.
func infoInt(info, field string) int64 {
	for line := range strings.Lines(info) {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), field+":"); ok {
			n, err := strconv.ParseInt(v, 10, 64)
			if err == nil {
				return n
			}
		}
	}
	return -1
}
