package loadgen

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// HTTPTarget drives a gateway over HTTP/1.1 with keep-alive connections,
// one per worker, so that the client adds as little as it can.
type HTTPTarget struct {
	base      *url.URL
	namespace string
	auth      []string // the Authorization header value, shared read-only
	ttlMS     int64
	transport *http.Transport
	client    *http.Client
}

// NewHTTPTarget returns a target for the gateway at baseURL. conns is the
// most connections it keeps open: at least one per worker.
func NewHTTPTarget(baseURL, token, namespace string, ttl time.Duration, conns int) (*HTTPTarget, error) {
	u, err := url.Parse(strings.TrimRight(baseURL, "/"))
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("--url %q: want http://host:port or https://host:port", baseURL)
	}
	if u.Path == "" {
		u.Path = "/" // JoinPath on an empty path makes a relative one
	}
	if token == "" {
		return nil, fmt.Errorf("no token: set --token or LOCKGATE_TOKEN to a JWT that grants namespace %q", namespace)
	}
	tr := &http.Transport{
		// No proxy: a benchmark through a proxy measures the proxy.
		DialContext:         (&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		MaxIdleConns:        conns + 16,
		MaxIdleConnsPerHost: conns + 16,
		IdleConnTimeout:     90 * time.Second,
		TLSHandshakeTimeout: 10 * time.Second,
		DisableCompression:  true,
	}
	return &HTTPTarget{
		base:      u,
		namespace: namespace,
		auth:      []string{"Bearer " + token},
		ttlMS:     ttl.Milliseconds(),
		transport: tr,
		client:    &http.Client{Transport: tr},
	}, nil
}

// LockURL is the URL of a lock in the target's namespace.
func (t *HTTPTarget) LockURL(name string) *url.URL {
	return t.base.JoinPath("locks", t.namespace, name)
}

// URL is the gateway's base URL.
func (t *HTTPTarget) URL() *url.URL { return t.base }

// Namespace is the namespace of the target's locks.
func (t *HTTPTarget) Namespace() string { return t.namespace }

// Client is the target's HTTP client, for other calls to the gateway.
func (t *HTTPTarget) Client() *http.Client { return t.client }

// Close drops the idle connections.
func (t *HTTPTarget) Close() { t.transport.CloseIdleConnections() }

// NewSession implements Target.
func (t *HTTPTarget) NewSession(ctx context.Context, name string) Session {
	u := t.LockURL(name)
	s := &httpSession{t: t}
	s.acq = (&http.Request{
		Method: http.MethodPost, URL: u, Host: u.Host,
		Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header: http.Header{"Authorization": t.auth, "Content-Type": {"application/json"}},
	}).WithContext(ctx)
	s.rel = (&http.Request{
		Method: http.MethodDelete, URL: u, Host: u.Host,
		Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header: http.Header{"Authorization": t.auth, "Lock-Token": {""}},
		Body:   http.NoBody,
	}).WithContext(ctx)
	s.body = io.NopCloser(&s.reader)
	s.getBody = func() (io.ReadCloser, error) {
		s.reader.Reset(s.acqBody)
		return s.body, nil
	}
	return s
}

// httpSession reuses its two requests, a body reader and a response buffer
// from call to call: the transport is done with a request once its response
// body is closed.
type httpSession struct {
	t        *HTTPTarget
	acq, rel *http.Request
	acqBody  []byte        // the JSON body for acqWait and acqShared
	acqWait  time.Duration // -1 before the first acquire
	acqShare bool
	reader   bytes.Reader
	body     io.ReadCloser
	getBody  func() (io.ReadCloser, error)
	buf      bytes.Buffer
	grant    struct {
		Token string `json:"token"`
		Fence int64  `json:"fencing_token"`
	}
	problem struct {
		Code string `json:"code"`
	}
}

func (s *httpSession) Acquire(wait time.Duration) (string, int64, error) {
	return s.acquireMode(wait, false)
}

// AcquireShared implements SharedAcquirer.
func (s *httpSession) AcquireShared(wait time.Duration) (string, int64, error) {
	return s.acquireMode(wait, true)
}

func (s *httpSession) acquireMode(wait time.Duration, shared bool) (string, int64, error) {
	if s.acqBody == nil || wait != s.acqWait || shared != s.acqShare {
		s.acqWait, s.acqShare = wait, shared
		mode := ""
		if shared {
			mode = `,"mode":"shared"`
		}
		s.acqBody = fmt.Appendf(nil, `{"ttl_ms":%d,"wait_ms":%d,"owner":"lockbench"%s}`, s.t.ttlMS, wait.Milliseconds(), mode)
	}
	s.reader.Reset(s.acqBody)
	s.acq.Body, s.acq.GetBody, s.acq.ContentLength = s.body, s.getBody, int64(len(s.acqBody))
	status, err := s.do(s.acq)
	if err != nil {
		return "", 0, err
	}
	if status != http.StatusCreated {
		return "", 0, s.failure(status)
	}
	s.grant.Token, s.grant.Fence = "", 0
	if err := json.Unmarshal(s.buf.Bytes(), &s.grant); err != nil || s.grant.Token == "" {
		return "", 0, &CallError{Class: "bad_grant", Err: fmt.Errorf("acquire answered 201 without a grant: %w", err)}
	}
	return s.grant.Token, s.grant.Fence, nil
}

func (s *httpSession) Release(token string) error {
	s.rel.Header["Lock-Token"][0] = token
	status, err := s.do(s.rel)
	s.rel.Header["Lock-Token"][0] = "" // do not keep a secret longer than needed
	if err != nil {
		return err
	}
	if status != http.StatusNoContent {
		return s.failure(status)
	}
	return nil
}

// do sends req and reads the whole response into s.buf, so that the
// connection goes back to the pool.
func (s *httpSession) do(req *http.Request) (int, error) {
	resp, err := s.t.client.Do(req)
	if err != nil {
		if req.Context().Err() != nil {
			return 0, &CallError{Class: "cancelled", Err: err}
		}
		return 0, &CallError{Class: "transport", Err: err}
	}
	s.buf.Reset()
	_, err = s.buf.ReadFrom(resp.Body)
	resp.Body.Close()
	if err != nil {
		return 0, &CallError{Class: "transport", Err: err}
	}
	return resp.StatusCode, nil
}

// failure turns an unexpected answer into an error classed by status and
// problem code.
func (s *httpSession) failure(status int) error {
	s.problem.Code = ""
	json.Unmarshal(s.buf.Bytes(), &s.problem) // a non-problem body leaves the code empty
	class := strconv.Itoa(status)
	if s.problem.Code != "" {
		class += " " + s.problem.Code
	}
	return &CallError{Class: class}
}
