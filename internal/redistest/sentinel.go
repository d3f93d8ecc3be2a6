package redistest

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// SentinelMaster is the name the sentinels of StartSentinels know the
// master by.
const SentinelMaster = "lockgate"

// Sentinel timings: a master that does not answer for DownAfter is down
// for a sentinel; FailoverTimeout bounds one failover attempt, and a failed
// attempt (a split vote) is retried after twice that.
const (
	DownAfter       = time.Second
	FailoverTimeout = 3 * time.Second
)

// Sentinels is a primary, a replica, and three redis-sentinel processes
// that follow them with a quorum of 2, all on loopback and owned by the
// test.
type Sentinels struct {
	Primary *Server // the primary at the start
	Replica *Server
	Nodes   []*Server // the sentinels
}

// StartSentinels runs a primary, a replica synced with it, and three
// sentinels, each with a config file of its own (sentinel rewrites it),
// and waits until every sentinel sees the primary, the replica and the
// other two sentinels, so that a failover can start as soon as the primary
// is down. Everything is killed when the test ends.
func StartSentinels(t testing.TB) *Sentinels {
	t.Helper()
	s := &Sentinels{Primary: Start(t)}
	s.Replica = StartReplica(t, s.Primary)
	host, port, _ := net.SplitHostPort(s.Primary.Addr)
	dir := t.TempDir()
	for i := range 3 {
		conf := filepath.Join(dir, fmt.Sprintf("sentinel-%d.conf", i))
		text := fmt.Sprintf("sentinel monitor %[1]s %[2]s %[3]s 2\n"+
			"sentinel down-after-milliseconds %[1]s %[4]d\n"+
			"sentinel failover-timeout %[1]s %[5]d\n"+
			"sentinel parallel-syncs %[1]s 1\n",
			SentinelMaster, host, port, DownAfter.Milliseconds(), FailoverTimeout.Milliseconds())
		if err := os.WriteFile(conf, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
		s.Nodes = append(s.Nodes, startServer(t, &Server{conf: conf}, func(string) []string {
			return []string{"--dir", dir}
		}))
	}
	s.waitReady(t)
	return s
}

// waitReady waits, for at most 20 s, until every sentinel sees the master
// up, its replica up, and the two other sentinels.
func (s *Sentinels) waitReady(t testing.TB) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second) // sentinels meet by a hello every 2 s
	for _, n := range s.Nodes {
		c := s.client(n)
		defer c.Close()
		for {
			why := sentinelReady(c)
			if why == "" {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("sentinel %s not ready within 20s: %s\n%s", n.Addr, why, n.log.String())
			}
			time.Sleep(20 * time.Millisecond) // poll interval
		}
	}
}

// sentinelReady says what the sentinel behind c does not see yet; "" when nothing.
func sentinelReady(c *redis.SentinelClient) string {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	m, err := c.Master(ctx, SentinelMaster).Result()
	if err != nil {
		return err.Error()
	}
	switch {
	case m["flags"] != "master":
		return "master flags " + m["flags"]
	case m["num-other-sentinels"] != "2":
		return "other sentinels: " + m["num-other-sentinels"]
	}
	replicas, err := c.Replicas(ctx, SentinelMaster).Result()
	if err != nil {
		return err.Error()
	}
	if len(replicas) != 1 || replicas[0]["flags"] != "slave" || replicas[0]["master-link-status"] != "ok" {
		return fmt.Sprintf("replicas: %v", replicas)
	}
	return ""
}

func (s *Sentinels) client(n *Server) *redis.SentinelClient {
	return redis.NewSentinelClient(&redis.Options{Addr: n.Addr, MaxRetries: -1, DialTimeout: time.Second})
}

// Addrs returns the sentinels' host:port addresses.
func (s *Sentinels) Addrs() []string {
	var addrs []string
	for _, n := range s.Nodes {
		addrs = append(addrs, n.Addr)
	}
	return addrs
}

// URL returns redis+sentinel://s1,s2,s3/lockgate, the gateway's URL form.
func (s *Sentinels) URL() string {
	return "redis+sentinel://" + strings.Join(s.Addrs(), ",") + "/" + SentinelMaster
}

// MasterAddrs returns the master's address as each sentinel says it now
// ("" for one that does not answer).
func (s *Sentinels) MasterAddrs() []string {
	addrs := make([]string, len(s.Nodes))
	for i, n := range s.Nodes {
		c := s.client(n)
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		hp, err := c.GetMasterAddrByName(ctx, SentinelMaster).Result()
		cancel()
		c.Close()
		if err == nil && len(hp) == 2 {
			addrs[i] = net.JoinHostPort(hp[0], hp[1])
		}
	}
	return addrs
}

// KillPrimary kills the primary (SIGKILL, as a crash would), waits until it
// has exited, and returns when the signal was sent.
func (s *Sentinels) KillPrimary(t testing.TB) time.Time {
	t.Helper()
	at := time.Now()
	s.Primary.Stop()
	return at
}

// WaitFailover waits, for at most within, until a sentinel names a master
// other than from, and returns that address and when it was first seen
// (to the poll interval of 10 ms).
func (s *Sentinels) WaitFailover(t testing.TB, from string, within time.Duration) (string, time.Time) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		for _, a := range s.MasterAddrs() {
			if a != "" && a != from {
				return a, time.Now()
			}
		}
		if time.Now().After(deadline) {
			var logs strings.Builder
			for _, n := range s.Nodes {
				fmt.Fprintf(&logs, "sentinel %s:\n%s\n", n.Addr, n.log.String())
			}
			t.Fatalf("no failover from %s within %v\n%s", from, within, logs.String())
		}
		time.Sleep(10 * time.Millisecond) // poll interval
	}
}
