package main

import (
	"fmt"
	"io"
)

const helpText = `lockctl: distributed locks from the shell, over lockgate's HTTP API.

Usage:
  lockctl acquire namespace/name [--shared | --limit N] [--session ID.TOKEN] [--ttl 30s] [--wait 0 | --no-wait] [--owner label] [--value V] [--max-hold D] [--priority N] [--json]
      Take the lock; print its owner token (the whole grant with --json).
      --value V: the grant carries V (an address, say), which status shows
      while it holds the lock: with run, a way to elect one leader among many.
      With --shared, take a shared (read) hold: shared holders hold the lock
      together, an exclusive one alone; a shared request waits behind a
      waiting exclusive one.
      With --limit N, take one of the N permits of the semaphore namespace/name
      instead: up to N holders at once, each with a token and lease of its own.
      --session ID.TOKEN: the grant joins the session and takes its lease.
      --max-hold D: a hard cap on the grant (or permit); no renewal (nor run's, nor a
      session's keep-alive) carries it past its acquisition plus D, at least
      --ttl. Under run, the command is stopped at the cap as on a lost lease
      (exit 84): the lock is the next waiter's then.
      --priority N: the waiter's priority, 0 to 9 (a lock's, a permit's or,
      with lockset acquire and run --set, a lock set's in each lock's queue): a
      higher one is served first, first come, first served within one; every
      --priority-aging of the gateway's (30s) of waiting raises a waiter one
      level, so none waits forever.
  lockctl session open [--ttl 30s] | keep [--ttl D] | end | show  [--session ID.TOKEN] [--json]
      One lease for many grants: open prints the session (ID.TOKEN, a secret);
      acquire --session joins it; one keep renews every grant of it; end
      releases them all. --session - reads it from stdin; $LOCKGATE_SESSION
      also works.
  lockctl lockset acquire namespace/name... [--ttl 30s] [--wait 0 | --no-wait] [--owner label] [--max-hold D] [--priority N] [--json]
  lockctl lockset renew namespace/name... --token T [--ttl D] [--json]
  lockctl lockset release namespace/name... --token T [--json]
      A lock set: up to 16 locks (arguments, or separated by commas) taken in
      one call, every one or none, each with its own fencing token. acquire
      prints the set's token (a secret); renew and release take it with the
      same locks, and renew or release them all in one call. Sets take their
      locks in one order, so two that name the same locks never deadlock.
      release exits 81 when the set no longer held some of its locks (it
      releases the others). --max-hold D caps each lock's grant as acquire's
      does.
  lockctl release namespace/name [--semaphore] --token T
  lockctl renew namespace/name [--semaphore] --token T [--ttl D] [--json]
      --token - reads the owner token from stdin; $LOCKGATE_LOCK_TOKEN also works.
      --semaphore: the token is a semaphore permit's.
  lockctl status namespace/name [--semaphore] [--json]
      Exit 0 when the lock (a permit of the semaphore) is held, 1 when it is free.
  lockctl watch namespace/name [--json] [--count N]
      Print each event of the lock as it happens (acquired, released, expired,
      handed_over, broken, value_changed, ...), one a line, with its index;
      never a token. A stream cut off is opened again from the last event
      printed, so none is lost while the gateway keeps it (--history).
      --count N: exit after N events.
  lockctl list namespace [--json] [--page-size 1000]
      Print the held locks of the namespace, one a line (a JSON object each
      with --json); never a token.
  lockctl break namespace/name [--period D]
      End every grant of the lock now, whoever holds it, and hand it to the
      next waiter; needs a token that administers the namespace (token
      --admin). The holders get 409 not_holder (broken) on their next call.
      With --period D the grants run on for D first (or until their lease
      ends, if sooner): renewals succeed but cannot pass that end, a release
      is as usual. Exit 1 when nobody held it.
  lockctl resize namespace/name --limit N
      Change the limit of the semaphore namespace/name while it is in use;
      needs a token that administers the namespace. A raised limit hands
      permits to waiters at once; a lowered one takes none back. Acquires
      must then send the new --limit until the semaphore is idle. Exit 1
      when it is idle (nobody holds or waits): the next acquire's limit applies.
  lockctl run namespace/name [namespace/name...] [--session | --set] [--shared | --limit N] [--ttl 30s] [--wait 5m | --no-wait] [--value V] [--max-hold D] [--priority N] [--once-per 10m] [--kill-after 10s] [--no-token-env] -- command [args...]
      Take the lock (waiting server-side), run the command with LOCKGATE_LOCK,
      LOCKGATE_LOCK_TOKEN and LOCKGATE_FENCING_TOKEN in its environment (so the
      token is readable by processes of the same user), and lockctl's own
      environment without LOCKGATE_JWT_SECRET. LOCKGATE_TOKEN, the bearer JWT,
      is passed on (a nested run, or any lockctl in the command, needs it);
      --no-token-env leaves it out. Renew every third of the TTL,
      pass SIGINT, SIGTERM and SIGHUP on to it, release when it exits, and exit
      with its code. After SIGINT or SIGTERM to lockctl, the command has
      --kill-after to exit before it gets SIGKILL. If the lease is lost (the
      gateway says the token no longer holds the lock, or renewals fail until
      it may have expired), the command gets SIGTERM, then SIGKILL after
      --kill-after, and lockctl exits 84. A run of the same lock inside the
      command (LOCKGATE_LOCK and LOCKGATE_LOCK_TOKEN set) re-enters the outer
      hold instead of waiting for it, and gives that hold back when done (in
      the same mode: a nested exclusive run inside a --shared one is refused,
      exit 80).
      With --shared, the command runs beside other --shared runs of the lock,
      never beside an exclusive one.
      With --once-per D (cron on several hosts), the command runs at most once
      per D on all of them: run does not wait, and the grant (min_hold_ms D)
      keeps the lock from every run for D from when it was taken, released or
      not. A run that finds it taken exits 80 without a word and without
      running the command. Its lease (--ttl, renewed) still ends the grant
      of a run whose host dies, so keep it short.
      The command runs in a process group of its own. When lockctl runs in the
      foreground of the terminal on its stdin, the command gets the terminal:
      it can read it (prompts work), and Ctrl-C and Ctrl-Z reach it as if
      lockctl were not there. A stopped command is reported on stderr; with a
      terminal, lockctl stops with it ("fg" resumes both; the lease is not
      renewed meanwhile).
      With --limit N it holds one of the N permits of the semaphore namespace/name
      instead of the lock, and sets LOCKGATE_SEMAPHORE instead of LOCKGATE_LOCK and
      LOCKGATE_LOCK_TOKEN (a nested run of the lock of that name does not re-enter):
      at most N commands run at once.
      With several locks, or --session, it holds them in one session of --ttl:
      one keep-alive every third of it for all, one end when the command exits;
      the command gets LOCKGATE_SESSION (the id, never the token) and
      LOCKGATE_FENCING_TOKENS ("ns/a=12 ns/b=7"), LOCKGATE_FENCING_TOKEN the
      first lock's; losing any of them is losing the lease.
      With --set, it holds the locks as one lock set instead (see lockset):
      every one or none, so runs that name the same locks in any order never
      deadlock; one renewal every third of --ttl for all, one release when
      the command exits. The command gets LOCKGATE_LOCK_SET ("ns/a,ns/b"),
      LOCKGATE_FENCING_TOKENS and LOCKGATE_FENCING_TOKEN as above; losing any
      lock of the set is losing the lease.
      A command may exit 80-85 itself: when the code is lockctl's own, a line
      "lockctl: ..." on stderr says why (acquire failed, lease lost); the
      command's own code passes through without one.
  lockctl token [--sub name] --ns 'billing,etl-*' [--admin 'billing'] [--ttl 1h] [--secret S]
      Mint an HS256 JWT for the gateway's secret ($LOCKGATE_JWT_SECRET); --sub
      defaults to $USER, else the user name of this uid.
  lockctl help

Configuration:
  LOCKGATE_URL    gateway base URL (--url), default ` + defaultURL + `
  LOCKGATE_TOKEN  bearer JWT (--jwt)
  Flags override the environment. Run 'lockctl COMMAND -h' for each command's flags.

`

func printHelp(w io.Writer) {
	fmt.Fprint(w, helpText, exitCodeTable)
}
