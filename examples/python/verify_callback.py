"""Checks a notification that lockgate POSTs to a ticket's callback_url, as
Standard Webhooks receivers do, with the standard library only.

    from verify_callback import verify_callback, BadSignature
    note = verify_callback(ticket["callback_secret"], headers, body)
    # {"type": "ticket.granted", "data": {"lock", "ticket", "poll_url", "pick_up_within_ms"}}

The gateway signs each ticket's notifications with the ticket's own secret,
the callback_secret open_ticket answered ("whsec_" and base64 of the key;
derived from the operator's --callback-secret, which receivers never hold):
webhook-signature is "v1," and base64 of HMAC-SHA256 over
"webhook-id.webhook-timestamp.body", keyed with the decoded key. Check every
notification with its ticket's secret before acting on it: anyone can POST
to the receiver's URL, and one ticket's secret verifies no other ticket's
notification.

A notification is a hint even when it verifies: it names the ticket, never
its token, and grants nothing. The grant is the next poll of the ticket the
caller opened (poll_ticket, with the ticket token it kept); never follow
poll_url from the body. The same notification may come more than once (a
retry has the same webhook-id).
"""

import base64
import binascii
import hashlib
import hmac
import json
import time

SECRET_PREFIX = "whsec_"


class BadSignature(Exception):
    """A notification that does not verify: ignore it (answer 400)."""


def callback_key(secret):
    """The HMAC key of a secret written as the gateway takes it: whsec_ and
    base64 (the prefix may be left out)."""
    b64 = secret.strip()
    if b64.startswith(SECRET_PREFIX):
        b64 = b64[len(SECRET_PREFIX):]
    try:
        key = base64.b64decode(b64, validate=True)
    except (binascii.Error, ValueError):
        raise ValueError("callback secret: want whsec_ followed by base64") from None
    if not key:
        raise ValueError("callback secret: empty")
    return key


def verify_callback(secret, headers, body, tolerance_s=300, now=None):
    """Checks a notification: one of the signatures in webhook-signature
    (separated by spaces) must be v1 and match body, the raw bytes
    received, with webhook-id and webhook-timestamp; and webhook-timestamp
    (seconds since the epoch) must be within tolerance_s of now, so that an
    old notification sent again fails. headers is any mapping with items()
    (http.server's, a dict), matched without regard to case. Returns the
    notification, parsed; raises BadSignature otherwise."""
    key = callback_key(secret)
    if isinstance(body, str):
        body = body.encode()
    h = {k.lower(): v for k, v in headers.items()}
    msg_id, ts, sigs = h.get("webhook-id"), h.get("webhook-timestamp"), h.get("webhook-signature")
    if not msg_id or not ts or not sigs:
        raise BadSignature("missing webhook-id, webhook-timestamp or webhook-signature")
    try:
        sent = int(ts)
    except ValueError:
        raise BadSignature("webhook-timestamp is not a number") from None
    if abs((time.time() if now is None else now) - sent) > tolerance_s:
        raise BadSignature("webhook-timestamp is too far from now: an old notification, or a clock that is off")
    mac = hmac.new(key, f"{msg_id}.{sent}.".encode() + body, hashlib.sha256).digest()
    want = ("v1," + base64.b64encode(mac).decode()).encode()
    if not any(hmac.compare_digest(sig.encode(), want) for sig in sigs.split()):
        raise BadSignature("no signature matches")
    return json.loads(body)
