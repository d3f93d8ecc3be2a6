package app

import (
	"bytes"
	"fmt"
	"io"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/lockgate/lockgate/auth"
)

// devTokenTTL is how long the --dev token works.
const devTokenTTL = 24 * time.Hour

// printDev writes, after a warning, a token for every namespace and a first
// curl command, in one write so that no log line splits it. Run passes
// stderr: stdout carries the listening line only, and is what a container
// runtime keeps as the log people forward. checkDev has made sure that the
// key is the random one of this process.
func printDev(w io.Writer, cfg config, ac auth.Config, baseURL string) error {
	now := time.Now()
	claims := struct {
		Namespaces []string `json:"ns"`
		jwt.RegisteredClaims
	}{
		Namespaces: []string{"*"},
		RegisteredClaims: jwt.RegisteredClaims{
			Subject:   "dev",
			IssuedAt:  jwt.NewNumericDate(now),
			ExpiresAt: jwt.NewNumericDate(now.Add(devTokenTTL)),
		},
	}
	if len(cfg.jwtIssuers) > 0 {
		claims.Issuer = cfg.jwtIssuers[0] // any of them verifies
	}
	if cfg.jwtAudience != "" {
		claims.Audience = jwt.ClaimStrings{cfg.jwtAudience}
	}
	token, err := jwt.NewWithClaims(jwt.SigningMethodHS256, claims).SignedString(ac.Secret)
	if err != nil {
		return fmt.Errorf("sign the dev token: %w", err)
	}
	var b bytes.Buffer
	fmt.Fprintln(&b, "WARNING: lockgate --dev is not for production: it prints a token that grants every namespace.")
	fmt.Fprintln(&b, "The signing key is random: this token stops working when the process exits.")
	fmt.Fprintf(&b, "Paste this into a shell (a token for every namespace, valid %s):\n\n", devTokenTTL)
	fmt.Fprintf(&b, "export LOCKGATE_TOKEN=%s\n\n", token)
	fmt.Fprintln(&b, "Then take a lock for 30 s:")
	fmt.Fprintf(&b, "curl -s -X POST -H \"Authorization: Bearer $LOCKGATE_TOKEN\" -d '{\"ttl_ms\":30000}' %s/locks/demo/hello\n\n", baseURL)
	if cfg.ui {
		fmt.Fprintf(&b, "See it in the read-only dashboard (paste the token there; it is kept in the tab only): %s/ui/\n\n", baseURL)
	}
	_, err = w.Write(b.Bytes())
	return err
}
