// Takes a lock with lockgate, waiting for it; keeps the lease alive while
// working; writes to a fenced resource with the lock's fencing token; sets
// the lock's value (what others see with GET); and releases. Configure with LOCKGATE_URL and LOCKGATE_TOKEN (a JWT); LOCK,
// TTL_MS, WAIT_MS and WORK_MS are optional.
//
// Exit codes: 0 done, 1 the lock stayed held, 2 any other error, 3 the
// lease was lost while working.
import { setTimeout as sleep } from "node:timers/promises";
import { FencedStore, StaleFenceError } from "./fenced-store.js";
import { describe, inspectLock, isGrant, keepAlive, lockPath, newClient, setValue } from "./lockgate.js";

function env(name: string, fallback?: string): string {
  const v = process.env[name] ?? fallback;
  if (!v) {
    console.error(`set ${name}`);
    process.exit(2);
  }
  return v;
}

async function main(): Promise<number> {
  const lock = env("LOCK", "demo/node-example");
  const ttlMs = Number(env("TTL_MS", "3000"));
  const waitMs = Number(env("WAIT_MS", "10000"));
  const workMs = Number(env("WORK_MS", "1000"));
  const client = newClient(env("LOCKGATE_URL"), env("LOCKGATE_TOKEN"));
  const path = lockPath(lock);

  const started = Date.now();
  const { data: grant, error, response } = await client.POST("/locks/{namespace}/{name}", {
    params: { path },
    body: { ttl_ms: ttlMs, wait_ms: waitMs, owner: "lockgate node example" },
  });
  if (!grant) {
    console.error(`acquire ${lock}: ${describe(error, response.status)}`);
    return response.status === 409 ? 1 : 2;
  }
  if (!isGrant(grant)) {
    console.error(`acquire ${lock}: a ticket, which this program did not ask for (Prefer: respond-async)`);
    return 2;
  }
  console.log(`acquired ${grant.lock} fencing_token=${grant.fencing_token} after ${Date.now() - started} ms`);

  let lost: string | undefined;
  const work = new AbortController();
  const lease = keepAlive(client, lock, grant.token, grant.renew_after_ms, (why) => {
    lost = why;
    work.abort();
  });
  const release = async () => {
    await lease.stop();
    const { response } = await client.DELETE("/locks/{namespace}/{name}", {
      params: { path, header: { "Lock-Token": grant.token } },
    });
    return response.status;
  };
  for (const sig of ["SIGINT", "SIGTERM"] as const) {
    process.once(sig, async () => {
      await release();
      process.exit(sig === "SIGINT" ? 130 : 143);
    });
  }

  // The work: writes carry the fencing token, and the resource checks it.
  const store = new FencedStore();
  store.write(grant.fencing_token, "report", "written under the lock");
  console.log(`write with fencing_token=${grant.fencing_token}: accepted`);
  try {
    // What a paused former holder's late write looks like to the resource.
    store.write(grant.fencing_token - 1, "report", "a late write from an old holder");
    console.log("stale write: accepted (the resource is not fenced!)");
  } catch (err) {
    if (!(err instanceof StaleFenceError)) throw err;
    console.log(`stale write with fencing_token=${err.fence}: rejected`);
  }
  // The lock's value: what GET shows others while this grant holds it
  // (a leader's address, say, or here how far the work got).
  const valueFence = await setValue(client, lock, grant.token, "report written");
  if (valueFence === undefined) {
    lost ??= "the token no longer holds the lock";
    work.abort();
  } else {
    console.log(`value set with fencing_token=${valueFence}`);
    // What others read, and the lock's index: a pollLock from it answers
    // at the lock's next change (the release, here).
    const seen = await inspectLock(client, lock);
    console.log(`others read value ${JSON.stringify(seen.info?.value)} at index ${seen.index}`);
  }
  try {
    await sleep(workMs, undefined, { signal: work.signal });
  } catch {
    // aborted: the lease is gone
  }

  const status = await release();
  if (lost) {
    console.error(`lease on ${lock} lost while working: ${lost}`);
    return 3;
  }
  console.log(`renewed ${lease.renewals} times while working`);
  if (status !== 204) {
    console.error(`release ${lock}: HTTP ${status}`);
    return 2;
  }
  console.log(`released ${lock}`);
  return 0;
}

main().then(
  (code) => process.exit(code),
  (err: Error) => {
    // A network error: the message names the URL, never a token.
    console.error(`lockgate example: ${err.message}${err.cause ? `: ${(err.cause as Error).message}` : ""}`);
    process.exit(2);
  },
);
