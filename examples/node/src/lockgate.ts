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

/**
 * Renews the lease every renewAfterMs (the grant's renew_after_ms, a third
 * of its TTL; a renew without a body keeps the TTL) until stopped. onLost
 * is called once when the gateway says the token no longer holds the lock:
 * the work must stop, since someone else may hold it now.
 */
export function keepAlive(client: Client, lock: string, token: string, renewAfterMs: number, onLost: (why: string) => void) {
  const path = lockPath(lock);
  let renewals = 0;
  let inFlight: Promise<void> = Promise.resolve();
  const timer = setInterval(() => {
    inFlight = (async () => {
      try {
        const { data, error, response } = await client.PUT("/locks/{namespace}/{name}/lease", {
          params: { path, header: { "Lock-Token": token } },
        });
        if (data) {
          renewals++;
        } else if (response.status === 409) {
          clearInterval(timer);
          onLost(describe(error, response.status));
        } else {
          console.error(`renew ${lock}: ${describe(error, response.status)}; retrying`);
        }
      } catch (err) {
        console.error(`renew ${lock}: ${(err as Error).message}; retrying`);
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
 * Long-polls the lock: answers as soon as its index is not `index` (at once
 * when it is not; start with 0), or when waitMs ends, with the lock's
 * holders (undefined when free) and its index, to ask again with.
 */
export async function pollLock(client: Client, lock: string, index: number, waitMs: number): Promise<{ index: number; info?: LockInfo }> {
  const { data, error, response } = await client.GET("/locks/{namespace}/{name}", {
    params: { path: lockPath(lock), query: { index, wait: String(waitMs) } },
  });
  const next = Number(response.headers.get("Lockgate-Index"));
  if (data && typeof data !== "string") {
    return { index: next, info: data };
  }
  if (response.status === 404 && response.headers.has("Lockgate-Index")) {
    return { index: next };
  }
  throw new Error(`watch ${lock}: ${describe(error, response.status)}`);
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
