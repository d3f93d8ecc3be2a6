package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"time"
)

// session is a gateway's answer about a session.
type session struct {
	Session      string `json:"session"`
	SessionToken string `json:"session_token,omitempty"`
	TTLMs        int64  `json:"ttl_ms"`
	RenewAfterMs *int64 `json:"renew_after_ms,omitempty"`
	ExpiresAt    string `json:"expires_at"`
	// Renewed and Gone are a keep-alive's; Released an end's; Holds a
	// description's.
	Renewed  []sessionHold `json:"renewed,omitempty"`
	Gone     []sessionHold `json:"gone,omitempty"`
	Released []sessionHold `json:"released,omitempty"`
	Holds    []sessionHold `json:"holds,omitempty"`
}

type sessionHold struct {
	Kind         string `json:"kind"`
	Resource     string `json:"resource"`
	FencingToken *int64 `json:"fencing_token,omitempty"`
	Pending      *bool  `json:"pending,omitempty"`
}

// sessionPath is the path of the session of token: its id is the
// gateway's to derive, so lockctl asks with the token it has, and the
// gateway checks that they match.
func sessionPath(id string) string { return "/sessions/" + id }

func (c *client) openSession(ctx context.Context, ttl time.Duration) (session, error) {
	var s session
	err := c.do(ctx, http.MethodPost, "/sessions", map[string]any{"ttl_ms": ttl.Milliseconds()}, "", c.timeout, http.StatusCreated, &s)
	return s, err
}

// keepSession renews the session and every grant of it.
func (c *client) keepSession(ctx context.Context, id, token string, ttl time.Duration) (session, error) {
	var body any
	if ttl > 0 {
		body = map[string]any{"ttl_ms": ttl.Milliseconds()}
	}
	var s session
	err := c.doIn(ctx, http.MethodPut, sessionPath(id), body, "", token, c.timeout, http.StatusOK, &s)
	return s, err
}

// endSession ends the session, releasing every grant of it.
func (c *client) endSession(ctx context.Context, id, token string) (session, error) {
	var s session
	err := c.doIn(ctx, http.MethodDelete, sessionPath(id), nil, "", token, c.timeout, http.StatusOK, &s)
	return s, err
}

func (c *client) describeSession(ctx context.Context, id, token string) (session, error) {
	var s session
	err := c.doIn(ctx, http.MethodGet, sessionPath(id), nil, "", token, c.timeout, http.StatusOK, &s)
	return s, err
}

// sessionToken is a session's handle as lockctl prints and reads it:
// "id.token", so that one value names the session and proves it.
func sessionHandle(s session) string { return s.Session + "." + s.SessionToken }

func parseSessionHandle(h string) (id, token string, err error) {
	id, token, ok := strings.Cut(h, ".")
	if !ok || id == "" || token == "" {
		return "", "", usagef("a session is the id.token that 'lockctl session open' printed")
	}
	return id, token, nil
}

// cmdSession opens, keeps, ends and shows sessions: one lease for many
// grants (acquire --session, run with several locks).
func cmdSession(ctx context.Context, c cli, args []string) error {
	const usage = "session open [--ttl 30s] | session keep [--ttl D] | session end | session show  [--session ID.TOKEN] [--json]"
	if len(args) == 0 {
		return usagef("session needs open, keep, end or show: lockctl %s", usage)
	}
	verb := args[0]
	fs := c.newFlagSet("session "+verb, usage)
	cf := addClientFlags(fs)
	ttl := fs.Duration("ttl", 0, "the session's lease (open: default 30s; keep: default the lease last set)")
	handle := fs.String("session", "", "the session, as open printed it; - reads it from stdin (default $LOCKGATE_SESSION)")
	asJSON := fs.Bool("json", false, "print the gateway's answer as JSON")
	if err := fs.Parse(args[1:]); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usagef("session %s takes no arguments", verb)
	}
	if *ttl < 0 || (*ttl > 0 && *ttl < time.Millisecond) {
		return usagef("--ttl must be at least 1ms")
	}
	cl, err := cf.client(c.getenv)
	if err != nil {
		return err
	}
	var s session
	switch verb {
	case "open":
		if *ttl == 0 {
			*ttl = 30 * time.Second
		}
		if s, err = cl.openSession(ctx, *ttl); err != nil {
			return fmt.Errorf("open session: %w", err)
		}
		if !*asJSON {
			_, err = fmt.Fprintln(c.stdout, printable(sessionHandle(s)))
			return err
		}
	case "keep", "end", "show":
		h, err := readSecret(c, *handle, "LOCKGATE_SESSION", "no session: pass --session ID.TOKEN (or - to read it from stdin, or set LOCKGATE_SESSION)")
		if err != nil {
			return err
		}
		id, token, err := parseSessionHandle(h)
		if err != nil {
			return err
		}
		switch verb {
		case "keep":
			s, err = cl.keepSession(ctx, id, token, *ttl)
		case "end":
			s, err = cl.endSession(ctx, id, token)
		default:
			s, err = cl.describeSession(ctx, id, token)
		}
		if err != nil {
			return fmt.Errorf("%s session %s: %w", verb, id, err)
		}
	default:
		return usagef("session needs open, keep, end or show, not %q", verb)
	}
	if *asJSON || verb == "show" {
		return json.NewEncoder(c.stdout).Encode(s)
	}
	return nil
}
