package main

import (
	"errors"
	"fmt"
	"net/http"
)

// Exit codes. lockctl's own outcomes sit at 80 and up so that, for run,
// they do not collide with the small codes commands commonly use, nor with
// the shell's 126, 127 and 128+N.
const (
	exitOK         = 0
	exitFree       = 1 // status: nobody holds the lock
	exitUsage      = 2
	exitHeld       = 80
	exitNotHolder  = 81
	exitAuth       = 82
	exitUnavail    = 83
	exitLeaseLost  = 84
	exitFailure    = 85
	exitCannotExec = 126
	exitNotFound   = 127
	exitSignalBase = 128
)

// exitCodeTable is shown by "lockctl help"; doc.go repeats it, and a test
// keeps the two the same.
const exitCodeTable = `Exit codes:
  0      success; status: the lock is held
  1      status: the lock is free
  2      usage error: bad flags or arguments, or the gateway refused them (400, or 409 limit_mismatch:
         the semaphore is in use with another --limit)
  80     held by someone else (409 lock_held), or every permit taken (409 semaphore_full):
         at once, or when --wait ran out; run --once-per: the command ran within the period
         (or runs now), here or elsewhere, and did not run this time (no message)
  81     not the holder (409 not_holder): released, expired, or someone else holds it now;
       or the session ended (404 session_ended)
  82     auth failure: no token, an invalid or expired one (401), or the namespace is not granted (403)
  83     gateway unreachable, timed out, busy or unavailable (429, 502, 503, 504)
  84     run: the lease was lost while the command ran, so lockctl stopped it
         (also when the command exited 0 but its release found the lease already gone)
  85     any other failure (an unexpected answer from the gateway)
  126    run: the command could not be executed
  127    run: the command was not found
  128+N  run: the command was killed by signal N (130 SIGINT, 137 SIGKILL, 143 SIGTERM)
  other  run: the command's own exit code
`

// usageError is a mistake in the command line.
type usageError struct {
	msg     string
	printed bool // the flag package has shown it already
}

func (e *usageError) Error() string { return e.msg }

func usagef(format string, args ...any) error {
	return &usageError{msg: fmt.Sprintf(format, args...)}
}

// exitStatus ends lockctl with a code and no message: the command's own
// code in run, or "free" in status.
type exitStatus int

func (e exitStatus) Error() string { return fmt.Sprintf("exit status %d", int(e)) }

// errLeaseLost means run stopped its command because it no longer held the
// lock.
var errLeaseLost = errors.New("lease lost")

// exitCode is the exit code for err.
func exitCode(err error) int {
	var (
		st    exitStatus
		usage *usageError
		unrch *unreachableError
		api   *apiError
		start *startErr
	)
	switch {
	case err == nil:
		return exitOK
	case errors.As(err, &st):
		return int(st)
	case errors.As(err, &start):
		return start.code
	case errors.Is(err, errLeaseLost):
		return exitLeaseLost
	case errors.Is(err, errNoJWT):
		return exitAuth
	case errors.As(err, &usage):
		return exitUsage
	case errors.As(err, &unrch):
		return exitUnavail
	case errors.As(err, &api):
		return api.exitCode()
	}
	return exitFailure
}

// exitCode maps a problem to an exit code by its stable code, and by status
// when the answer did not come from lockgate (a proxy's 502, say).
func (e *apiError) exitCode() int {
	switch e.Code {
	case "lock_held", "semaphore_full", "session_full":
		return exitHeld
	case "not_holder", "session_ended":
		return exitNotHolder
	case "unauthorized", "forbidden", "session_not_yours", "session_token_mismatch":
		return exitAuth
	case "backend_unavailable", "too_many_requests", "too_many_watchers":
		return exitUnavail
	case "invalid_request", "payload_too_large", "limit_mismatch":
		return exitUsage
	}
	switch e.Status {
	case http.StatusUnauthorized, http.StatusForbidden:
		return exitAuth
	case http.StatusTooManyRequests, http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout:
		return exitUnavail
	}
	return exitFailure
}
