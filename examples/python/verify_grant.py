#!/usr/bin/env python3
"""What a resource protected by a lockgate lock does with the work it
receives: it checks the grant that came with it, offline, before it acts.
Needs the `cryptography` package (Debian: python3-cryptography) for Ed25519.

  verify_grant.py JWKS_URL ISSUER LOCK LAST_FENCING_TOKEN < signed_grant

Accepts (exit 0, "accepted fencing_token=N") a grant signed by a key of the
gateway's JWK Set, issued by ISSUER (the gateways' --grant-issuer: a grant
of another deployment sharing the key file is refused), of the exclusive
lock LOCK, whose lease has not ended,
whose fencing token is larger than LAST_FENCING_TOKEN (the largest the
resource has accepted for LOCK); rejects anything else (exit 1, "rejected:
why"). A real resource fetches the set once and again only for a kid it
does not know, and keeps the last fencing token per lock with the data it
protects, updated in the same write.
"""

import base64
import json
import sys
import time
import urllib.request

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey


class Rejected(Exception):
    pass


def b64decode(s):
    return base64.urlsafe_b64decode(s + "=" * (-len(s) % 4))


def fetch_keys(url):
    """The gateway's JWK Set: kid -> Ed25519 public key."""
    with urllib.request.urlopen(url, timeout=10) as resp:
        jwks = json.load(resp)
    keys = {}
    for k in jwks.get("keys", []):
        if k.get("kty") == "OKP" and k.get("crv") == "Ed25519":
            keys[k["kid"]] = Ed25519PublicKey.from_public_bytes(b64decode(k["x"]))
    return keys


def verify(signed, keys, issuer, lock, last):
    """Checks a signed grant; returns its fencing token or raises Rejected."""
    try:
        header_b64, payload_b64, sig_b64 = signed.split(".")
        header = json.loads(b64decode(header_b64))
        claims = json.loads(b64decode(payload_b64))
        sig = b64decode(sig_b64)
    except ValueError as e:
        raise Rejected(f"not a compact JWS: {e}")
    if header.get("typ") != "lockgate-grant+jwt" or header.get("alg") != "EdDSA":
        raise Rejected("not a lockgate grant signed with EdDSA")
    key = keys.get(header.get("kid"))
    if key is None:
        raise Rejected(f"signed by a key the gateway does not publish (kid {header.get('kid')!r})")
    try:
        key.verify(sig, f"{header_b64}.{payload_b64}".encode())
    except InvalidSignature:
        raise Rejected("bad signature")
    if not isinstance(claims.get("exp"), (int, float)) or claims["exp"] <= time.time():
        raise Rejected("the lease has ended")
    if claims.get("iss") != issuer:
        raise Rejected(f"issued by {json.dumps(claims.get('iss'))} (iss), not {json.dumps(issuer)}: a grant of another deployment")
    if "aud" in claims:
        raise Rejected(f"names an audience (aud {claims['aud']!r}), which lockgate grants do not")
    if claims.get("lock") != lock:
        raise Rejected(f"a grant of {claims.get('lock')!r}, not of {lock!r}")
    if claims.get("mode") != "exclusive":
        raise Rejected(f"a {claims.get('mode')} hold, not the exclusive one")
    fence = claims.get("fencing_token")
    if not isinstance(fence, int) or fence <= last:
        raise Rejected(f"fencing token {fence} is not larger than {last}, the last accepted: a stale holder")
    return fence


def main():
    if len(sys.argv) != 5:
        print("usage: verify_grant.py JWKS_URL ISSUER LOCK LAST_FENCING_TOKEN < signed_grant", file=sys.stderr)
        sys.exit(2)
    keys = fetch_keys(sys.argv[1])
    try:
        fence = verify(sys.stdin.read().strip(), keys, sys.argv[2], sys.argv[3], int(sys.argv[4]))
    except Rejected as r:
        print(f"rejected: {r}")
        sys.exit(1)
    print(f"accepted fencing_token={fence}")


if __name__ == "__main__":
    main()
