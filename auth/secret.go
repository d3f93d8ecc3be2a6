package auth

import "github.com/lockgate/lockgate/internal/jwtsecret"

// MinSecretLen is the shortest HS256 secret accepted: RFC 7518 asks for a
// key at least as long as the hash.
const MinSecretLen = jwtsecret.MinLen

// CheckSecret says whether secret can be an HS256 key; NewAuthenticator
// calls it. It refuses, without quoting the secret, fewer than
// MinSecretLen bytes, fewer than 8 distinct bytes, or a shorter block
// repeated. A key is bytes and may hold any byte: a secret read as text
// should also go through CheckTextSecret.
func CheckSecret(secret []byte) error { return jwtsecret.Check(secret) }

// CheckTextSecret is CheckSecret for a secret read as text (a variable, a
// flag, a file): it also refuses leading or trailing whitespace, most
// often a newline, rather than trim it, since whoever signs tokens with
// the same value would use the untrimmed bytes and every token would fail
// with a 401 that names no cause.
func CheckTextSecret(secret string) error { return jwtsecret.CheckText(secret) }
