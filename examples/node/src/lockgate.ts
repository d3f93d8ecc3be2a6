import createClient from "openapi-fetch";
import type { components, paths } from "./schema.js";

export type Grant = components["schemas"]["Grant"];
export type Lease = components["schemas"]["Lease"];
export type Problem = components["schemas"]["Problem"];
export type Ticket = components["schemas"]["Ticket"];
export type LockInfo = components["schemas"]["LockInfo"];
export type TicketStatus = components["schemas"]["TicketStatus"];

/** Tells a grant from a ticket (the 202 of Prefer: respond-async) or its status (a poll's 200). */
export function isGrant(body: Grant | Ticket | TicketStatus): body is Grant {
  return "token" in body;
}

/** A lockgate client: openapi-fetch typed by the generated schema. */
export function newClient(baseUrl: string, jwt: string) {
  return createClient<paths>({ baseUrl, headers: { Authorization: `Bearer ${jwt}` } });
}

export type Client = ReturnType<typeof newClient>;

/** "namespace/name" as the path parameters of the API. */
export function lockPath(lock: string): { namespace: string; name: string } {
  const [namespace, name, ...rest] = lock.split("/");
  if (!namespace || !name || rest.length > 0) {
    throw new Error(`lock ${JSON.stringify(lock)}: want namespace/name`);
  }
  return { namespace, name };
}

/** The problem's detail and code, for messages; never a token. */
export function describe(error: unknown, status: number): string {
  const p = error as Partial<Problem> | undefined;
  return p?.code ? `${p.detail} (${p.code})` : `HTTP ${status}`;
}

/**
 * Ends every grant of the lock, whoever holds it: for a JWT that
 * administers the namespace (403 forbidden otherwise; 404 not_held when
 * nobody holds it). Returns how many grants ended; their holders learn it at
 * their next call (409 not_holder, reason broken). With breakPeriodMs, the
 * grants run on that long first (or until their lease ends, if sooner):
 * their renewals cannot pass that end.
 */
export async function breakLock(client: Client, lock: string, breakPeriodMs = 0): Promise<number> {
  const { data, error, response } = await client.POST("/locks/{namespace}/{name}/break", {
    params: { path: lockPath(lock) },
    body: breakPeriodMs > 0 ? { break_period_ms: breakPeriodMs } : undefined,
  });
  if (!data) {
    throw new Error(`break ${lock}: ${describe(error, response.status)}`);
  }
  return data.broken;
}

export type SemaphoreSize = components["schemas"]["SemaphoreSize"];

/**
 * Changes the limit of a semaphore in use: for a JWT that administers the
 * namespace (403 forbidden otherwise; 404 not_held when nobody holds or
 * waits: an idle semaphore keeps no limit). A raised limit hands permits to
 * the waiters at once; a lowered one takes none back. Resolves to the limit
 * in force and how many hold and wait; acquires must send that limit until
 * the semaphore is idle.
 */
export async function resizeSemaphore(client: Client, semaphore: string, limit: number): Promise<SemaphoreSize> {
  const { data, error, response } = await client.PUT("/semaphores/{namespace}/{name}/limit", {
    params: { path: lockPath(semaphore) },
    body: { limit },
  });
  if (!data) {
    throw new Error(`resize ${semaphore}: ${describe(error, response.status)}`);
  }
  return data;
}

/** A renewal's outcome: renewed, lost (the work must stop), or failed for now (try again). */
type Renewal = { renewed: true } | { renewed: false; lost: boolean; why: string };

/**
 * Calls renew every renewAfterMs until stopped, or until it says the lease
 * is lost: then onLost is called once.
 */
function renewEvery(what: string, renewAfterMs: number, renew: () => Promise<Renewal>, onLost: (why: string) => void) {
  let renewals = 0;
  let inFlight: Promise<void> = Promise.resolve();
  const timer = setInterval(() => {
    inFlight = (async () => {
      try {
        const r = await renew();
        if (r.renewed) {
          renewals++;
        } else if (r.lost) {
          clearInterval(timer);
          onLost(r.why);
        } else {
          console.error(`renew ${what}: ${r.why}; retrying`);
        }
      } catch (err) {
        console.error(`renew ${what}: ${(err as Error).message}; retrying`);
      }
    })();
  }, renewAfterMs);
  return {
    get renewals() {
      return renewals;
    },
    /** Stops renewing, after any renewal in flight, so none races the release. */
    async stop() {
      clearInterval(timer);
      await inFlight;
    },
  };
}

/**
 * Renews the lease every renewAfterMs (the grant's renew_after_ms, a third
 * of its TTL; a renew without a body keeps the TTL) until stopped. onLost
 * is called once when the gateway says the token no longer holds the lock:
 * the work must stop, since someone else may hold it now.
 */
export function keepAlive(client: Client, lock: string, token: string, renewAfterMs: number, onLost: (why: string) => void) {
  const path = lockPath(lock);
  return renewEvery(lock, renewAfterMs, async () => {
    const { data, error, response } = await client.PUT("/locks/{namespace}/{name}/lease", {
      params: { path, header: { "Lock-Token": token } },
    });
    return data ? { renewed: true } : { renewed: false, lost: response.status === 409, why: describe(error, response.status) };
  }, onLost);
}

/**
 * Makes value the value of the grant token holds (an address, say: what a
 * leader proclaims); GET shows it as LockInfo.value. Resolves to the
 * grant's fencing token, or to undefined when the gateway says the token no
 * longer holds the lock (409): the work must stop, as for a lost lease.
 * Rejects on any other error.
 */
export async function setValue(client: Client, lock: string, token: string, value: string): Promise<number | undefined> {
  const { data, error, response } = await client.PUT("/locks/{namespace}/{name}/value", {
    params: { path: lockPath(lock), header: { "Lock-Token": token } },
    body: { value },
  });
  if (data) {
    return data.fencing_token;
  }
  if (response.status === 409) {
    return undefined;
  }
  throw new Error(`set the value of ${lock}: ${describe(error, response.status)}`);
}

export type Session = components["schemas"]["Session"];

/**
 * Opens a session: one lease for many grants. Acquire with
 * `header: { "Session-Token": session.session_token }` and the grant takes
 * the session's lease; keepSession renews every grant of it in one call,
 * endSession releases them all.
 */
export async function openSession(client: Client, ttlMs: number): Promise<Session> {
  const { data, error, response } = await client.POST("/sessions", { body: { ttl_ms: ttlMs } });
  if (!data) {
    throw new Error(`open session: ${describe(error, response.status)}`);
  }
  return data;
}

/**
 * Keeps the session alive, renewing every grant of it. Resolves to how many
 * grants it renewed, or to undefined when the session ended (404): its
 * grants ended with it, and the work must stop.
 */
export async function keepSession(client: Client, s: Session): Promise<number | undefined> {
  const { data, error, response } = await client.PUT("/sessions/{session}", {
    params: { path: { session: s.session }, header: { "Session-Token": s.session_token } },
  });
  if (data) {
    return data.renewed.length;
  }
  if (response.status === 404) {
    return undefined;
  }
  throw new Error(`keep session ${s.session}: ${describe(error, response.status)}`);
}

/** Ends the session, releasing every grant of it; resolves to how many. */
export async function endSession(client: Client, s: Session): Promise<number> {
  const { data, error, response } = await client.DELETE("/sessions/{session}", {
    params: { path: { session: s.session }, header: { "Session-Token": s.session_token } },
  });
  if (!data) {
    throw new Error(`end session ${s.session}: ${describe(error, response.status)}`);
  }
  return data.released.length;
}

export type LockEvent = components["schemas"]["LockEvent"];

/**
 * The lock's holders (undefined when free) and its index: a pollLock from
 * that index answers at the lock's next change, so a read can start a
 * watch. The index is 0 on a gateway without a history (--history 0).
 */
export async function inspectLock(client: Client, lock: string): Promise<{ index: number; info?: LockInfo }> {
  const { data, error, response } = await client.GET("/locks/{namespace}/{name}", {
    params: { path: lockPath(lock) },
  });
  return indexed(`inspect ${lock}`, data, error, response);
}

/**
 * Long-polls the lock: answers as soon as its index is not `index` (at once
 * when it is not; start with 0, or with inspectLock's), or when waitMs
 * ends, with the lock's holders (undefined when free) and its index, to
 * ask again with.
 */
export async function pollLock(client: Client, lock: string, index: number, waitMs: number): Promise<{ index: number; info?: LockInfo }> {
  const { data, error, response } = await client.GET("/locks/{namespace}/{name}", {
    params: { path: lockPath(lock), query: { index, wait: String(waitMs) } },
  });
  return indexed(`watch ${lock}`, data, error, response);
}

/** A GET of a lock's answer: its holders, if held, and its Lockgate-Index. */
function indexed(what: string, data: LockInfo | string | undefined, error: unknown, response: Response): { index: number; info?: LockInfo } {
  const index = Number(response.headers.get("Lockgate-Index"));
  if (data && typeof data !== "string") {
    return { index, info: data };
  }
  if (response.status === 404 && response.headers.has("Lockgate-Index")) {
    return { index };
  }
  throw new Error(`${what}: ${describe(error, response.status)}`);
}

/**
 * Yields the lock's events as they happen, from its event stream, after
 * event id lastEventId (undefined: from now). A stream that ends is opened
 * again from the last event yielded (Last-Event-ID), so none is lost while
 * the gateway keeps it; a `state` event ({missed: true}) says some were.
 * Stop it with signal.
 */
export async function* watchLock(baseUrl: string, jwt: string, lock: string, signal: AbortSignal, lastEventId?: string): AsyncGenerator<{ kind: string; id: string; data: unknown }> {
  const { namespace, name } = lockPath(lock);
  const url = `${baseUrl}/locks/${encodeURIComponent(namespace)}/${encodeURIComponent(name)}`;
  while (!signal.aborted) {
    const headers: Record<string, string> = { Authorization: `Bearer ${jwt}`, Accept: "text/event-stream" };
    if (lastEventId !== undefined) {
      headers["Last-Event-ID"] = lastEventId;
    }
    let response: Response;
    try {
      response = await fetch(url, { headers, signal, redirect: "error" });
    } catch (err) {
      if (signal.aborted) return;
      console.error(`watch ${lock}: ${(err as Error).message}; reconnecting`);
      await new Promise((r) => setTimeout(r, 500));
      continue;
    }
    if (response.status !== 200 || !response.body) {
      throw new Error(`watch ${lock}: ${describe(await response.json().catch(() => undefined), response.status)}`);
    }
    let buf = "";
    const decoder = new TextDecoder();
    try {
      for await (const chunk of response.body) {
        buf += decoder.decode(chunk as Uint8Array, { stream: true });
        let end: number;
        while ((end = buf.indexOf("\n\n")) >= 0) {
          const block = buf.slice(0, end);
          buf = buf.slice(end + 2);
          let kind = "", id = "", data = "";
          for (const line of block.split("\n")) {
            if (line.startsWith("event: ")) kind = line.slice(7);
            else if (line.startsWith("id: ")) id = line.slice(4);
            else if (line.startsWith("data: ")) data = line.slice(6);
          }
          if (kind) {
            lastEventId = id;
            yield { kind, id, data: JSON.parse(data) };
          }
        }
      }
    } catch (err) {
      if (signal.aborted) return;
      console.error(`watch ${lock}: ${(err as Error).message}; reconnecting`);
    }
  }
}

export type LockSet = components["schemas"]["LockSet"];
export type LockSetLease = components["schemas"]["LockSetLease"];
export type LockSetReleased = components["schemas"]["LockSetReleased"];

/** What a lock set asks for besides its locks; the gateway's defaults for what is left out. */
export interface SetOptions {
  /** Lease of every lock (default 30 s). */
  ttlMs?: number;
  /** How long to wait for every lock to be free, at most the gateway's --max-wait (default 0). */
  waitMs?: number;
  /** A label inspect shows on each lock. */
  owner?: string;
  /**
   * 0 (the default) to 9: with waitMs, the set's priority as a waiter in
   * each lock's queue, as for a lock's acquire (see TicketOptions.priority).
   */
  priority?: number;
  /** The set's hard cap: no renewal carries a lock past acquired + maxHoldMs. */
  maxHoldMs?: number;
}

/** The query that names a set's locks in its renewal and release. */
function setLocks(set: LockSet): { locks: string } {
  return { locks: set.locks.map((l) => l.lock).join(",") };
}

/**
 * Takes every lock of locks (up to 16 "namespace/name") or none. Resolves
 * to the set: its token (a secret) and each lock with its own fencing
 * token, in the order asked; or to undefined when a lock stayed held (409
 * lock_held): then none of them is held. Every set takes its locks in one
 * order, so two sets that name the same locks, in any order, never
 * deadlock. Rejects on any other error.
 */
export async function acquireSet(client: Client, locks: string[], opts: SetOptions = {}): Promise<LockSet | undefined> {
  const { data, error, response } = await client.POST("/lock-sets", {
    body: {
      locks: locks.join(","),
      ttl_ms: opts.ttlMs,
      wait_ms: opts.waitMs,
      owner: opts.owner,
      priority: opts.priority,
      max_hold_ms: opts.maxHoldMs,
    },
  });
  if (data) {
    return data;
  }
  if (response.status === 409) {
    return undefined;
  }
  throw new Error(`acquire set ${locks.join(", ")}: ${describe(error, response.status)}`);
}

/**
 * Renews every lock of the set in one call, to the TTL it was acquired
 * with. Resolves to the new leases, or to undefined when one of its locks
 * ended (409 not_holder: its lease, a break): the set is no longer whole,
 * so stop the work and release it. Rejects on any other error.
 */
export async function renewSet(client: Client, set: LockSet): Promise<LockSetLease | undefined> {
  const { data, error, response } = await client.PUT("/lock-sets/lease", {
    params: { query: setLocks(set), header: { "Lock-Token": set.token } },
  });
  if (data) {
    return data;
  }
  if (response.status === 409) {
    return undefined;
  }
  throw new Error(`renew set: ${describe(error, response.status)}`);
}

/**
 * Releases every lock of the set in one call. Resolves to the locks
 * released and those the set no longer held (gone: a lease that ended, a
 * break). Rejects on an error answer (409 not_holder when it held none).
 */
export async function releaseSet(client: Client, set: LockSet): Promise<LockSetReleased> {
  const { data, error, response } = await client.DELETE("/lock-sets", {
    params: { query: setLocks(set), header: { "Lock-Token": set.token } },
  });
  if (!data) {
    throw new Error(`release set: ${describe(error, response.status)}`);
  }
  return data;
}

/** keepAlive for a lock set: one call every renewAfterMs renews all its locks; onLost when one of them ended. */
export function keepSetAlive(client: Client, set: LockSet, onLost: (why: string) => void) {
  const what = `set ${set.locks.map((l) => l.lock).join(", ")}`;
  return renewEvery(what, set.renew_after_ms, async () => {
    const { data, error, response } = await client.PUT("/lock-sets/lease", {
      params: { query: setLocks(set), header: { "Lock-Token": set.token } },
    });
    return data ? { renewed: true } : { renewed: false, lost: response.status === 409, why: describe(error, response.status) };
  }, onLost);
}

/**
 * Runs work while holding every lock of locks: takes the set (or rejects,
 * holding none, when a lock stays held), renews it while work runs, and
 * releases it after, whatever work does. work gets the set (each lock's
 * fencing token) and a signal that aborts when the set is no longer whole:
 * stop then, since someone else may hold one of its locks. Resolves to
 * what work resolves to, and rejects when the set was lost meanwhile
 * (a renewal, or the release, found a lock gone), even if work succeeded.
 */
export async function withLockSet<T>(client: Client, locks: string[], opts: SetOptions,
  work: (set: LockSet, lost: AbortSignal, renewals: () => number) => Promise<T>): Promise<T> {
  const set = await acquireSet(client, locks, opts);
  if (!set) {
    throw new Error(`acquire set ${locks.join(", ")}: a lock is held (lock_held); none was taken`);
  }
  const lost = new AbortController();
  const keeper = keepSetAlive(client, set, (why) => lost.abort(why));
  let result: T;
  try {
    result = await work(set, lost.signal, () => keeper.renewals);
  } finally {
    await keeper.stop();
    try {
      const { gone } = await releaseSet(client, set);
      if (gone.length > 0 && !lost.signal.aborted) {
        lost.abort(`the set no longer held ${gone.join(", ")}`);
      }
    } catch (err) {
      if (!lost.signal.aborted) {
        lost.abort((err as Error).message);
      }
    }
  }
  if (lost.signal.aborted) {
    throw new Error(`lease on set ${locks.join(", ")} lost: ${String(lost.signal.reason)}`);
  }
  return result;
}

export type TicketGranted = components["schemas"]["TicketGranted"];

/** What a ticket asks for besides its lock and wait; the gateway's defaults for what is left out. */
export interface TicketOptions {
  /** The grant's lease, from its pick-up (default 30 s). */
  ttlMs?: number;
  /** A label inspect shows. */
  owner?: string;
  /**
   * Where the gateway POSTs a signed notification (TicketGranted) when the
   * lock is handed to the ticket; the gateway's --callback-allow must list
   * it. Check it with verifyCallback (callbacks.ts) and the ticket's
   * callback_secret, then poll the ticket (never poll_url from the body).
   */
  callbackUrl?: string;
  /**
   * 0 (the default) to 9: a higher priority is served first, first come
   * first served within one; every --priority-aging of waiting raises it by
   * one, so none waits forever.
   */
  priority?: number;
}

/**
 * Acquires with Prefer: respond-async: resolves to the grant when the lock
 * is free, else to a ticket that keeps a place in the lock's queue for up
 * to waitMs (at most the gateway's --max-ticket-wait) with no connection
 * held open. Poll it with pollTicket at least every poll_within_ms, or it
 * is dropped. A callback (opts.callbackUrl) is a hint only: the grant is
 * the poll's. Rejects on an error answer (409 lock_held without a wait).
 */
export async function openTicket(client: Client, lock: string, waitMs: number, opts: TicketOptions = {}): Promise<Grant | Ticket> {
  const { data, error, response } = await client.POST("/locks/{namespace}/{name}", {
    params: { path: lockPath(lock), header: { Prefer: "respond-async" } },
    body: { ttl_ms: opts.ttlMs, wait_ms: waitMs, owner: opts.owner, callback_url: opts.callbackUrl, priority: opts.priority },
  });
  if (!data) {
    throw new Error(`open a ticket for ${lock}: ${describe(error, response.status)}`);
  }
  return data;
}

/**
 * Polls the ticket: resolves to the grant once the lock reached it (its
 * token is the ticket token: renew and release with it), else to where the
 * ticket stands (rank, poll_within_ms); to undefined when the ticket is gone
 * (404: its wait ran out, or it was not polled in time). With waitS (at
 * most 30) it long-polls. Rejects on any other error.
 */
export async function pollTicket(client: Client, lock: string, ticket: { ticket: string; ticket_token: string }, waitS = 0): Promise<Grant | TicketStatus | undefined> {
  const { data, error, response } = await client.GET("/locks/{namespace}/{name}/tickets/{ticket}", {
    params: {
      path: { ...lockPath(lock), ticket: ticket.ticket },
      header: { "Ticket-Token": ticket.ticket_token, Prefer: waitS > 0 ? `wait=${Math.floor(waitS)}` : undefined },
    },
  });
  if (data) {
    return data;
  }
  if (response.status === 404) {
    return undefined;
  }
  throw new Error(`poll the ticket for ${lock}: ${describe(error, response.status)}`);
}
