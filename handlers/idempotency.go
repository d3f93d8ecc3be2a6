package handlers

import (
	"strings"

	"github.com/lockgate/lockgate/locks"
)

// idempotencyKey reads an Idempotency-Key header that the gate let through
// (its pattern in openapi.yaml): a bare key, or a structured-field string
// (RFC 8941 3.3.3), whose escapes \" and \\ it undoes. Keys are secrets, as
// owner tokens are: no error here, or anywhere, repeats one.
func idempotencyKey(v string) (string, error) {
	k := v
	if strings.HasPrefix(v, `"`) {
		if len(v) < 2 || !strings.HasSuffix(v, `"`) {
			return "", errBadIdempotencyKey
		}
		var b strings.Builder
		in := v[1 : len(v)-1]
		for i := 0; i < len(in); i++ {
			c := in[i]
			switch c {
			case '"':
				return "", errBadIdempotencyKey
			case '\\':
				i++
				if i == len(in) || (in[i] != '"' && in[i] != '\\') {
					return "", errBadIdempotencyKey
				}
				c = in[i]
			}
			b.WriteByte(c)
		}
		k = b.String()
	}
	if !locks.ValidIdempotencyKey(k) {
		return "", errBadIdempotencyKey
	}
	return k, nil
}

// idempotencyKeyRule is what a key must be, in words.
const idempotencyKeyRule = `1 to 255 visible ASCII characters ("!" to "~"), bare or as a quoted string ("..." with \" and \\ escapes)`

var errBadIdempotencyKey = invalid("Idempotency-Key must be " + idempotencyKeyRule)

// idempotencyKey returns the key of an acquire's Idempotency-Key header,
// "" when there is none. A key that cannot go with the rest of the call is
// refused for that first (locks.Call.Check), whatever its form.
func (s *Server) idempotencyKey(c locks.Call, header *string) (string, error) {
	if header == nil {
		return "", nil
	}
	c.IdempotencyKey = *header
	if err := c.Check(); err != nil {
		return "", err
	}
	return idempotencyKey(*header)
}
