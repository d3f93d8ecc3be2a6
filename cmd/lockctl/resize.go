package main

import (
	"context"
	"fmt"
	"net/http"
)

// cmdResize changes the limit of a semaphore in use: an administrator's
// call, as break is (the token must administer the namespace). It exits
// 1, as status --semaphore does, when the semaphore is idle: an idle one
// keeps no limit to change.
func cmdResize(ctx context.Context, c cli, args []string) error {
	fs := c.newFlagSet("resize", "resize namespace/name --limit N")
	cf := addClientFlags(fs)
	limit := fs.Int("limit", 0, fmt.Sprintf("the new limit, 1 to %d", maxLimit))
	l, err := oneLock(fs, args)
	if err != nil {
		return err
	}
	if *limit < 1 || *limit > maxLimit {
		return usagef("resize: --limit must be 1 to %d, got %d", maxLimit, *limit)
	}
	l.semaphore = true
	cl, err := cf.client(c.getenv)
	if err != nil {
		return err
	}
	var out struct {
		Limit   int `json:"limit"`
		Held    int `json:"held"`
		Waiters int `json:"waiters"`
	}
	err = cl.do(ctx, http.MethodPut, l.path()+"/limit", map[string]int{"limit": *limit}, "", cl.timeout, http.StatusOK, &out)
	if isCode(err, "not_held") {
		fmt.Fprintf(c.stdout, "semaphore %s is idle: no limit to change (the next acquire's applies)\n", l)
		return exitStatus(exitFree)
	}
	if err != nil {
		return fmt.Errorf("resize %s: %w", l, err)
	}
	_, err = fmt.Fprintf(c.stdout, "semaphore %s: limit %d, %d permits held, %d waiting\n", l, out.Limit, out.Held, out.Waiters)
	return err
}
