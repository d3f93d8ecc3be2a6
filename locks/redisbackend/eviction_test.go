package redisbackend_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/lockgate/lockgate/internal/redistest"
	"github.com/lockgate/lockgate/locks"
	"github.com/lockgate/lockgate/locks/redisbackend"
)

// TestCheckRefusesEvictingPolicy: Check fails, naming the setting, while
// Redis may evict keys, and passes again once the policy is noeviction.
func TestCheckRefusesEvictingPolicy(t *testing.T) {
	t.Parallel()
	srv := redistest.StartWith(t, "--maxmemory-policy", "allkeys-lru")
	r := newRedis(t, srv, redisbackend.Options{})
	wantEviction(t, r.Check(t.Context()), "allkeys-lru")

	admin := srv.Client(t)
	for _, policy := range []string{"noeviction", "volatile-ttl", "noeviction"} {
		if err := admin.ConfigSet(t.Context(), "maxmemory-policy", policy).Err(); err != nil {
			t.Fatal(err)
		}
		err := r.Check(t.Context())
		if policy == "noeviction" {
			if err != nil {
				t.Fatalf("Check on noeviction: got %v, want nil", err)
			}
			continue
		}
		wantEviction(t, err, policy)
	}
}

// TestCheckServesWhenConfigIsRefused: a Redis that will not say its policy
// (CONFIG renamed away, or a user without +config) still passes Check;
// CheckEviction says what to check.
func TestCheckServesWhenConfigIsRefused(t *testing.T) {
	t.Parallel()
	renamed := redistest.StartWith(t, "--rename-command", "CONFIG", "")
	limited := redistest.Start(t)
	err := limited.Client(t).Do(t.Context(), "ACL", "SETUSER", "gw", "on", ">gw-password", "~*", "&*", "+@all", "-config").Err()
	if err != nil {
		t.Fatal(err)
	}
	for name, c := range map[string]*redis.Client{
		"renamed": newClient(t, renamed),
		"acl": redis.NewClient(&redis.Options{Addr: limited.Addr, Username: "gw", Password: "gw-password",
			MaxRetries: -1, ContextTimeoutEnabled: true}),
	} {
		t.Run(name, func(t *testing.T) {
			t.Cleanup(func() { c.Close() })
			r := openRedis(t, c, redisbackend.Options{})
			t.Cleanup(func() { r.Close() })
			if err := r.Check(t.Context()); err != nil {
				t.Fatalf("Check: got %v, want nil", err)
			}
			err := r.CheckEviction(t.Context())
			var pu *locks.PolicyUnknownError
			if !errors.As(err, &pu) || !strings.Contains(err.Error(), "maxmemory-policy is noeviction") {
				t.Fatalf("CheckEviction: got %v, want a *PolicyUnknownError saying what to check", err)
			}
		})
	}
}

// TestCheckAsksEveryClusterMaster: one master of three that may evict is
// enough to fail Check.
func TestCheckAsksEveryClusterMaster(t *testing.T) {
	t.Parallel()
	cluster := redistest.StartCluster(t, 3)
	r := openRedis(t, cluster.Client(t), redisbackend.Options{})
	t.Cleanup(func() { r.Close() })
	if err := r.Check(t.Context()); err != nil {
		t.Fatalf("Check: got %v, want nil", err)
	}
	for i, node := range cluster.Nodes {
		if err := node.Client(t).ConfigSet(t.Context(), "maxmemory-policy", "volatile-lfu").Err(); err != nil {
			t.Fatal(err)
		}
		err := r.Check(t.Context())
		wantEviction(t, err, "volatile-lfu")
		var ev *locks.EvictionError
		if errors.As(err, &ev) && ev.Addr != node.Addr {
			t.Fatalf("node %d: got Addr %s, want %s", i, ev.Addr, node.Addr)
		}
		if err := node.Client(t).ConfigSet(t.Context(), "maxmemory-policy", "noeviction").Err(); err != nil {
			t.Fatal(err)
		}
	}
}

func wantEviction(t *testing.T, err error, policy string) {
	t.Helper()
	var ev *locks.EvictionError
	if !errors.As(err, &ev) || ev.Policy != policy {
		t.Fatalf("got %v, want an *EvictionError for %s", err, policy)
	}
	want := "Redis maxmemory-policy is " + policy + ": it may evict live locks; set maxmemory-policy noeviction"
	if ev.Detail() != want {
		t.Fatalf("Detail: got %q, want %q", ev.Detail(), want)
	}
}
