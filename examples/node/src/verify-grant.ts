/**
 * What a resource protected by a lockgate lock does with the work it
 * receives: it checks the grant that came with it, offline, before it acts.
 * Node's own crypto only.
 *
 *   node dist/verify-grant.js JWKS_URL ISSUER LOCK LAST_FENCING_TOKEN < signed_grant
 *
 * Accepts (exit 0, "accepted fencing_token=N") a grant signed by a key of
 * the gateway's JWK Set, issued by ISSUER (the gateways' --grant-issuer: a
 * grant of another deployment sharing the key file is refused), of the
 * exclusive lock LOCK, whose lease has not
 * ended, whose fencing token is larger than LAST_FENCING_TOKEN (the largest
 * the resource has accepted for LOCK); rejects anything else (exit 1,
 * "rejected: why"). A real resource fetches the set once and again only for
 * a kid it does not know, and keeps the last fencing token per lock with the
 * data it protects, updated in the same write.
 */
import { createPublicKey, verify as verifySignature, type KeyObject } from "node:crypto";

export class Rejected extends Error {}

interface GrantClaims {
  iss?: string;
  aud?: unknown;
  lock?: string;
  mode?: string;
  fencing_token?: number;
  exp?: number;
}

/** The gateway's JWK Set: kid -> Ed25519 public key. */
export async function fetchKeys(url: string): Promise<Map<string, KeyObject>> {
  const resp = await fetch(url);
  if (!resp.ok) throw new Error(`${url}: ${resp.status}`);
  const set = (await resp.json()) as { keys?: Array<{ kty: string; crv: string; x: string; kid: string }> };
  const keys = new Map<string, KeyObject>();
  for (const k of set.keys ?? []) {
    if (k.kty === "OKP" && k.crv === "Ed25519") {
      keys.set(k.kid, createPublicKey({ key: { kty: k.kty, crv: k.crv, x: k.x }, format: "jwk" }));
    }
  }
  return keys;
}

/** Checks a signed grant; returns its fencing token or throws Rejected. */
export function verifyGrant(signed: string, keys: Map<string, KeyObject>, issuer: string, lock: string, last: number): number {
  const parts = signed.split(".");
  if (parts.length !== 3) throw new Rejected("not a compact JWS");
  const [headerB64, payloadB64, sigB64] = parts as [string, string, string];
  let header: { typ?: string; alg?: string; kid?: string };
  let claims: GrantClaims;
  try {
    header = JSON.parse(Buffer.from(headerB64, "base64url").toString("utf8"));
    claims = JSON.parse(Buffer.from(payloadB64, "base64url").toString("utf8"));
  } catch (e) {
    throw new Rejected(`not a compact JWS: ${e}`);
  }
  if (header.typ !== "lockgate-grant+jwt" || header.alg !== "EdDSA") {
    throw new Rejected("not a lockgate grant signed with EdDSA");
  }
  const key = keys.get(header.kid ?? "");
  if (!key) throw new Rejected(`signed by a key the gateway does not publish (kid ${JSON.stringify(header.kid)})`);
  const ok = verifySignature(null, Buffer.from(`${headerB64}.${payloadB64}`), key, Buffer.from(sigB64, "base64url"));
  if (!ok) throw new Rejected("bad signature");
  if (typeof claims.exp !== "number" || claims.exp * 1000 <= Date.now()) throw new Rejected("the lease has ended");
  if (claims.iss !== issuer) {
    throw new Rejected(`issued by ${JSON.stringify(claims.iss)} (iss), not ${JSON.stringify(issuer)}: a grant of another deployment`);
  }
  if (claims.aud !== undefined) throw new Rejected(`names an audience (aud ${JSON.stringify(claims.aud)}), which lockgate grants do not`);
  if (claims.lock !== lock) throw new Rejected(`a grant of ${JSON.stringify(claims.lock)}, not of ${JSON.stringify(lock)}`);
  if (claims.mode !== "exclusive") throw new Rejected(`a ${claims.mode} hold, not the exclusive one`);
  const fence = claims.fencing_token;
  if (typeof fence !== "number" || !Number.isSafeInteger(fence) || fence <= last) {
    throw new Rejected(`fencing token ${fence} is not larger than ${last}, the last accepted: a stale holder`);
  }
  return fence;
}

async function main(): Promise<void> {
  const [url, issuer, lock, last] = process.argv.slice(2);
  if (url === undefined || issuer === undefined || lock === undefined || last === undefined) {
    console.error("usage: node dist/verify-grant.js JWKS_URL ISSUER LOCK LAST_FENCING_TOKEN < signed_grant");
    process.exit(2);
  }
  const keys = await fetchKeys(url);
  let input = "";
  for await (const chunk of process.stdin) input += chunk;
  try {
    const fence = verifyGrant(input.trim(), keys, issuer, lock, Number(last));
    console.log(`accepted fencing_token=${fence}`);
  } catch (e) {
    if (!(e instanceof Rejected)) throw e;
    console.log(`rejected: ${e.message}`);
    process.exit(1);
  }
}

if (import.meta.url === `file://${process.argv[1]}`) {
  await main();
}
