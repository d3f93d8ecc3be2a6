#!/usr/bin/env python3
"""Takes a lock with lockgate, waiting for it, and retries an acquire whose
answer was lost with the same Idempotency-Key; keeps the lease alive while
working; writes to a fenced resource with the lock's fencing token; and
releases. The standard library only (urllib, json, threading).

The Client also takes lock sets (every lock or none: acquire_set,
holding_set), tickets that wait longer than one call (open_ticket,
poll_ticket, optionally with a callback_url), sessions, and watches.

Configure with LOCKGATE_URL and LOCKGATE_TOKEN (a JWT); LOCK, TTL_MS,
WAIT_MS and WORK_MS are optional.

Exit codes: 0 done, 1 the lock stayed held, 2 any other error, 3 the lease
was lost while working.
"""

import contextlib
import json
import os
import signal
import sys
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
import uuid


class NoRedirect(urllib.request.HTTPRedirectHandler):
    """Never follows a redirect: urllib would resend Lock-Token and
    Authorization to wherever it points."""

    def redirect_request(self, req, fp, code, msg, headers, newurl):
        return None


class Problem(Exception):
    """An error answer from the gateway (RFC 9457, with lockgate's code)."""

    def __init__(self, status, body, retry_after=None):
        self.status = status
        try:
            self.retry_after = float(retry_after or 1)
        except ValueError:
            self.retry_after = 1.0
        try:
            p = json.loads(body)
        except ValueError:
            p = {}
        self.code = p.get("code", "") if isinstance(p, dict) else ""
        self.detail = p.get("detail", "") if isinstance(p, dict) else ""
        super().__init__(f"{self.detail} ({self.code})" if self.code else f"HTTP {status}")


class Client:
    """Calls lockgate's HTTP API. Tokens go in headers, never in the URL,
    and never into a message."""

    def __init__(self, base_url, jwt, timeout=10.0):
        self.base = base_url.rstrip("/")
        self.jwt = jwt
        self.timeout = timeout
        self.opener = urllib.request.build_opener(NoRedirect)

    def call(self, method, lock, suffix="", body=None, lock_token=None, wait_ms=0, idempotency_key=None,
             session_token=None, kind="locks", ticket_token=None, prefer=None):
        namespace, name = lock_path(lock)
        path = f"/{kind}/{urllib.parse.quote(namespace)}/{urllib.parse.quote(name)}{suffix}"
        headers = {"Lock-Token": lock_token, "Idempotency-Key": idempotency_key, "Session-Token": session_token,
                   "Ticket-Token": ticket_token, "Prefer": prefer}
        return self.send(method, path, body, headers, wait_ms)

    def send(self, method, path, body=None, headers=None, wait_ms=0):
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(self.base + path, data=data, method=method)
        req.add_header("Authorization", "Bearer " + self.jwt)
        if data is not None:
            req.add_header("Content-Type", "application/json")
        for k, v in (headers or {}).items():
            if v:
                req.add_header(k, v)
        try:
            # A waiting acquire holds the request open up to wait_ms.
            with self.opener.open(req, timeout=self.timeout + wait_ms / 1000) as resp:
                raw = resp.read()
                return resp.status, json.loads(raw) if raw else None
        except urllib.error.HTTPError as e:
            raise Problem(e.code, e.read(), e.headers.get("Retry-After")) from None

    def acquire(self, lock, ttl_ms, wait_ms, owner, attempts=3, value=None, min_hold_ms=None, max_hold_ms=None, priority=None):
        """Acquires, retrying what may have been lost on the way (a timeout,
        a dropped connection, a 503) with one Idempotency-Key for all the
        attempts: a retry gets the grant a lost attempt made, never a second
        one. The key is as secret as a token: it is never printed. value,
        if given, is the grant's value (at most 1024 bytes), which inspect
        shows while the grant holds the lock. min_hold_ms, if given, keeps
        the lock from everyone else until that long after the grant, even
        once released (at most once per window: a release answers as ever,
        and others get 409 lock_held with Retry-After until then). max_hold_ms, if given, is a
        hard cap on the grant: no renewal carries it past its acquisition
        plus this (at least ttl_ms and min_hold_ms); the grant and every
        renewal then say when, as hold_until. priority, if given (0 to 9),
        is the waiter's: a higher one is served first, and every
        --priority-aging of waiting raises it one level, so none starves."""
        key = str(uuid.uuid4())
        body = {"ttl_ms": ttl_ms, "wait_ms": wait_ms, "owner": owner}
        if value is not None:
            body["value"] = value
        if min_hold_ms is not None:
            body["min_hold_ms"] = min_hold_ms
        if max_hold_ms is not None:
            body["max_hold_ms"] = max_hold_ms
        if priority is not None:
            body["priority"] = priority
        for attempt in range(1, attempts + 1):
            try:
                return self.call("POST", lock, body=body, wait_ms=wait_ms, idempotency_key=key)[1]
            except Problem as p:
                # 409 idempotency_in_progress: the lost attempt still waits.
                if attempt == attempts or not (p.status == 503 or p.code == "idempotency_in_progress"):
                    raise
                delay = p.retry_after
                why = str(p)
            except OSError as e:
                if attempt == attempts:
                    raise
                delay, why = 0.2, str(e)
            print(f"acquire {lock}: {why}; retrying with the same Idempotency-Key", file=sys.stderr)
            time.sleep(delay)

    def renew(self, lock, token):
        return self.call("PUT", lock, "/lease", lock_token=token)[1]

    def release(self, lock, token):
        return self.call("DELETE", lock, lock_token=token)[0]

    def break_lock(self, lock, break_period_ms=0):
        """Ends every grant of the lock, whoever holds it: for a JWT that
        administers the namespace (403 forbidden otherwise; 404 not_held when
        nobody holds it). Returns how many grants ended. The holders learn it
        at their next call (409 not_holder, reason broken). With
        break_period_ms, the grants run on that long first (or until their
        lease ends, if sooner): their renewals cannot pass that end."""
        body = {"break_period_ms": break_period_ms} if break_period_ms else None
        return self.call("POST", lock, "/break", body=body)[1]["broken"]

    def resize_semaphore(self, semaphore, limit):
        """Changes the limit of a semaphore in use: for a JWT that
        administers the namespace (403 forbidden otherwise; 404 not_held when
        nobody holds or waits: an idle semaphore keeps no limit). A raised
        limit hands permits to the waiters at once; a lowered one takes none
        back. Returns the limit in force and how many hold and wait
        ({"limit", "held", "waiters", ...}); acquires must send that limit
        until the semaphore is idle."""
        return self.call("PUT", semaphore, "/limit", body={"limit": limit}, kind="semaphores")[1]

    def set_value(self, lock, token, value):
        """Changes the value of the grant token holds."""
        return self.call("PUT", lock, "/value", body={"value": value}, lock_token=token)[1]

    def open_session(self, ttl_ms):
        """Opens a session: one lease for many grants. acquire_in_session
        joins it; keep_session renews every grant of it in one call;
        end_session releases them all. The session_token is a secret."""
        return self.send("POST", "/sessions", {"ttl_ms": ttl_ms})[1]

    def acquire_in_session(self, session, lock, wait_ms=0, owner=None, limit=None, max_hold_ms=None):
        """Takes the lock (or, with limit, a permit of the semaphore) with
        the session's lease; the grant keeps its own token and fencing token.
        max_hold_ms caps a lock's grant as in acquire: the session's
        keep-alives renew it up to its cap, then list it as gone."""
        body = {"wait_ms": wait_ms}
        if owner:
            body["owner"] = owner
        if max_hold_ms is not None:
            body["max_hold_ms"] = max_hold_ms
        if limit:
            body["limit"] = limit
        return self.call("POST", lock, body=body, wait_ms=wait_ms, session_token=session["session_token"],
                         kind="semaphores" if limit else "locks")[1]

    def keep_session(self, session):
        """Renews the session and every grant of it; raises Problem
        session_ended (404) once it ended: its grants ended with it."""
        return self.send("PUT", "/sessions/" + session["session"], headers={"Session-Token": session["session_token"]})[1]

    def end_session(self, session):
        """Ends the session, releasing every grant of it."""
        return self.send("DELETE", "/sessions/" + session["session"], headers={"Session-Token": session["session_token"]})[1]

    def acquire_set(self, locks, ttl_ms=None, wait_ms=0, owner=None, max_hold_ms=None, priority=None):
        """Takes every lock of locks (up to 16 "namespace/name") or none,
        waiting up to wait_ms (at most the gateway's --max-wait) for all of
        them. Returns the set: its token (a secret) and each lock with its
        own fencing token, in the order asked ({"token", "locks": [{"lock",
        "fencing_token", ...}], "ttl_ms", "renew_after_ms", ...}). Raises
        Problem lock_held (409) when a lock stayed held: then none is held.
        Every set takes its locks in one order, so two sets that name the
        same locks, in any order, never deadlock. max_hold_ms, if given,
        caps each lock's grant as in acquire: no renewal of the set carries
        a lock's lease past its acquisition plus this (each lock states its
        hold_until); at least ttl_ms. priority, if given (0 to 9), ranks the
        set in each lock's queue it waits in, as acquire's does."""
        body = {"locks": ",".join(locks), "wait_ms": wait_ms}
        if ttl_ms:
            body["ttl_ms"] = ttl_ms
        if owner:
            body["owner"] = owner
        if max_hold_ms is not None:
            body["max_hold_ms"] = max_hold_ms
        if priority is not None:
            body["priority"] = priority
        return self.send("POST", "/lock-sets", body, wait_ms=wait_ms)[1]

    def renew_set(self, lock_set):
        """Renews every lock of the set (acquire_set's answer) to the TTL it
        was acquired with, in one call. Raises Problem not_holder (409) when
        one of them ended (its lease, a break): the set is no longer whole,
        so stop the work and release it."""
        return self.send("PUT", "/lock-sets/lease?" + set_query(lock_set), headers={"Lock-Token": lock_set["token"]})[1]

    def release_set(self, lock_set):
        """Releases every lock of the set in one call. Returns {"released":
        [...], "gone": [...]}: gone names the locks the set no longer held
        (a lease that ended, a break)."""
        return self.send("DELETE", "/lock-sets?" + set_query(lock_set), headers={"Lock-Token": lock_set["token"]})[1]

    @contextlib.contextmanager
    def holding_set(self, locks, ttl_ms=None, wait_ms=0, owner=None, max_hold_ms=None, priority=None):
        """For a with block: takes every lock of locks or none (raising
        Problem lock_held), renews them all from a thread while the block
        runs, and releases them all after it. Yields the SetKeepAlive: its
        lock_set has each lock's fencing token, and its lost event says the
        set is no longer whole (stop the work: someone else may hold one of
        its locks now). lost is also set when the release finds a lock gone.
        max_hold_ms caps each lock's grant as in acquire_set: the first
        renewal after the cap finds the set no longer whole, and sets lost.
        priority ranks its wait as in acquire_set."""
        keeper = SetKeepAlive(self, self.acquire_set(locks, ttl_ms, wait_ms, owner, max_hold_ms, priority))
        keeper.start()
        try:
            yield keeper
        finally:
            keeper.stop()
            try:
                gone = self.release_set(keeper.lock_set)["gone"]
                if gone and not keeper.lost.is_set():
                    keeper.why = "the set no longer held " + ", ".join(gone)
                    keeper.lost.set()
            except Problem as p:
                if not keeper.lost.is_set():
                    keeper.why = str(p)
                    keeper.lost.set()
            except OSError as e:
                print(f"release set {keeper.lock}: {e}; its locks are left to expire", file=sys.stderr)

    def open_ticket(self, lock, ttl_ms, wait_ms, owner=None, callback_url=None, priority=None):
        """Acquires with Prefer: respond-async: the grant (a dict with
        "token") when the lock is free, else a ticket that keeps a place in
        the lock's queue for up to wait_ms (at most the gateway's
        --max-ticket-wait) with no connection held open: {"ticket",
        "ticket_token" (a secret), "rank", "poll_within_ms", ...}. Poll it
        with poll_ticket at least every poll_within_ms, or it is dropped.

        With callback_url (an address the gateway's --callback-allow
        lists), the gateway POSTs a signed notification there when the lock
        is handed to the ticket, and the ticket has "callback_secret" (a
        secret: never log it): check the notification with
        verify_callback.py's verify_callback and that secret, then poll this
        ticket (never poll_url from the body). It is a hint only: the grant
        is the poll's, and polling within poll_within_ms is still needed.
        priority (0 to 9) ranks the ticket as acquire's does."""
        body = {"ttl_ms": ttl_ms, "wait_ms": wait_ms}
        if owner:
            body["owner"] = owner
        if priority is not None:
            body["priority"] = priority
        if callback_url:
            body["callback_url"] = callback_url
        return self.call("POST", lock, body=body, prefer="respond-async")[1]

    def poll_ticket(self, lock, ticket, wait_s=0):
        """Polls the ticket (open_ticket's answer): the grant once the lock
        reached it (its token is the ticket token: renew and release with
        it), else where it stands ({"rank", "poll_within_ms", ...}). With
        wait_s (at most 30) it long-polls: it answers when the lock reaches
        the ticket, or when wait_s ends. Raises Problem not_found (404) when
        the ticket is gone (its wait ran out, or it was not polled in time)."""
        prefer = f"wait={int(wait_s)}" if wait_s else None
        return self.call("GET", lock, "/tickets/" + urllib.parse.quote(ticket["ticket"]),
                         ticket_token=ticket["ticket_token"], prefer=prefer, wait_ms=wait_s * 1000)[1]

    def close_ticket(self, lock, ticket):
        """Leaves the queue, and releases the grant the ticket was handed, if any."""
        return self.call("DELETE", lock, "/tickets/" + urllib.parse.quote(ticket["ticket"]),
                         ticket_token=ticket["ticket_token"])[0]

    def inspect(self, lock):
        """Who holds the lock (its value, fencing token, ...), or None when nobody does."""
        try:
            return self.call("GET", lock)[1]
        except Problem as p:
            if p.code == "not_held":
                return None
            raise


    def inspect_index(self, lock):
        """What inspect answers (None when free), with the lock's index:
        (index, holders). A poll from that index answers at the lock's next
        change, so a read can start a watch. The index is 0 on a gateway
        without a history (--history 0)."""
        return self._indexed(lock, "", 0)

    def poll(self, lock, index, wait_ms):
        """Long-polls the lock: answers as soon as its index is not index
        (at once when it is not; start with 0, or with inspect_index's), or
        when wait_ms ends. Returns (index, holders): the index to ask again
        with, and what inspect answers (None when free)."""
        return self._indexed(lock, f"?index={int(index)}&wait={int(wait_ms)}", wait_ms)

    def _indexed(self, lock, query, wait_ms):
        """A GET of the lock that returns (Lockgate-Index, holders or None)."""
        namespace, name = lock_path(lock)
        url = f"{self.base}/locks/{urllib.parse.quote(namespace)}/{urllib.parse.quote(name)}{query}"
        req = urllib.request.Request(url)
        req.add_header("Authorization", "Bearer " + self.jwt)
        try:
            with self.opener.open(req, timeout=self.timeout + wait_ms / 1000) as resp:
                return int(resp.headers["Lockgate-Index"]), json.loads(resp.read())
        except urllib.error.HTTPError as e:
            p = Problem(e.code, e.read(), e.headers.get("Retry-After"))
            if p.code == "not_held" and e.headers.get("Lockgate-Index") is not None:
                return int(e.headers["Lockgate-Index"]), None
            raise p from None

    def watch(self, lock, last_event_id=None, reconnects=5):
        """Yields (kind, id, data) for each event of the lock as it happens,
        from its event stream, after event id last_event_id (None: from now;
        the first is then a "state" event). A stream that ends is opened
        again from the last event yielded (Last-Event-ID), so none is lost
        while the gateway keeps it; a "state" event with missed true says
        some were. Gives up after reconnects failures in a row."""
        namespace, name = lock_path(lock)
        url = f"{self.base}/locks/{urllib.parse.quote(namespace)}/{urllib.parse.quote(name)}"
        failures = 0
        while True:
            req = urllib.request.Request(url)
            req.add_header("Authorization", "Bearer " + self.jwt)
            req.add_header("Accept", "text/event-stream")
            if last_event_id is not None:
                req.add_header("Last-Event-ID", str(last_event_id))
            try:
                # The gateway writes at least every 15 s on an idle stream.
                with self.opener.open(req, timeout=max(self.timeout, 30)) as resp:
                    kind, eid, data = "", "", ""
                    for raw in resp:
                        line = raw.decode().rstrip("\r\n")
                        if line == "":
                            if kind:
                                last_event_id, failures = eid, 0
                                yield kind, eid, json.loads(data)
                            kind, data = "", ""
                        elif line.startswith("event: "):
                            kind = line[7:]
                        elif line.startswith("id: "):
                            eid = line[4:]
                        elif line.startswith("data: "):
                            data = line[6:]
            except urllib.error.HTTPError as e:
                raise Problem(e.code, e.read(), e.headers.get("Retry-After")) from None
            except OSError as e:
                failures += 1
                if failures > reconnects:
                    raise
                print(f"watch {lock}: {e}; reconnecting", file=sys.stderr)
                time.sleep(0.2 * failures)


def is_grant(answer):
    """Tells a grant from a ticket or a ticket's status."""
    return "token" in answer


def set_query(lock_set):
    """The query that names a set's locks in its renewal and release."""
    return urllib.parse.urlencode({"locks": ",".join(lock["lock"] for lock in lock_set["locks"])})


def lock_path(lock):
    parts = lock.split("/")
    if len(parts) != 2 or not all(parts):
        raise ValueError(f"lock {lock!r}: want namespace/name")
    return parts


class KeepAlive(threading.Thread):
    """Renews the lease every third of its TTL until stopped. When the
    gateway says the token no longer holds the lock (409, or 404 once it is
    gone), it records why and sets `lost`: the work must stop, since
    someone else may hold the lock now."""

    def __init__(self, client, lock, token, renew_after_ms):
        super().__init__(daemon=True)
        self.client, self.lock, self.token = client, lock, token
        self.interval = renew_after_ms / 1000
        self.stopped = threading.Event()
        self.lost = threading.Event()
        self.why = ""
        self.renewals = 0
        # hold_until: when the grant's hard cap ends it (RFC 3339), as the
        # last renewal said; None for a grant without one.
        self.hold_until = None

    def renew_once(self):
        self.hold_until = self.client.renew(self.lock, self.token).get("hold_until")

    def run(self):
        while not self.stopped.wait(self.interval):
            try:
                self.renew_once()
                self.renewals += 1
            except Problem as p:
                if p.status in (404, 409):
                    self.why = str(p)
                    self.lost.set()
                    return
                print(f"renew {self.lock}: {p}; retrying", file=sys.stderr)
            except OSError as e:
                print(f"renew {self.lock}: {e}; retrying", file=sys.stderr)

    def stop(self):
        """Stops renewing, after any renewal in flight, so none races the release."""
        self.stopped.set()
        self.join()


class SetKeepAlive(KeepAlive):
    """KeepAlive for a lock set: one call renews every lock of it, and
    `lost` is set when one of them ended: the set is no longer whole."""

    def __init__(self, client, lock_set):
        names = ", ".join(lock["lock"] for lock in lock_set["locks"])
        super().__init__(client, names, lock_set["token"], lock_set["renew_after_ms"])
        self.lock_set = lock_set

    def renew_once(self):
        self.client.renew_set(self.lock_set)


class StaleFence(Exception):
    def __init__(self, fence):
        super().__init__(f"fencing token {fence} is stale")
        self.fence = fence


class FencedStore:
    """A resource that refuses writes with a fencing token lower than one
    it has seen: what keeps a paused former holder from clobbering data."""

    def __init__(self):
        self.highest = {}
        self.data = {}

    def write(self, fence, key, value):
        if fence < self.highest.get(key, -1):
            raise StaleFence(fence)
        self.highest[key] = fence
        self.data[key] = value


def env(name, default=None):
    v = os.environ.get(name, default)
    if not v:
        print(f"set {name}", file=sys.stderr)
        sys.exit(2)
    return v


def main():
    lock = env("LOCK", "demo/python-example")
    ttl_ms = int(env("TTL_MS", "3000"))
    wait_ms = int(env("WAIT_MS", "10000"))
    work_ms = int(env("WORK_MS", "1000"))
    client = Client(env("LOCKGATE_URL"), env("LOCKGATE_TOKEN"))

    started = time.monotonic()
    try:
        grant = client.acquire(lock, ttl_ms, wait_ms, "lockgate python example")
    except Problem as p:
        print(f"acquire {lock}: {p}", file=sys.stderr)
        return 1 if p.status == 409 else 2
    print(f"acquired {grant['lock']} fencing_token={grant['fencing_token']} "
          f"after {int((time.monotonic() - started) * 1000)} ms", flush=True)

    # renew_after_ms: when to renew, a third of the lease; a renew without a
    # body keeps the TTL, so it stays the same.
    lease = KeepAlive(client, lock, grant["token"], grant["renew_after_ms"])
    lease.start()

    def release():
        lease.stop()
        try:
            return client.release(lock, grant["token"])
        except Problem as p:
            print(f"release {lock}: {p}", file=sys.stderr)
            return p.status

    def on_signal(signum, _frame):
        release()
        sys.exit(128 + signum)

    signal.signal(signal.SIGINT, on_signal)
    signal.signal(signal.SIGTERM, on_signal)

    # The work: writes carry the fencing token, and the resource checks it.
    store = FencedStore()
    fence = grant["fencing_token"]
    store.write(fence, "report", "written under the lock")
    print(f"write with fencing_token={fence}: accepted")
    try:
        # What a paused former holder's late write looks like to the resource.
        store.write(fence - 1, "report", "a late write from an old holder")
        print("stale write: accepted (the resource is not fenced!)")
    except StaleFence as e:
        print(f"stale write with fencing_token={e.fence}: rejected")
    lease.lost.wait(work_ms / 1000)  # working; ends early when the lease is lost

    status = release()
    if lease.lost.is_set():
        print(f"lease on {lock} lost while working: {lease.why}", file=sys.stderr)
        return 3
    print(f"renewed {lease.renewals} times while working")
    if status not in (200, 204):
        print(f"release {lock}: HTTP {status}", file=sys.stderr)
        return 2
    print(f"released {lock}")
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except (OSError, ValueError) as e:
        # A network error names the URL, never a token.
        print(f"lockgate example: {e}", file=sys.stderr)
        sys.exit(2)
