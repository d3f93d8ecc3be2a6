package main

import (
	"context"
	"fmt"
	"os/user"
	"strings"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/lockgate/lockgate/internal/jwtsecret"
)

// tokenClaims is the JWT the gateway reads: sub, ns globs, the ns globs it
// administers, and exp.
type tokenClaims struct {
	Namespaces []string `json:"ns"`
	Admin      []string `json:"ns_admin,omitempty"`
	jwt.RegisteredClaims
}

// cmdToken mints an HS256 JWT, for operators and development. It prints
// the token on stdout: that is what was asked for.
func cmdToken(_ context.Context, c cli, args []string) error {
	fs := c.newFlagSet("token", "token [--sub name] --ns 'billing,etl-*' [--admin 'billing'] [--ttl 1h] [--secret S] [--iss I] [--aud A]")
	secret := fs.String("secret", "", "HS256 secret, at least 32 bytes (default $LOCKGATE_JWT_SECRET; prefer the variable: flags show in ps)")
	sub := fs.String("sub", "", "subject: who the caller is, recorded as the lock's subject (default $USER, else the user name of this uid, as id -un)")
	nsList := fs.String("ns", "", "comma-separated namespace globs the token grants, e.g. 'billing,etl-*' or '*'")
	adminList := fs.String("admin", "", "comma-separated namespace globs the token administers (may break locks there), within those of --ns")
	ttl := fs.Duration("ttl", time.Hour, "how long the token is valid")
	iss := fs.String("iss", "", "issuer, when the gateway checks one")
	aud := fs.String("aud", "", "audience, when the gateway checks one")
	pos, rest, _, err := parseArgs(fs, args)
	if err != nil {
		return err
	}
	if len(pos)+len(rest) > 0 {
		return usagef("token takes flags only; got %q", append(pos, rest...)[0])
	}
	key := firstNonEmpty(*secret, c.getenv("LOCKGATE_JWT_SECRET"))
	globs, admin := splitGlobs(*nsList), splitGlobs(*adminList)
	subject := *sub
	if subject == "" {
		// An unset USER (containers, cron) made --sub "$USER" empty.
		subject = loginName(c.getenv)
	}
	switch {
	case key == "":
		return usagef("no secret: a token is signed with the gateway's key; export LOCKGATE_JWT_SECRET " +
			"(the value the gateway runs with) or pass --secret. A gateway started with --dev has a random key " +
			"that it never shows: use the tokens it printed, LOCKGATE_TOKEN and LOCKGATE_ADMIN_TOKEN (which " +
			"administers every namespace), or restart it without --dev and with LOCKGATE_JWT_SECRET set")
	case jwtsecret.CheckText(key) != nil:
		// The gateway refuses such a key: its tokens would be of no use.
		return usagef("%v", jwtsecret.CheckText(key))
	case subject == "":
		return usagef("--sub is required here: USER is unset and this uid has no user name; name the caller, e.g. --sub ci")
	case len(globs) == 0:
		return usagef("--ns is required: one or more namespace globs, comma-separated")
	case *ttl <= 0:
		return usagef("--ttl must be positive")
	}
	now := time.Now()
	claims := tokenClaims{
		Namespaces: globs,
		Admin:      admin,
		RegisteredClaims: jwt.RegisteredClaims{
			Subject:   subject,
			Issuer:    *iss,
			IssuedAt:  jwt.NewNumericDate(now),
			ExpiresAt: jwt.NewNumericDate(now.Add(*ttl)),
		},
	}
	if *aud != "" {
		claims.Audience = jwt.ClaimStrings{*aud}
	}
	signed, err := jwt.NewWithClaims(jwt.SigningMethodHS256, claims).SignedString([]byte(key))
	if err != nil {
		return fmt.Errorf("sign: %w", err)
	}
	_, err = fmt.Fprintln(c.stdout, signed)
	return err
}

// loginName is who runs lockctl: $USER, else the user name of the
// process's uid (what id -un prints), else "".
func loginName(getenv func(string) string) string {
	if u := getenv("USER"); u != "" {
		return u
	}
	if u, err := user.Current(); err == nil {
		return u.Username
	}
	return ""
}

// splitGlobs splits a comma-separated list of namespace globs.
func splitGlobs(list string) []string {
	var globs []string
	for g := range strings.SplitSeq(list, ",") {
		if g = strings.TrimSpace(g); g != "" {
			globs = append(globs, g)
		}
	}
	return globs
}
