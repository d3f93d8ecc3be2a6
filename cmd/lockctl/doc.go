// Command lockctl takes lockgate locks from the shell, over the gateway's
// HTTP API (never Redis directly). Its main use is run, a watchdog that
// holds a lock while a command runs:
//
//	export LOCKGATE_URL=http://127.0.0.1:8080 LOCKGATE_TOKEN=...
//	lockctl run billing/nightly --ttl 30s --wait 5m -- ./nightly.sh
//
// run acquires the lock (waiting server-side), starts the command with
// LOCKGATE_LOCK, LOCKGATE_LOCK_TOKEN and LOCKGATE_FENCING_TOKEN in its
// environment (a nested run of the same lock re-enters it) beside
// lockctl's own, less LOCKGATE_JWT_SECRET (and LOCKGATE_TOKEN with
// --no-token-env), renews the lease every third of its TTL, passes SIGINT,
// SIGTERM and SIGHUP on to the command's process group, releases the lock
// when the command exits and exits with the command's code. After SIGINT
// or SIGTERM the command has --kill-after to exit before it is killed, so
// lockctl always ends. When the
// lease is lost (the gateway says the owner token no longer holds the lock,
// or renewals fail until the lease may have expired) it stops the command,
// SIGTERM then SIGKILL after --kill-after, and exits 84: the command no
// longer has the lock.
//
// In the foreground of a terminal, run hands the terminal to the command's
// process group, as a shell does for a job: the command can read it, and
// Ctrl-C and Ctrl-Z go to the command. A command that stops is reported;
// with a terminal lockctl stops too, so that the shell's "fg" resumes both.
//
// A command may exit 80 to 85 itself. When run exits with a code of its
// own, a line starting "lockctl:" on stderr says why (the acquire failed,
// the lease was lost); the command's own code passes through without one.
// The one exception is run --once-per's 80, which is no failure and says
// nothing.
//
// With --once-per D, run runs the command at most once per D across every
// host that runs it on the lock (cron on several hosts): it does not wait,
// and its grant keeps the lock from every run for D from when it was
// taken (min_hold_ms), released or not; a run that finds it taken exits 80
// at once without running the command.
//
// With --limit N, run (and acquire) take one of the N permits of the
// semaphore namespace/name instead of the lock, so that at most N commands
// run at once; the command gets LOCKGATE_SEMAPHORE instead of LOCKGATE_LOCK.
// release, renew and status take --semaphore for a semaphore's name.
//
// With --shared, run (and acquire) take a shared (read) hold of the lock:
// shared runs run side by side, an exclusive run alone.
//
// With several locks, run holds them in one session; with --set, as one
// lock set instead, taken in one call, every one or none, so that runs
// naming the same locks in any order never deadlock. lockset acquire,
// renew and release are a set's single calls.
//
// list prints the held locks of a namespace.
//
// watch prints the events of a lock as they happen, from the gateway's
// event stream, and opens it again from the last event after a cut.
//
// break ends every grant of a lock, whoever holds it (now, or after --period), for a token that
// administers the namespace (token --admin mints one); it exits 1 when
// nobody held the lock.
//
// resize changes the limit of a semaphore in use, for such a token too; it
// exits 1 when the semaphore is idle.
//
// acquire, release, renew and status are the single calls; token mints an
// HS256 JWT for development. LOCKGATE_URL and LOCKGATE_TOKEN configure it,
// and flags override them. "lockctl help" prints the usage and this table:
//
//	0      success; status: the lock is held
//	1      status: the lock is free
//	2      usage error: bad flags or arguments, or the gateway refused them (400, or 409 limit_mismatch:
//	       the semaphore is in use with another --limit)
//	80     held by someone else (409 lock_held), or every permit taken (409 semaphore_full):
//	       at once, or when --wait ran out; run --once-per: the command ran within the period
//	       (or runs now), here or elsewhere, and did not run this time (no message)
//	81     not the holder (409 not_holder): released, expired, or someone else holds it now;
//	       or the session ended (404 session_ended)
//	82     auth failure: no token, an invalid or expired one (401), or the namespace is not granted (403)
//	83     gateway unreachable, timed out, busy or unavailable (429, 502, 503, 504)
//	84     run: the lease was lost while the command ran, so lockctl stopped it
//	       (also when the command exited 0 but its release found the lease already gone)
//	85     any other failure (an unexpected answer from the gateway)
//	126    run: the command could not be executed
//	127    run: the command was not found
//	128+N  run: the command was killed by signal N (130 SIGINT, 137 SIGKILL, 143 SIGTERM)
//	other  run: the command's own exit code
package main
