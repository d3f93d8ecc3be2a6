package safety

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"time"
)

// The calls of the primitives beyond a plain lock, as the workloads and the
// exactly-once tests make them. Each decodes a success into grant.

// decodeGrant decodes r's body into a grant when r has status want.
func decodeGrant(r *result, want int) grant {
	var g grant
	if r.status == want && r.err == nil {
		if err := json.Unmarshal(r.body, &g); err != nil {
			r.err = err
		}
	}
	return g
}

// reenter re-enters the grant of tok: 200 with the holds counted.
func (c *client) reenter(ctx context.Context, lock, tok string, ttl time.Duration) (grant, result) {
	r := c.do(ctx, "POST", "/locks/"+lock, fmt.Sprintf(`{"ttl_ms":%d}`, ttl.Milliseconds()), "Lock-Token", tok)
	return decodeGrant(&r, http.StatusOK), r
}

// releaseHold ends one hold of tok's grant: 200 with the holds left, or
// 204 when it was the last. hold names the hold (a re-entry's hold id);
// "" ends the acquire's own.
func (c *client) releaseHold(ctx context.Context, lock, tok, hold string) (int, result) {
	path := "/locks/" + lock
	if hold != "" {
		path += "?hold=" + url.QueryEscape(hold)
	}
	r := c.do(ctx, "DELETE", path, "", "Lock-Token", tok)
	if r.status == http.StatusNoContent {
		return 0, r
	}
	return decodeGrant(&r, http.StatusOK).Holds, r
}

// acquireOnce is acquire with an Idempotency-Key.
func (c *client) acquireOnce(ctx context.Context, lock, key string, ttl, wait time.Duration) (grant, result) {
	body := fmt.Sprintf(`{"ttl_ms":%d,"wait_ms":%d}`, ttl.Milliseconds(), wait.Milliseconds())
	r := c.do(ctx, "POST", "/locks/"+lock, body, "Idempotency-Key", key)
	return decodeGrant(&r, http.StatusCreated), r
}

// ticket is the 202 of an acquire with Prefer: respond-async.
type ticket struct {
	Ticket      string `json:"ticket"`
	TicketToken string `json:"ticket_token"`
	location    string
}

// openTicket asks for lock with Prefer: respond-async: 201 and a grant
// when the lock is free, 202 and a ticket when it is not.
func (c *client) openTicket(ctx context.Context, lock string, ttl, wait time.Duration) (grant, ticket, result) {
	body := fmt.Sprintf(`{"ttl_ms":%d,"wait_ms":%d}`, ttl.Milliseconds(), wait.Milliseconds())
	r := c.do(ctx, "POST", "/locks/"+lock, body, "Prefer", "respond-async")
	var tk ticket
	if r.status == http.StatusAccepted && r.err == nil {
		if err := json.Unmarshal(r.body, &tk); err != nil {
			r.err = err
		}
		tk.location = r.header.Get("Location")
	}
	return decodeGrant(&r, http.StatusCreated), tk, r
}

// poll polls a ticket: 200 while it waits, 201 and the grant once the lock
// reached it.
func (c *client) poll(ctx context.Context, tk ticket) (grant, result) {
	r := c.do(ctx, "GET", tk.location, "", "Ticket-Token", tk.TicketToken)
	return decodeGrant(&r, http.StatusCreated), r
}

// lockInfo is what GET says of a lock: nothing held (a 404) is the zero
// value.
type lockInfo struct {
	FencingToken int64 `json:"fencing_token"`
	Holds        int   `json:"holds"`
	Waiters      int   `json:"waiters"`
}

// inspect reads the lock's holder; ok is false when the gateway did not
// answer 200 or 404.
func (c *client) inspect(ctx context.Context, lock string) (info lockInfo, r result, ok bool) {
	r = c.do(ctx, "GET", "/locks/"+lock, "")
	switch r.status {
	case http.StatusNotFound:
		return lockInfo{}, r, true
	case http.StatusOK:
		return info, r, json.Unmarshal(r.body, &info) == nil
	}
	return lockInfo{}, r, false
}

// closeTicket leaves the queue (and releases a grant the ticket was handed).
func (c *client) closeTicket(ctx context.Context, tk ticket) result {
	return c.do(ctx, "DELETE", tk.location, "", "Ticket-Token", tk.TicketToken)
}
