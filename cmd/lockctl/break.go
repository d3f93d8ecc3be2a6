package main

import (
	"context"
	"fmt"
	"net/http"
)

// cmdBreak ends every grant of a lock, whoever holds it: an administrator's
// call (the token must administer the namespace; see lockctl token
// --admin). It exits 1, as status does, when nobody held the lock.
func cmdBreak(ctx context.Context, c cli, args []string) error {
	fs := c.newFlagSet("break", "break namespace/name")
	cf := addClientFlags(fs)
	l, err := oneLock(fs, args)
	if err != nil {
		return err
	}
	cl, err := cf.client(c.getenv)
	if err != nil {
		return err
	}
	var out struct {
		Broken int `json:"broken"`
	}
	err = cl.do(ctx, http.MethodPost, l.path()+"/break", nil, "", cl.timeout, http.StatusOK, &out)
	if isCode(err, "not_held") {
		fmt.Fprintf(c.stdout, "%s is free: nothing to break\n", l)
		return exitStatus(exitFree)
	}
	if err != nil {
		return fmt.Errorf("break %s: %w", l, err)
	}
	_, err = fmt.Fprintf(c.stdout, "%s: broke %d grant(s); their holders get 409 not_holder (broken) on their next call\n", l, out.Broken)
	return err
}
