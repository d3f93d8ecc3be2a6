package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"regexp"
	"strings"
	"time"
)

// defaultURL is where "gateway --dev" listens.
const defaultURL = "http://127.0.0.1:8080"

// cli is what every command reads and writes.
type cli struct {
	getenv func(string) string
	stdin  io.Reader
	stdout io.Writer
	stderr io.Writer
}

// newFlagSet returns a flag set for a command whose usage line is usage.
func (c cli) newFlagSet(name, usage string) *flag.FlagSet {
	fs := flag.NewFlagSet("lockctl "+name, flag.ContinueOnError)
	fs.SetOutput(c.stderr)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "Usage: lockctl %s\n\nFlags:\n", usage)
		fs.PrintDefaults()
	}
	return fs
}

// clientFlags are the flags of every command that calls the gateway. Each
// overrides its environment variable.
type clientFlags struct {
	url     string
	jwt     string
	timeout time.Duration
}

func addClientFlags(fs *flag.FlagSet) *clientFlags {
	cf := &clientFlags{}
	fs.StringVar(&cf.url, "url", "", "gateway base URL (default $LOCKGATE_URL, else "+defaultURL+")")
	fs.StringVar(&cf.jwt, "jwt", "", "bearer JWT (default $LOCKGATE_TOKEN; prefer the variable: flags show in ps)")
	fs.DurationVar(&cf.timeout, "timeout", 10*time.Second, "bound on each call, on top of any server-side wait")
	return cf
}

func (cf *clientFlags) client(getenv func(string) string) (*client, error) {
	raw := firstNonEmpty(cf.url, getenv("LOCKGATE_URL"), defaultURL)
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, usagef("gateway URL %q: want http://host:port or https://host", redactedURL(raw))
	}
	if cf.timeout <= 0 {
		return nil, usagef("--timeout must be positive")
	}
	return &client{
		base:    u,
		jwt:     strings.TrimSpace(firstNonEmpty(cf.jwt, getenv("LOCKGATE_TOKEN"))),
		timeout: cf.timeout,
		http:    &http.Client{CheckRedirect: sameOriginOnly},
	}, nil
}

// redactedURL hides a password in a URL that did not parse well enough
// for url.URL.Redacted.
func redactedURL(raw string) string {
	if u, err := url.Parse(raw); err == nil {
		return u.Redacted()
	}
	if _, rest, ok := strings.Cut(raw, "@"); ok {
		return "…@" + rest
	}
	return raw
}

func firstNonEmpty(vals ...string) string {
	for _, v := range vals {
		if v != "" {
			return v
		}
	}
	return ""
}

// parseArgs parses flags wherever they stand among the positional
// arguments, so that "lockctl acquire ns/name --ttl 5s" works as typed.
// Everything after "--" comes back unparsed in rest, with dashes true.
func parseArgs(fs *flag.FlagSet, args []string) (pos, rest []string, dashes bool, err error) {
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return nil, nil, false, err
			}
			// The flag package has printed it, with the usage.
			return nil, nil, false, &usageError{msg: err.Error(), printed: true}
		}
		left := fs.Args()
		if used := len(args) - len(left); used > 0 && args[used-1] == "--" {
			return pos, left, true, nil
		}
		if len(left) == 0 {
			return pos, nil, false, nil
		}
		pos = append(pos, left[0])
		args = left[1:]
	}
}

// oneLock parses the flags of a command that takes exactly one lock name
// and nothing else.
func oneLock(fs *flag.FlagSet, args []string) (lockName, error) {
	pos, rest, _, err := parseArgs(fs, args)
	if err != nil {
		return lockName{}, err
	}
	pos = append(pos, rest...)
	if len(pos) != 1 {
		return lockName{}, usagef("%s takes one lock, namespace/name; got %d arguments", fs.Name(), len(pos))
	}
	return parseLockName(pos[0])
}

// lockName is a lock's namespace and name, as in the URL; or, with
// semaphore set, a semaphore's: the two are separate name spaces.
type lockName struct {
	ns, name  string
	semaphore bool
}

// The patterns of openapi.yaml: a bad name is a usage error here rather
// than a 400 later.
var (
	namespaceRE = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]{0,62}$`)
	nameRE      = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.:-]{0,199}$`)
)

func parseLockName(s string) (lockName, error) {
	ns, name, ok := strings.Cut(s, "/")
	switch {
	case !ok:
		return lockName{}, usagef("lock %q: want namespace/name, e.g. billing/invoice-42", s)
	case !namespaceRE.MatchString(ns):
		return lockName{}, usagef("lock %q: the namespace must match %s", s, namespaceRE)
	case !nameRE.MatchString(name):
		return lockName{}, usagef("lock %q: the name must match %s", s, nameRE)
	}
	return lockName{ns: ns, name: name}, nil
}

func (l lockName) String() string { return l.ns + "/" + l.name }

// path is the lock's URL path below the base URL; both parts are already
// URL-safe by their patterns.
func (l lockName) path() string {
	if l.semaphore {
		return "semaphores/" + l.ns + "/" + l.name
	}
	return "locks/" + l.ns + "/" + l.name
}

// defaultOwner labels locks taken by lockctl in inspect's owner field.
func defaultOwner() string {
	host, err := os.Hostname()
	if err != nil {
		host = "unknown-host"
	}
	return fmt.Sprintf("lockctl on %s", host)
}

// readLockToken returns the owner token from --token, "-" meaning the
// first line of stdin, or else $LOCKGATE_LOCK_TOKEN.
func readLockToken(c cli, flagVal string) (string, error) {
	return readSecret(c, flagVal, "LOCKGATE_LOCK_TOKEN", "no lock token: pass --token T (or --token - to read it from stdin, or set LOCKGATE_LOCK_TOKEN)")
}

// readSecret returns a token from its flag, "-" meaning the first line of
// stdin, or else from the environment variable env; missing is the usage
// error without either.
func readSecret(c cli, flagVal, env, missing string) (string, error) {
	tok := firstNonEmpty(flagVal, c.getenv(env))
	if tok == "-" {
		b, err := io.ReadAll(io.LimitReader(c.stdin, 4096))
		if err != nil {
			return "", fmt.Errorf("read the token from stdin: %w", err)
		}
		tok, _, _ = strings.Cut(string(b), "\n")
	}
	tok = strings.TrimSpace(tok)
	if tok == "" {
		return "", usagef("%s", missing)
	}
	return tok, nil
}
