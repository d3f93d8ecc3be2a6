package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"net/http"
	"time"
)

// maxLimit is the gateway's largest semaphore limit.
const maxLimit = 10000

// addSemaphoreFlag is --semaphore, for the commands that name a semaphore
// without taking a permit (acquire and run name one with --limit).
func addSemaphoreFlag(fs *flag.FlagSet) *bool {
	return fs.Bool("semaphore", false, "namespace/name is a semaphore, not a lock")
}

// semaphoreInfo is the 200 answer of a semaphore inspect.
type semaphoreInfo struct {
	Semaphore string   `json:"semaphore"`
	Limit     int      `json:"limit"`
	Holders   []holder `json:"holders"`
	Waiters   int      `json:"waiters"`
}

// holder is one permit in a semaphoreInfo.
type holder struct {
	Subject      string    `json:"subject"`
	Owner        string    `json:"owner"`
	FencingToken int64     `json:"fencing_token"`
	TTLMs        int64     `json:"ttl_ms"`
	ExpiresAt    time.Time `json:"expires_at"`
	AcquiredAt   time.Time `json:"acquired_at"`
	Holds        int       `json:"holds,omitempty"`    // a lock's holder: 1, or more when re-entered
	HoldIDs      []string  `json:"hold_ids,omitempty"` // a lock's holder: "=" and each re-entry's hold
}

// semaphoreStatus is status --semaphore: exit 0 while any permit is held,
// 1 when none is.
func semaphoreStatus(ctx context.Context, c cli, cl *client, l lockName, asJSON bool) error {
	var info semaphoreInfo
	err := cl.do(ctx, http.MethodGet, l.path(), nil, "", cl.timeout, http.StatusOK, &info)
	if isCode(err, "not_held") {
		if !asJSON {
			fmt.Fprintf(c.stdout, "semaphore %s is free\n", l)
		}
		return exitStatus(exitFree)
	}
	if err != nil {
		return fmt.Errorf("status %s: %w", l, err)
	}
	if asJSON {
		return json.NewEncoder(c.stdout).Encode(info)
	}
	fmt.Fprintf(c.stdout, "semaphore %s: %d of %d permits held, %d waiting\n", l, len(info.Holders), info.Limit, info.Waiters)
	printHolders(c, info.Holders)
	return nil
}

// printHolders lists the holders of a semaphore or a shared lock, one per
// line.
func printHolders(c cli, holders []holder) {
	for _, h := range holders {
		fmt.Fprintf(c.stdout, "  %s (owner %q), fencing token %d, lease ends in %s (%s)\n",
			printable(h.Subject), h.Owner, h.FencingToken, // %q escapes the owner
			(time.Duration(h.TTLMs) * time.Millisecond).String(), h.ExpiresAt.UTC().Format(time.RFC3339))
	}
}
