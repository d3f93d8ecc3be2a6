// Command verifygrant is what a resource protected by a lockgate lock
// does with the work it receives: it checks the grant that came with it,
// offline, before it acts. The standard library and golang-jwt only.
//
//	verifygrant JWKS_URL ISSUER LOCK LAST_FENCING_TOKEN < signed_grant
//
// It accepts (exit 0, "accepted fencing_token=N") a grant signed by a key
// of the gateway's JWK Set, issued by ISSUER (the gateways' --grant-issuer:
// a grant of another deployment sharing the key file is refused, since its
// fencing tokens say nothing of this one's), of the exclusive lock LOCK, whose lease has not
// ended, whose fencing token is larger than LAST_FENCING_TOKEN (the largest
// the resource has accepted for LOCK), and rejects anything else (exit 1,
// "rejected: why"). A real resource fetches the set once and again only
// for a kid it does not know, and keeps the last fencing token per lock
// with the data it protects, updated in the same write.
package main

import (
	"crypto/ed25519"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// grantClaims are a signed grant's claims.
type grantClaims struct {
	jwt.RegisteredClaims
	Lock         string `json:"lock"`
	FencingToken int64  `json:"fencing_token"`
	Mode         string `json:"mode"`
}

func main() {
	if len(os.Args) != 5 {
		fmt.Fprintln(os.Stderr, "usage: verifygrant JWKS_URL ISSUER LOCK LAST_FENCING_TOKEN < signed_grant")
		os.Exit(2)
	}
	last, err := strconv.ParseInt(os.Args[4], 10, 64)
	if err != nil {
		fmt.Fprintln(os.Stderr, "LAST_FENCING_TOKEN:", err)
		os.Exit(2)
	}
	keys, err := fetchKeys(os.Args[1])
	if err != nil {
		fmt.Fprintln(os.Stderr, "fetch the gateway's keys:", err)
		os.Exit(2)
	}
	in, _ := io.ReadAll(os.Stdin)
	fence, err := verify(strings.TrimSpace(string(in)), keys, os.Args[2], os.Args[3], last)
	if err != nil {
		fmt.Println("rejected:", err)
		os.Exit(1)
	}
	fmt.Printf("accepted fencing_token=%d\n", fence)
}

// verify checks a signed grant and returns its fencing token.
func verify(signed string, keys map[string]ed25519.PublicKey, issuer, lock string, last int64) (int64, error) {
	jwt.TimePrecision = time.Millisecond // a lease ends to the millisecond
	var c grantClaims
	var keyErr error // why keyfunc found no key, said as is
	_, err := jwt.ParseWithClaims(signed, &c, func(t *jwt.Token) (any, error) {
		kid, _ := t.Header["kid"].(string)
		key, ok := keys[kid]
		switch {
		case t.Header["typ"] != "lockgate-grant+jwt":
			keyErr = errors.New("not a lockgate grant")
		case !ok:
			keyErr = fmt.Errorf("signed by a key the gateway does not publish (kid %q)", kid)
		default:
			return key, nil
		}
		return nil, keyErr
	}, jwt.WithValidMethods([]string{"EdDSA"}), jwt.WithExpirationRequired())
	switch {
	case keyErr != nil:
		return 0, keyErr
	case errors.Is(err, jwt.ErrTokenExpired):
		return 0, errors.New("the lease has ended")
	case err != nil:
		return 0, err
	case c.Issuer != issuer:
		return 0, fmt.Errorf("issued by %q (iss), not %q: a grant of another deployment", c.Issuer, issuer)
	case len(c.Audience) > 0:
		// lockgate grants name no audience: one that does is not a grant
		// this resource was meant to take.
		return 0, fmt.Errorf("names an audience (aud %q), which lockgate grants do not", c.Audience)
	case c.Lock != lock:
		return 0, fmt.Errorf("a grant of %q, not of %q", c.Lock, lock)
	case c.Mode != "exclusive":
		return 0, fmt.Errorf("a %s hold, not the exclusive one", c.Mode)
	case c.FencingToken <= last:
		return 0, fmt.Errorf("fencing token %d is not larger than %d, the last accepted: a stale holder", c.FencingToken, last)
	}
	return c.FencingToken, nil
}

// fetchKeys reads the gateway's JWK Set: kid -> Ed25519 public key.
func fetchKeys(url string) (map[string]ed25519.PublicKey, error) {
	resp, err := http.Get(url)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%s: %s", url, resp.Status)
	}
	var set struct {
		Keys []struct{ Kty, Crv, X, Kid string }
	}
	if err := json.NewDecoder(resp.Body).Decode(&set); err != nil {
		return nil, err
	}
	keys := map[string]ed25519.PublicKey{}
	for _, k := range set.Keys {
		x, err := base64.RawURLEncoding.DecodeString(k.X)
		if k.Kty != "OKP" || k.Crv != "Ed25519" || err != nil || len(x) != 32 {
			continue // not a key this verifier can use
		}
		keys[k.Kid] = ed25519.PublicKey(x)
	}
	return keys, nil
}
