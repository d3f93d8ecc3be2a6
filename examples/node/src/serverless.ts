// A serverless-style handler: each invocation has a short time limit, keeps
// nothing alive between invocations (its state is JSON the platform
// stores), and may be retried by the platform when it fails. It waits for
// a lock longer than one invocation with a ticket, polled across
// invocations, and makes its acquire safe to retry with an Idempotency-Key.
//
// The platform is simulated below (runPlatform): invocations of
// INVOCATION_MS, a retry of a failed invocation with the same input, and a
// pause between invocations. Configure with LOCKGATE_URL and LOCKGATE_TOKEN;
// LOCK, TTL_MS, WAIT_MS, WORK_MS, INVOCATION_MS and MAX_INVOCATIONS are
// optional. Exit codes: 0 done, 1 the lock never came, 2 another error.
import { randomUUID } from "node:crypto";
import { setTimeout as sleep } from "node:timers/promises";
import { type Client, type Grant, describe, isGrant, lockPath, newClient } from "./lockgate.js";

/** What the platform keeps between invocations: plain JSON. */
interface State {
  /** The acquire's Idempotency-Key: the same in every retry of it. */
  idempotencyKey: string;
  /** The ticket's id and secret, once the lock was busy. */
  ticket?: { id: string; token: string };
}

type Outcome = "done" | "again" | "failed";

function env(name: string, fallback?: string): string {
  const v = process.env[name] ?? fallback;
  if (!v) {
    console.error(`set ${name}`);
    process.exit(2);
  }
  return v;
}

const lock = env("LOCK", "demo/serverless");
const ttlMs = Number(env("TTL_MS", "10000"));
const waitMs = Number(env("WAIT_MS", "60000"));
const workMs = Number(env("WORK_MS", "200"));
const path = lockPath(lock);

/**
 * One invocation: it must return before deadline (ms since the epoch).
 * It changes state only once a step's outcome is known, so that a retry
 * of a failed invocation repeats the same step.
 */
async function handler(client: Client, state: State, deadline: number): Promise<Outcome> {
  if (!state.ticket) {
    // Retry-safe: a retry of this call with the same key gets the same
    // grant, if the first one was granted and its answer lost.
    const now = await client.POST("/locks/{namespace}/{name}", {
      params: { path, header: { "Idempotency-Key": state.idempotencyKey } },
      body: { ttl_ms: ttlMs, owner: "serverless example" },
    });
    if (now.data && isGrant(now.data)) {
      return work(client, now.data, "at once");
    }
    if (now.response.status !== 409 || (now.error as { code?: string })?.code !== "lock_held") {
      console.error(`acquire ${lock}: ${describe(now.error, now.response.status)}`);
      return "failed";
    }
    // Busy: take a place in the queue that outlives this invocation.
    const { data, error, response } = await client.POST("/locks/{namespace}/{name}", {
      params: { path, header: { Prefer: "respond-async" } },
      body: { ttl_ms: ttlMs, wait_ms: waitMs, owner: "serverless example" },
    });
    if (!data) {
      console.error(`open a ticket for ${lock}: ${describe(error, response.status)}`);
      return "failed";
    }
    if (isGrant(data)) {
      return work(client, data, "at once");
    }
    state.ticket = { id: data.ticket, token: data.ticket_token };
    console.log(`ticket for ${lock}: rank=${data.rank}, poll within ${data.poll_within_ms} ms`);
    return "again";
  }
  // Long-poll for what is left of the invocation, keeping a second spare.
  const waitS = Math.max(0, Math.min(30, Math.floor((deadline - Date.now() - 1000) / 1000)));
  const { data, error, response } = await client.GET("/locks/{namespace}/{name}/tickets/{ticket}", {
    params: {
      path: { ...path, ticket: state.ticket.id },
      header: { "Ticket-Token": state.ticket.token, Prefer: `wait=${waitS}` },
    },
  });
  if (!data) {
    // 404: the wait ran out, or the ticket was not polled in time.
    console.error(`poll the ticket for ${lock}: ${describe(error, response.status)}`);
    return "failed";
  }
  if (isGrant(data)) {
    return work(client, data, "with the ticket");
  }
  console.log(`still waiting for ${lock}: rank=${data.rank}`);
  return "again";
}

/** The work under the lock, then the release. */
async function work(client: Client, grant: Grant, how: string): Promise<Outcome> {
  console.log(`acquired ${grant.lock} ${how} fencing_token=${grant.fencing_token}`);
  await sleep(workMs);
  const { response } = await client.DELETE("/locks/{namespace}/{name}", {
    params: { path, header: { "Lock-Token": grant.token } },
  });
  if (response.status !== 204) {
    console.error(`release ${lock}: HTTP ${response.status}`);
    return "failed";
  }
  console.log(`released ${lock}`);
  return "done";
}

/** The platform: invocations with a time limit, retries, frozen state. */
async function runPlatform(): Promise<number> {
  const client = newClient(env("LOCKGATE_URL"), env("LOCKGATE_TOKEN"));
  const invocationMs = Number(env("INVOCATION_MS", "3000"));
  const maxInvocations = Number(env("MAX_INVOCATIONS", "30"));
  let saved = JSON.stringify({ idempotencyKey: randomUUID() } satisfies State);
  for (let i = 1; i <= maxInvocations; i++) {
    const state = JSON.parse(saved) as State;
    let outcome: Outcome;
    try {
      outcome = await handler(client, state, Date.now() + invocationMs);
    } catch (err) {
      // Its state is not saved: the retry repeats the same step, with the
      // same Idempotency-Key.
      console.error(`invocation ${i} failed (${(err as Error).message}); retrying with the same input`);
      continue;
    }
    saved = JSON.stringify(state);
    if (outcome !== "again") {
      return outcome === "done" ? 0 : 1;
    }
    await sleep(100); // frozen between invocations
  }
  console.error(`no lock after ${maxInvocations} invocations`);
  return 1;
}

runPlatform().then(
  (code) => process.exit(code),
  (err: Error) => {
    console.error(`serverless example: ${err.message}`);
    process.exit(2);
  },
);
