package app

import (
	"bytes"
	"cmp"
	"fmt"
	"io"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/lockgate/lockgate/auth"
)

// devTokenTTL is how long the --dev token works.
const devTokenTTL = 24 * time.Hour

// printDev writes, after a warning, a token for every namespace, one that
// also administers them (breaks, resizes), and a first curl command, in
// one write so that no log line splits it. Run passes stderr: stdout
// carries the listening line only, and is what a container runtime keeps
// as the log people forward. checkDev has made sure that the key is the
// random one of this process, which is never shown: lockctl token cannot
// sign for this gateway, so both tokens come from here.
func printDev(w io.Writer, cfg config, ac auth.Config, baseURL string) error {
	token, err := devToken(cfg, ac, false)
	if err != nil {
		return err
	}
	admin, err := devToken(cfg, ac, true)
	if err != nil {
		return err
	}
	var b bytes.Buffer
	fmt.Fprintln(&b, "WARNING: lockgate --dev is not for production: it prints tokens that grant every namespace.")
	fmt.Fprintln(&b, "The signing key is random: these tokens stop working when the process exits.")
	fmt.Fprintf(&b, "Paste this into a shell (a token for every namespace, and one that also administers them: break, resize; valid %s):\n\n", devTokenTTL)
	fmt.Fprintf(&b, "export LOCKGATE_TOKEN=%s\n", token)
	fmt.Fprintf(&b, "export LOCKGATE_ADMIN_TOKEN=%s\n\n", admin)
	fmt.Fprintln(&b, "Then take a lock for 30 s:")
	fmt.Fprintf(&b, "curl -s -X POST -H \"Authorization: Bearer $LOCKGATE_TOKEN\" -d '{\"ttl_ms\":30000}' %s/locks/demo/hello\n\n", baseURL)
	if cfg.ui {
		fmt.Fprintf(&b, "See it in the read-only dashboard (paste the token there; it is kept in the tab only): %s/ui/\n\n", baseURL)
	}
	_, err = w.Write(b.Bytes())
	return err
}

// devToken signs a token of subject "dev" for every namespace with the
// process's random key; admin: one that administers them all too.
func devToken(cfg config, ac auth.Config, admin bool) (string, error) {
	now := time.Now()
	nsClaim := cmp.Or(cfg.jwtNSClaim, "ns")
	claims := jwt.MapClaims{
		"sub":   "dev",
		"iat":   now.Unix(),
		"exp":   now.Add(devTokenTTL).Unix(),
		nsClaim: []string{"*"},
	}
	if admin {
		claims[nsClaim+"_admin"] = []string{"*"}
	}
	if len(cfg.jwtIssuers) > 0 {
		claims["iss"] = cfg.jwtIssuers[0] // any of them verifies
	}
	if cfg.jwtAudience != "" {
		claims["aud"] = []string{cfg.jwtAudience}
	}
	token, err := jwt.NewWithClaims(jwt.SigningMethodHS256, claims).SignedString(ac.Secret)
	if err != nil {
		return "", fmt.Errorf("sign the dev token: %w", err)
	}
	return token, nil
}
