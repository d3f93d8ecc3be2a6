package safety

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"time"
)

// acquirePriority is acquire (acquireShared when shared) of a waiter with
// priority p (#39).
func (c *client) acquirePriority(ctx context.Context, lock string, ttl, wait time.Duration, shared bool, p int) (grant, result) {
	mode := "exclusive"
	if shared {
		mode = "shared"
	}
	body := fmt.Sprintf(`{"ttl_ms":%d,"wait_ms":%d,"mode":%q,"priority":%d}`, ttl.Milliseconds(), wait.Milliseconds(), mode, p)
	r := c.do(ctx, "POST", "/locks/"+lock, body)
	var g grant
	if r.status == http.StatusCreated {
		if err := json.Unmarshal(r.body, &g); err != nil {
			r.err = err
		}
	}
	return g, r
}
