// Package grantsig signs grants so that the resource a lock protects can
// check them with no call to the gateway: every grant (and every renewal)
// carries a compact JWS (RFC 7515), signed with Ed25519 (EdDSA, RFC 8037),
// over the lock, the fencing token, the mode, the holder's identity, when
// it was issued and when its lease ends. The gateway serves the public keys
// as a JWK Set (RFC 7517) at /.well-known/lockgate/jwks.json.
//
// A resource that receives work with a signed grant checks the signature
// against the JWK Set (by the header's kid), the type, the lease end, and
// that the fencing token is larger than the last one it accepted for that
// lock. docs/SAFETY.md says what that proves and what it assumes.
//
// Keys come from a PEM file of PKCS#8 Ed25519 private keys (the first
// signs, every one is published) and public keys (published, never used
// to sign), or, with no file, from one key generated at start. Gateways
// that share a file publish the same set, so a resource needs one of them.
package grantsig
