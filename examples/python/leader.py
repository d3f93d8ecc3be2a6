#!/usr/bin/env python3
"""One leader among N replicas, over lockgate's HTTP API: run this in each
replica, with its own address in ME. The standard library only; the client
is lockgate_example.py's.

  observe   a long-poll watch of the lock (GET ?index=N&wait=): it answers
            as soon as the lock changes; a follower prints the leader's
            value and the fencing token that orders the terms
  campaign  when the watch says the lock is free, acquire it with ME as the
            grant's value; the first replica to ask leads
  lead      renew every renew_after_ms; when a renewal answers 409 (or 404)
            the lease ended under us: stop leading, campaign again
  resign    on SIGTERM or SIGINT, release: the followers' watches see it, and
            one of them leads at once

Configure with LOCKGATE_URL, LOCKGATE_TOKEN and ME; LOCK (default
demo/leader) and TTL_MS (default 3000) are optional. A leader that dies
without resigning leads until its lease ends, at most TTL_MS. Prints one
line per change it sees, with the term's fencing token:

  leading ME fencing_token=N
  following VALUE fencing_token=N
  lost ME fencing_token=N
"""

import signal
import sys
import time

from lockgate_example import Client, Problem, env


class Resign(Exception):
    pass


def on_signal(signum, _frame):
    raise Resign()


def main():
    lock = env("LOCK", "demo/leader")
    me = env("ME")
    ttl_ms = int(env("TTL_MS", "3000"))
    client = Client(env("LOCKGATE_URL"), env("LOCKGATE_TOKEN"))
    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)

    seen = None  # the (value, fencing token) printed last

    def say(what, value, fence):
        nonlocal seen
        if (value, fence) != seen:
            seen = (value, fence)
            print(f"{what} {value} fencing_token={fence}", flush=True)

    grant = None
    index = 0  # the lock's index this replica has seen (0: nothing yet)
    try:
        while True:
            # observe: a long-poll that answers at once the first time, and
            # then as soon as the lock changes (a renewal, a new value, the
            # leader's release or its lease running out).
            try:
                index, info = client.poll(lock, index, ttl_ms)
            except Problem as p:
                print(f"watch {lock}: {p}", file=sys.stderr)
                time.sleep(p.retry_after)
                continue
            if info:
                if info.get("value"):
                    say("following", info["value"], info["fencing_token"])
                continue
            # campaign: the lock is free; the first replica to ask leads,
            # the others see it on their next poll.
            try:
                grant = client.acquire(lock, ttl_ms, 0, "leader example", value=me)
            except Problem as p:
                if p.status != 409:
                    print(f"campaign {lock}: {p}", file=sys.stderr)
                    time.sleep(p.retry_after)
                continue
            fence = grant["fencing_token"]
            say("leading", me, fence)
            # lead: the leader's work goes here, with the fencing token on
            # every write it makes.
            while True:
                time.sleep(grant["renew_after_ms"] / 1000)
                try:
                    client.renew(lock, grant["token"])
                except Problem as p:
                    if p.status in (404, 409):
                        say("lost", me, fence)
                        grant = None
                        break
                    print(f"renew {lock}: {p}; retrying", file=sys.stderr)
                except OSError as e:
                    print(f"renew {lock}: {e}; retrying", file=sys.stderr)
    except Resign:
        if grant:
            client.release(lock, grant["token"])
        return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except (OSError, ValueError) as e:
        print(f"leader example: {e}", file=sys.stderr)
        sys.exit(2)
