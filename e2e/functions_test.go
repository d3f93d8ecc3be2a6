package e2e

import (
	"context"
	"fmt"
	"slices"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/lockgate/lockgate/internal/redistest"
	"github.com/lockgate/lockgate/lua"
)

// TestGatewayLoadsFunctionsAtStart: a gateway loads every script's function
// library on every Redis master before it serves, so that the first calls
// of a new Redis do not all load the same libraries at once (which ran
// past the Redis timeout under load: 503s at the start of
// TestClusterSlotMigration, seed 786933036933525586).
func TestGatewayLoadsFunctionsAtStart(t *testing.T) {
	t.Parallel()
	var want []string
	for _, s := range lua.Scripts() {
		want = append(want, s.Function)
	}
	slices.Sort(want)
	check := func(t *testing.T, node *redis.Client) {
		t.Helper()
		libs, err := node.FunctionList(t.Context(), redis.FunctionListQuery{}).Result()
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, l := range libs {
			got = append(got, l.Name)
		}
		slices.Sort(got)
		if !slices.Equal(got, want) {
			t.Errorf("%s has %d function libraries before any request, want the %d of the scripts:\ngot  %v\nwant %v", node.Options().Addr, len(got), len(want), got, want)
		}
	}
	t.Run("redis", func(t *testing.T) {
		rs := redistest.Start(t)
		startGateway(t, "--redis-url", rs.URL())
		check(t, rs.Client(t))
	})
	t.Run("cluster", func(t *testing.T) {
		c := redistest.StartCluster(t, 3)
		startGateway(t, "--redis-cluster", "--redis-url", "redis://"+c.Nodes[0].Addr)
		err := c.Client(t).ForEachMaster(t.Context(), func(ctx context.Context, node *redis.Client) error {
			check(t, node)
			return nil
		})
		if err != nil {
			t.Fatal(fmt.Errorf("masters: %w", err))
		}
	})
}
