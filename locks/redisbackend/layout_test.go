package redisbackend_test

import (
	"context"
	"errors"
	"testing"

	"github.com/lockgate/lockgate/internal/redistest"
	"github.com/lockgate/lockgate/locks/redisbackend"
)

// TestRedisLayout: a gateway writes its layout on a Redis that has none,
// carries an older one over, and refuses to start on a newer one, whose
// locks it might not see (#36, upgrade).
func TestRedisLayout(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	admin := srv.Client(t)
	ctx := context.Background()
	r := newRedis(t, srv, redisbackend.Options{})
	for _, tc := range []struct {
		name, before string
		wantErr      bool
	}{
		{"none", "", false},
		{"same", "3", false},
		{"older", "2", false},
		{"oldest", "1", false},
		{"newer", "4", true},
		{"garbage", "x", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			admin.Del(ctx, "lockgate:layout")
			if tc.before != "" {
				admin.Set(ctx, "lockgate:layout", tc.before, 0)
			}
			err := r.CheckLayout(ctx)
			var le *redisbackend.LayoutError
			if tc.wantErr {
				if !errors.As(err, &le) {
					t.Fatalf("layout %q: got %v, want a LayoutError", tc.before, err)
				}
				if got := admin.Get(ctx, "lockgate:layout").Val(); got != tc.before {
					t.Fatalf("layout %q after a refusal: got %q, want it left alone", tc.before, got)
				}
				return
			}
			if err != nil {
				t.Fatalf("layout %q: %v", tc.before, err)
			}
			if got := admin.Get(ctx, "lockgate:layout").Val(); got != "3" {
				t.Fatalf("layout %q: Redis holds %q after the check, want 3", tc.before, got)
			}
		})
	}
}
