package main

import (
	"context"
	"fmt"
	"net/http"
	"time"
)

// cmdBreak ends every grant of a lock, whoever holds it, now or after
// --period: an administrator's call (the token must administer the
// namespace; see lockctl token --admin). It exits 1, as status does, when
// nobody held the lock.
func cmdBreak(ctx context.Context, c cli, args []string) error {
	fs := c.newFlagSet("break", "break namespace/name [--period D]")
	cf := addClientFlags(fs)
	period := fs.Duration("period", 0, "let the grants run on this long first (renewals never pass its end); 0 ends them now")
	l, err := oneLock(fs, args)
	if err != nil {
		return err
	}
	if *period < 0 || *period%time.Millisecond != 0 {
		return usagef("break: --period must be 0 or more, in whole milliseconds, got %s", *period)
	}
	cl, err := cf.client(c.getenv)
	if err != nil {
		return err
	}
	var out struct {
		Broken int   `json:"broken"`
		Left   int64 `json:"break_period_ms"`
	}
	var body any
	if *period > 0 {
		body = map[string]int64{"break_period_ms": period.Milliseconds()}
	}
	err = cl.do(ctx, http.MethodPost, l.path()+"/break", body, "", cl.timeout, http.StatusOK, &out)
	if isCode(err, "not_held") {
		fmt.Fprintf(c.stdout, "%s is free: nothing to break\n", l)
		return exitStatus(exitFree)
	}
	if err != nil {
		return fmt.Errorf("break %s: %w", l, err)
	}
	if out.Left > 0 {
		_, err = fmt.Fprintf(c.stdout, "%s: %d grant(s) end in %s at the latest (renewals cannot pass it); then their holders get 409 not_holder (broken) on their next call\n",
			l, out.Broken, time.Duration(out.Left)*time.Millisecond)
		return err
	}
	_, err = fmt.Fprintf(c.stdout, "%s: broke %d grant(s); their holders get 409 not_holder (broken) on their next call\n", l, out.Broken)
	return err
}
