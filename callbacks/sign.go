package callbacks

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// secretPrefix starts a Standard Webhooks secret; base64 of its bytes
// follows.
const secretPrefix = "whsec_"

// Secret is the key notifications are signed with (HMAC-SHA256). Its
// String hides it: a Secret printed or logged by mistake shows nothing.
type Secret struct{ key []byte }

// ParseSecret parses "whsec_" followed by base64 of 24 to 64 random bytes.
func ParseSecret(s string) (Secret, error) {
	b64, ok := strings.CutPrefix(strings.TrimSpace(s), secretPrefix)
	if !ok {
		return Secret{}, errors.New("callback secret: want whsec_ followed by base64")
	}
	key, err := base64.StdEncoding.DecodeString(b64)
	if err != nil {
		return Secret{}, errors.New("callback secret: the part after whsec_ is not base64")
	}
	if len(key) < 24 || len(key) > 64 {
		return Secret{}, fmt.Errorf("callback secret: %d bytes, want 24 to 64", len(key))
	}
	return Secret{key: key}, nil
}

// NewSecret returns a fresh secret of 32 random bytes.
func NewSecret() Secret {
	key := make([]byte, 32)
	rand.Read(key)
	return Secret{key: key}
}

// Encode returns the secret as an operator configures it: whsec_ and base64.
func (s Secret) Encode() string { return secretPrefix + base64.StdEncoding.EncodeToString(s.key) }

// String implements fmt.Stringer without revealing the secret.
func (s Secret) String() string { return "whsec_[hidden]" }

// IsZero reports whether s holds no key.
func (s Secret) IsZero() bool { return len(s.key) == 0 }

// ticketSecretLabel keeps a ticket's secret apart from every other use of
// the operator's.
const ticketSecretLabel = "lockgate callback secret v1\x00"

// ForTicket returns the secret of one ticket, ticket of lock, that its
// notifications are signed with: HMAC-SHA256 keyed with s over both
// names. The gateway hands it to the ticket's caller alone (the 202 that
// opens the ticket), so a receiver holds its own ticket's secret and
// never s: it can verify, and so forge, its own ticket's notifications
// and no other's, whoever opened them. Per ticket rather than per
// subject, as the caller keeps what it got for the ticket anyway (its
// token and id), and one secret that leaks from a receiver forges
// nothing of any other ticket, of its subject's or another's. Any gateway
// sharing s derives the same secret, without storing it.
func (s Secret) ForTicket(lock, ticket string) Secret {
	mac := hmac.New(sha256.New, s.key)
	mac.Write([]byte(ticketSecretLabel + lock + "\x00" + ticket))
	return Secret{key: mac.Sum(nil)}
}

// sign returns the webhook-signature value for a message: v1, and base64
// of HMAC-SHA256 over "id.timestamp.body".
func (s Secret) sign(id string, ts int64, body []byte) string {
	mac := hmac.New(sha256.New, s.key)
	mac.Write([]byte(id + "." + strconv.FormatInt(ts, 10) + "."))
	mac.Write(body)
	return "v1," + base64.StdEncoding.EncodeToString(mac.Sum(nil))
}

// The headers of a signed notification.
const (
	HeaderID        = "webhook-id"
	HeaderTimestamp = "webhook-timestamp"
	HeaderSignature = "webhook-signature"
)

// ErrBadSignature is a notification that does not verify.
var ErrBadSignature = errors.New("callback signature does not verify")

// Verify checks a notification as a receiver does: the signature over its
// id, timestamp and body, and a timestamp within tolerance of now (a
// replay of an old notification fails). One of the space-separated
// signatures must verify.
func Verify(secret Secret, h http.Header, body []byte, now time.Time, tolerance time.Duration) error {
	id, tsText, sigs := h.Get(HeaderID), h.Get(HeaderTimestamp), h.Get(HeaderSignature)
	if id == "" || tsText == "" || sigs == "" {
		return fmt.Errorf("%w: missing headers", ErrBadSignature)
	}
	ts, err := strconv.ParseInt(tsText, 10, 64)
	if err != nil {
		return fmt.Errorf("%w: bad timestamp", ErrBadSignature)
	}
	if d := now.Sub(time.Unix(ts, 0)); d > tolerance || d < -tolerance {
		return fmt.Errorf("%w: timestamp outside the tolerance", ErrBadSignature)
	}
	want := secret.sign(id, ts, body)
	for _, sig := range strings.Fields(sigs) {
		if hmac.Equal([]byte(sig), []byte(want)) {
			return nil
		}
	}
	return ErrBadSignature
}
