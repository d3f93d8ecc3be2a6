package auth

import (
	"strings"
	"testing"
)

// TestWeakSecretsRefused: a secret read as text with surrounding
// whitespace (a newline from a file, a stray space), or an obviously weak
// one, is refused, and the error never quotes it.
func TestWeakSecretsRefused(t *testing.T) {
	for name, tc := range map[string]struct{ secret, want string }{
		"trailing newline":   {testSecret + "\n", "whitespace"},
		"trailing CRLF":      {testSecret + "\r\n", "whitespace"},
		"leading space":      {" " + testSecret, "whitespace"},
		"trailing tab":       {testSecret + "\t", "whitespace"},
		"one repeated byte":  {strings.Repeat("x", 64), "distinct"},
		"zeros":              {strings.Repeat("0", 32), "distinct"},
		"few distinct bytes": {strings.Repeat("secret", 6), "distinct"},
		"password":           {strings.Repeat("password", 4), "distinct"},
		"a repeated block":   {strings.Repeat("0123456789abcdef", 2), "repeats"},
		"short":              {"0123456789abcdef", "at least 32 bytes"},
	} {
		t.Run(name, func(t *testing.T) {
			err := CheckTextSecret(tc.secret)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want an error mentioning %q", err, tc.want)
			}
			if strings.Contains(err.Error(), strings.TrimSpace(tc.secret)[:8]) {
				t.Fatalf("the error quotes the secret: %v", err)
			}
			if tc.want == "whitespace" {
				return // bytes, not text: see TestBinarySecretWithWhitespaceBytes
			}
			if _, err2 := NewAuthenticator(Config{Secret: []byte(tc.secret)}); err2 == nil || err2.Error() != err.Error() {
				t.Fatalf("NewAuthenticator: got %v, want %v", err2, err)
			}
		})
	}
}

// TestRandomSecretsAccepted: what the README tells people to run
// (openssl rand -hex 32, or -base64 32) passes, and so do the secrets the
// tests use. A quarter of `openssl rand -hex 32` outputs lack one of the
// 16 hex digits: a rule of 16 distinct bytes would refuse them.
func TestRandomSecretsAccepted(t *testing.T) {
	for _, s := range []string{
		testSecret,
		"e27cb9ad2b7aaf91c62ceab37ed0f93d0074a930494fe90f04bc43be2aaf31af", // openssl rand -hex 32 without 5 and 8
		"9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08",
		"tQJ7m0Yb6kZ2v9oR1sXcW4nE8aHdLuPg+3/5Ff==",
		"01234567012345670123456701234568", // 9 distinct, not a repetition
	} {
		if err := CheckTextSecret(s); err != nil {
			t.Errorf("%q: got %v, want accepted", s, err)
		}
	}
}

// TestBinarySecretWithWhitespaceBytes: a key given as bytes (--dev's
// random one, a library user's) may begin or end with a byte that is
// whitespace in ASCII, about one random key in twenty; it is a key, not
// text with a stray newline, and is accepted. The whitespace rule is for
// secrets read as text: the gateway's configuration and lockctl token.
func TestBinarySecretWithWhitespaceBytes(t *testing.T) {
	key := []byte("\n\x8f\x01\xfe\x33\xa0\x7c\x19\xd2\x44\x5b\xe7\x02\x9a\xc3\x6d\x11\xf0\x88\x2e\x47\xb9\x05\xde\x73\x1c\xaa\x60\x3f\x94\xeb\x20")
	if _, err := NewAuthenticator(Config{Secret: key}); err != nil {
		t.Fatalf("NewAuthenticator with a random binary key: %v", err)
	}
}
