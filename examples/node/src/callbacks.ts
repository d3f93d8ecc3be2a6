/**
 * Checks a notification that lockgate POSTs to a ticket's callback_url, as
 * Standard Webhooks receivers do, with Node's own crypto:
 *
 *   const note = verifyCallback(ticket.callback_secret!, req.headers, rawBody);
 *   // note.data: { lock, ticket, poll_url, pick_up_within_ms }
 *
 * The gateway signs each ticket's notifications with the ticket's own
 * secret, the callback_secret openTicket answered ("whsec_" and base64 of
 * the key; derived from the operator's --callback-secret, which receivers
 * never hold): webhook-signature is "v1," and base64 of HMAC-SHA256 over
 * "webhook-id.webhook-timestamp.body", keyed with the decoded key. Check
 * every notification with its ticket's secret before acting on it: anyone
 * can POST to the receiver's URL, and one ticket's secret verifies no
 * other ticket's notification.
 *
 * A notification is a hint even when it verifies: it names the ticket,
 * never its token, and grants nothing. The grant is the next poll of the
 * ticket the caller opened (pollTicket, with the ticket token it kept);
 * never follow poll_url from the body. The same notification may come
 * more than once (a retry has the same webhook-id).
 */
import { createHmac, timingSafeEqual } from "node:crypto";
import type { TicketGranted } from "./lockgate.js";

/** A notification that does not verify: ignore it (answer 400). */
export class BadSignature extends Error {}

const secretPrefix = "whsec_";

/** The HMAC key of a secret written as the gateway takes it: whsec_ and base64 (the prefix may be left out). */
export function callbackKey(secret: string): Buffer {
  let b64 = secret.trim();
  if (b64.startsWith(secretPrefix)) {
    b64 = b64.slice(secretPrefix.length);
  }
  // Buffer.from skips what is not base64; a secret must be nothing else.
  if (!/^[A-Za-z0-9+/]+={0,2}$/.test(b64) || b64.length % 4 !== 0) {
    throw new Error("callback secret: want whsec_ followed by base64");
  }
  return Buffer.from(b64, "base64");
}

/** Headers as fetch (Headers) or node:http (IncomingHttpHeaders) give them. */
export type CallbackHeaders = Headers | Record<string, string | string[] | undefined>;

function header(headers: CallbackHeaders, name: string): string | undefined {
  if (headers instanceof Headers) {
    return headers.get(name) ?? undefined;
  }
  for (const [k, v] of Object.entries(headers)) {
    if (k.toLowerCase() === name) {
      return Array.isArray(v) ? v.join(", ") : v;
    }
  }
  return undefined;
}

/**
 * Checks a notification: one of the signatures in webhook-signature
 * (separated by spaces) must be v1 and match body, the raw bytes received,
 * with webhook-id and webhook-timestamp; and webhook-timestamp (seconds
 * since the epoch) must be within toleranceS of nowS, so that an old
 * notification sent again fails. Returns the notification, parsed; throws
 * BadSignature otherwise.
 */
export function verifyCallback(secret: string, headers: CallbackHeaders, body: Uint8Array | string,
  { toleranceS = 300, nowS = Date.now() / 1000 }: { toleranceS?: number; nowS?: number } = {}): TicketGranted {
  const key = callbackKey(secret);
  const raw = typeof body === "string" ? Buffer.from(body) : Buffer.from(body);
  const id = header(headers, "webhook-id");
  const ts = header(headers, "webhook-timestamp");
  const sigs = header(headers, "webhook-signature");
  if (!id || !ts || !sigs) {
    throw new BadSignature("missing webhook-id, webhook-timestamp or webhook-signature");
  }
  if (!/^\d+$/.test(ts)) {
    throw new BadSignature("webhook-timestamp is not a number");
  }
  const sent = Number(ts);
  if (Math.abs(nowS - sent) > toleranceS) {
    throw new BadSignature("webhook-timestamp is too far from now: an old notification, or a clock that is off");
  }
  const mac = createHmac("sha256", key).update(`${id}.${sent}.`).update(raw).digest("base64");
  const want = Buffer.from(`v1,${mac}`);
  const match = sigs.split(" ").some((sig) => {
    const got = Buffer.from(sig);
    return got.length === want.length && timingSafeEqual(got, want);
  });
  if (!match) {
    throw new BadSignature("no signature matches");
  }
  return JSON.parse(raw.toString("utf8")) as TicketGranted;
}
