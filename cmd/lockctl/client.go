package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"mime"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// client calls the gateway's HTTP API, never Redis.
type client struct {
	base    *url.URL
	jwt     string
	timeout time.Duration // each call's bound, on top of any server-side wait
	http    *http.Client
}

// grant is the 201 answer of an acquire.
type grant struct {
	Lock         string    `json:"lock,omitempty"`
	Semaphore    string    `json:"semaphore,omitempty"`
	Limit        int       `json:"limit,omitempty"`
	Token        string    `json:"token"`
	FencingToken int64     `json:"fencing_token"`
	TTLMs        int64     `json:"ttl_ms"`
	RenewAfterMs *int64    `json:"renew_after_ms,omitempty"`
	ExpiresAt    time.Time `json:"expires_at"`
	Holds        int       `json:"holds,omitempty"` // a lock's: how many holds its grant has
	Hold         string    `json:"hold,omitempty"`  // a re-entry's: the id of the hold it took
	// HoldUntil is when the grant's hard cap ends it (max_hold_ms, or the
	// gateway's --max-hold); nil for none.
	HoldUntil *time.Time `json:"hold_until,omitempty"`
}

// lease is the 200 answer of a renew.
type lease struct {
	Lock         string     `json:"lock,omitempty"`
	Semaphore    string     `json:"semaphore,omitempty"`
	FencingToken int64      `json:"fencing_token"`
	TTLMs        int64      `json:"ttl_ms"`
	RenewAfterMs *int64     `json:"renew_after_ms,omitempty"`
	ExpiresAt    time.Time  `json:"expires_at"`
	HoldUntil    *time.Time `json:"hold_until,omitempty"` // see grant
}

// renewAfter is how long after an answer to renew: the gateway's
// renew_after_ms, or a third of the TTL from a gateway that does not send
// it.
func renewAfter(ttlMs int64, renewAfterMs *int64) time.Duration {
	if renewAfterMs != nil && *renewAfterMs > 0 && *renewAfterMs < ttlMs {
		return time.Duration(*renewAfterMs) * time.Millisecond
	}
	return time.Duration(ttlMs) * time.Millisecond / 3
}

// lockInfo is the 200 answer of an inspect.
type lockInfo struct {
	Lock         string    `json:"lock"`
	Held         bool      `json:"held"`
	FencingToken int64     `json:"fencing_token"`
	TTLMs        int64     `json:"ttl_ms"`
	ExpiresAt    time.Time `json:"expires_at"`
	AcquiredAt   time.Time `json:"acquired_at"`
	Subject      string    `json:"subject"`
	Owner        string    `json:"owner"`
	Mode         string    `json:"mode,omitempty"`
	Holds        int       `json:"holds"`
	Holders      []holder  `json:"holders,omitempty"`
	Waiters      int       `json:"waiters"`
	Value        string    `json:"value,omitempty"`
	// QueuePriorities are the waiters' priorities, in serving order.
	QueuePriorities []int `json:"queue_priorities,omitempty"`
}

// apiError is an error answer from the gateway, usually an RFC 9457
// problem with lockgate's stable code.
type apiError struct {
	Status int
	Code   string // empty when the answer was not a lockgate problem
	Detail string
}

func (e *apiError) Error() string {
	msg := printable(e.Detail)
	if msg == "" {
		msg = strings.ToLower(http.StatusText(e.Status))
	}
	if e.Code != "" {
		msg += " (" + printable(e.Code) + ")"
	} else {
		msg += " (HTTP " + strconv.Itoa(e.Status) + ")"
	}
	return msg
}

// unreachableError means no answer came back from the gateway.
type unreachableError struct {
	url string // redacted
	err error
}

func (e *unreachableError) Error() string {
	if errors.Is(e.err, context.DeadlineExceeded) {
		return "gateway at " + e.url + " did not answer in time"
	}
	return "gateway at " + e.url + " unreachable: " + e.err.Error()
}

func (e *unreachableError) Unwrap() error { return e.err }

// errNoJWT: no bearer token was configured.
var errNoJWT = errors.New("no bearer token: set LOCKGATE_TOKEN or pass --jwt. A gateway started with --dev prints one; " +
	"for a gateway started with LOCKGATE_JWT_SECRET (--dev too), mint one with the same secret in the environment: " +
	`export LOCKGATE_TOKEN=$(lockctl token --ns '*')` + " (its --sub defaults to your user name)")

func isCode(err error, code string) bool {
	var api *apiError
	return errors.As(err, &api) && api.Code == code
}

// acquire asks for the lock (shared or not), or a permit of the semaphore
// of af.limit permits, as af says, waiting server-side up to wait.
func (c *client) acquire(ctx context.Context, l lockName, af *acquireFlags, wait time.Duration) (grant, error) {
	body := map[string]any{"ttl_ms": af.ttl.Milliseconds()}
	if l.semaphore {
		body["limit"] = af.limit
	}
	if af.shared {
		body["mode"] = "shared"
	}
	if wait > 0 {
		body["wait_ms"] = wait.Milliseconds()
	}
	if af.owner != "" {
		body["owner"] = af.owner
	}
	if af.value != "" {
		body["value"] = af.value
	}
	if af.maxHold > 0 {
		body["max_hold_ms"] = af.maxHold.Milliseconds()
	}
	if af.minHold > 0 {
		body["min_hold_ms"] = af.minHold.Milliseconds()
	}
	if af.priority > 0 && wait > 0 {
		body["priority"] = af.priority
	}
	var g grant
	err := c.doIn(ctx, http.MethodPost, l.path(), body, "", af.session, c.timeout+wait, http.StatusCreated, &g)
	return g, err
}

// renew resets the lease to the TTL it was acquired with, or to ttl when
// it is positive.
func (c *client) renew(ctx context.Context, l lockName, token string, ttl time.Duration) (lease, error) {
	var body any
	if ttl > 0 {
		body = map[string]any{"ttl_ms": ttl.Milliseconds()}
	}
	var ls lease
	err := c.do(ctx, http.MethodPut, l.path()+"/lease", body, token, c.timeout, http.StatusOK, &ls)
	return ls, err
}

// release ends the hold of the lock that the acquire of token took: the
// last hold ends the grant (204); a 200 says that holds remain (the lock
// was re-entered).
func (c *client) release(ctx context.Context, l lockName, token string) error {
	_, err := c.releaseHold(ctx, l, token, "")
	return err
}

// releaseHold ends the hold of the lock named hold ("" for the acquire's
// own), and returns how many holds remain: 0 when the grant ended.
func (c *client) releaseHold(ctx context.Context, l lockName, token, hold string) (int, error) {
	path := l.path()
	if hold != "" {
		path += "?hold=" + url.QueryEscape(hold)
	}
	var left struct {
		Holds int `json:"holds"`
	}
	err := c.do(ctx, http.MethodDelete, path, nil, token, c.timeout, http.StatusNoContent, &left)
	return left.Holds, err
}

// reenter takes a lock the token's grant holds once more, in the same
// mode (shared or not): the lease becomes at least ttl from now.
func (c *client) reenter(ctx context.Context, l lockName, token string, ttl time.Duration, shared bool) (grant, error) {
	body := map[string]any{"ttl_ms": ttl.Milliseconds()}
	if shared {
		body["mode"] = "shared"
	}
	var g grant
	err := c.do(ctx, http.MethodPost, l.path(), body, token, c.timeout, http.StatusOK, &g)
	return g, err
}

func (c *client) inspect(ctx context.Context, l lockName) (lockInfo, error) {
	var info lockInfo
	err := c.do(ctx, http.MethodGet, l.path(), nil, "", c.timeout, http.StatusOK, &info)
	return info, err
}

// do sends one call and decodes a want answer into out. lockToken, when
// set, goes in the Lock-Token header: never in the URL.
func (c *client) do(ctx context.Context, method, path string, body any, lockToken string, timeout time.Duration, want int, out any) error {
	return c.doIn(ctx, method, path, body, lockToken, "", timeout, want, out)
}

// doIn is do with a Session-Token header, when session is set.
func (c *client) doIn(ctx context.Context, method, path string, body any, lockToken, session string, timeout time.Duration, want int, out any) error {
	if c.jwt == "" {
		return errNoJWT
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return err
		}
		rd = bytes.NewReader(b)
	}
	path, query, _ := strings.Cut(path, "?")
	u := c.base.JoinPath(path)
	u.RawQuery = query
	req, err := http.NewRequestWithContext(ctx, method, u.String(), rd)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+c.jwt)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if lockToken != "" {
		req.Header.Set("Lock-Token", lockToken)
	}
	if session != "" {
		req.Header.Set("Session-Token", session)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return &unreachableError{url: c.base.Redacted(), err: transportCause(err)}
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return &unreachableError{url: c.base.Redacted(), err: transportCause(err)}
	}
	// A DELETE of a re-entered lock answers 200 with the holds left.
	if resp.StatusCode != want && !(want == http.StatusNoContent && resp.StatusCode == http.StatusOK) {
		return decodeProblem(resp, data)
	}
	if out == nil || resp.StatusCode == http.StatusNoContent {
		return nil
	}
	if err := json.Unmarshal(data, out); err != nil {
		return &apiError{Status: resp.StatusCode, Detail: "the gateway's answer is not the JSON lockctl expects"}
	}
	return nil
}

// errCrossOrigin: the gateway answered with a redirect to another origin.
var errCrossOrigin = errors.New("the gateway redirected to another origin; lockctl does not follow it with your JWT and owner token: set --url (LOCKGATE_URL) to the gateway itself")

// sameOriginOnly is the client's CheckRedirect. It follows a redirect only
// within the origin (scheme, host and port) of the first request: Go's
// client keeps custom headers such as Lock-Token on any redirect, and
// Authorization on one to the same host name, whatever the port or scheme.
func sameOriginOnly(req *http.Request, via []*http.Request) error {
	first := via[0].URL
	if req.URL.Scheme != first.Scheme || req.URL.Host != first.Host {
		return errCrossOrigin
	}
	if len(via) >= 10 {
		return errors.New("stopped after 10 redirects")
	}
	return nil
}

// transportCause drops net/http's "Post \"URL\":" prefix: the message
// names the gateway once, redacted.
func transportCause(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}

func decodeProblem(resp *http.Response, data []byte) error {
	e := &apiError{Status: resp.StatusCode}
	mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	if mt != "application/problem+json" {
		return e
	}
	var p struct {
		Detail string `json:"detail"`
		Code   string `json:"code"`
	}
	if json.Unmarshal(data, &p) != nil {
		return e
	}
	e.Code, e.Detail = p.Code, p.Detail
	return e
}
