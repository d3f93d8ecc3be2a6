package app

import (
	"fmt"
	"io"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/lockgate/lockgate/middleware"
)

// devTokenTTL is how long the --dev token works.
const devTokenTTL = 24 * time.Hour

// printDev prints a token for every namespace and a first curl command. The
// token goes to stdout, for the person who started the process, never to
// the log.
func printDev(w io.Writer, cfg config, ac middleware.AuthConfig, baseURL string) error {
	fmt.Fprintln(w, "lockgate --dev: not for production.")
	if len(ac.Secret) == 0 {
		fmt.Fprintln(w, "Tokens are verified with --jwt-public-key-file; sign your own to call the API.")
		return nil
	}
	now := time.Now()
	claims := struct {
		Namespaces []string `json:"ns"`
		jwt.RegisteredClaims
	}{
		Namespaces: []string{"*"},
		RegisteredClaims: jwt.RegisteredClaims{
			Subject:   "dev",
			Issuer:    cfg.jwtIssuer,
			IssuedAt:  jwt.NewNumericDate(now),
			ExpiresAt: jwt.NewNumericDate(now.Add(devTokenTTL)),
		},
	}
	if cfg.jwtAudience != "" {
		claims.Audience = jwt.ClaimStrings{cfg.jwtAudience}
	}
	token, err := jwt.NewWithClaims(jwt.SigningMethodHS256, claims).SignedString(ac.Secret)
	if err != nil {
		return fmt.Errorf("sign the dev token: %w", err)
	}
	if cfg.jwtSecret == "" {
		fmt.Fprintln(w, "The signing key is random: this token stops working when the process exits.")
	}
	fmt.Fprintf(w, "Paste this into a shell (a token for every namespace, valid %s):\n\n", devTokenTTL)
	fmt.Fprintf(w, "export LOCKGATE_TOKEN=%s\n\n", token)
	fmt.Fprintln(w, "Then take a lock for 30 s:")
	fmt.Fprintf(w, "curl -s -X POST -H \"Authorization: Bearer $LOCKGATE_TOKEN\" -d '{\"ttl_ms\":30000}' %s/locks/demo/hello\n", baseURL)
	return nil
}
