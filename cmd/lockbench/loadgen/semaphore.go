package loadgen

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/lockgate/lockgate/locks"
	"github.com/lockgate/lockgate/locks/redisbackend"
)

// SemaphoreStats describes a semaphore run: how many held at once, as the
// clients saw it (from an acquire's answer to its release being sent).
type SemaphoreStats struct {
	Limit  int   `json:"limit"`
	Grants int64 `json:"grants"`
	// MostHolders is the most grants held at once: never above Limit.
	MostHolders int `json:"most_holders"`
	// MeanHolders is the time permits were held over the run's length: how
	// much of the limit the clients kept in use.
	MeanHolders float64 `json:"mean_holders"`
}

// semaphoreStats computes a semaphore run's figures from its attempts.
func semaphoreStats(perWorker [][]attempt, limit int, elapsed time.Duration) *SemaphoreStats {
	type edge struct {
		at    int64
		delta int
	}
	var edges []edge
	var held int64
	st := &SemaphoreStats{Limit: limit}
	for _, as := range perWorker {
		for _, a := range as {
			if !a.granted || !a.released {
				continue
			}
			st.Grants++
			edges = append(edges, edge{a.end, 1}, edge{a.relStart, -1})
			held += a.relStart - a.end
		}
	}
	// At equal times a release comes first: the interval is half-open.
	slices.SortFunc(edges, func(x, y edge) int {
		if x.at != y.at {
			return int(min(max(x.at-y.at, -1), 1))
		}
		return x.delta - y.delta
	})
	n := 0
	for _, e := range edges {
		n += e.delta
		st.MostHolders = max(st.MostHolders, n)
	}
	if elapsed > 0 {
		st.MeanHolders = float64(held) / float64(elapsed)
	}
	return st
}

// writeSemaphores adds the semaphore runs' table to a markdown report.
func writeSemaphores(b *strings.Builder, r *Report) {
	if !slices.ContainsFunc(r.Scenarios, func(s ScenarioReport) bool { return s.Gateway.Semaphore != nil }) {
		return
	}
	b.WriteString("\n### Semaphore: every client on one semaphore\n\n")
	b.WriteString("Holders as the clients saw them, from an acquire's answer to its release being sent: the most at once " +
		"(never above the limit) and the mean (permit-time held over the run's length).\n\n")
	b.WriteString("| scenario | path | limit | grants | most holders at once | mean holders | wait p50 / p99 / max (ms) | Redis per grant: commands / scripts |\n")
	b.WriteString("| --- | --- | ---: | ---: | ---: | ---: | --- | --- |\n")
	for _, s := range r.Scenarios {
		for i, res := range []*Result{&s.Gateway, s.Floor} {
			if res == nil || res.Semaphore == nil {
				continue
			}
			name := s.Name
			if i > 0 {
				name = ""
			}
			st := res.Semaphore
			calls := ""
			if res.Redis != nil {
				calls = fmt.Sprintf("%s / %s", Num(res.Redis.PerHandoff), Num(res.Redis.ScriptsPerHandoff))
			}
			fmt.Fprintf(b, "| %s | %s | %d | %d | %d | %s | %s / %s / %s | %s |\n", name, res.Path, st.Limit, st.Grants,
				st.MostHolders, Num(st.MeanHolders), Num(res.Acquire.P50), Num(res.Acquire.P99), Num(res.Acquire.Max), calls)
		}
	}
}

// SemaphoreTarget takes permits of semaphores of Limit permits through
// the transport of HTTP or Engine, whichever is set.
type SemaphoreTarget struct {
	HTTP   *HTTPTarget
	Engine *EngineTarget
	Limit  int
}

// NewSession implements Target.
func (t SemaphoreTarget) NewSession(ctx context.Context, name string) Session {
	if t.Engine != nil {
		return &semEngineSession{ctx: ctx, backend: t.Engine.backend, key: locks.Key{Namespace: t.Engine.namespace, Name: name},
			req: locks.SemaphoreRequest{AcquireRequest: locks.AcquireRequest{TTL: t.Engine.ttl, Subject: "lockbench", Owner: "lockbench"}, Limit: t.Limit}}
	}
	return &semHTTPSession{ctx: ctx, t: t.HTTP, url: t.HTTP.base.JoinPath("semaphores", t.HTTP.namespace, name), limit: t.Limit}
}

// semHTTPSession is a plain client of the semaphore calls: unlike
// httpSession it does not reuse its requests, which costs little next to
// the waits of a contended semaphore.
type semHTTPSession struct {
	ctx   context.Context
	t     *HTTPTarget
	url   *url.URL
	limit int
}

func (s *semHTTPSession) Acquire(wait time.Duration) (string, int64, error) {
	body := fmt.Appendf(nil, `{"limit":%d,"ttl_ms":%d,"wait_ms":%d,"owner":"lockbench"}`, s.limit, s.t.ttlMS, wait.Milliseconds())
	status, data, err := s.do(http.MethodPost, body, "")
	if err != nil {
		return "", 0, err
	}
	if status != http.StatusCreated {
		return "", 0, semFailure(status, data)
	}
	var g struct {
		Token string `json:"token"`
		Fence int64  `json:"fencing_token"`
	}
	if err := json.Unmarshal(data, &g); err != nil || g.Token == "" {
		return "", 0, &CallError{Class: "bad_grant", Err: fmt.Errorf("acquire answered 201 without a permit: %w", err)}
	}
	return g.Token, g.Fence, nil
}

func (s *semHTTPSession) Release(token string) error {
	status, data, err := s.do(http.MethodDelete, nil, token)
	if err != nil {
		return err
	}
	if status != http.StatusNoContent {
		return semFailure(status, data)
	}
	return nil
}

func (s *semHTTPSession) do(method string, body []byte, lockToken string) (int, []byte, error) {
	req, err := http.NewRequestWithContext(s.ctx, method, s.url.String(), bytes.NewReader(body))
	if err != nil {
		return 0, nil, err
	}
	req.Header["Authorization"] = s.t.auth
	if lockToken != "" {
		req.Header.Set("Lock-Token", lockToken)
	}
	resp, err := s.t.client.Do(req)
	if err != nil {
		if s.ctx.Err() != nil {
			return 0, nil, &CallError{Class: "cancelled", Err: err}
		}
		return 0, nil, &CallError{Class: "transport", Err: err}
	}
	defer resp.Body.Close()
	var buf bytes.Buffer
	if _, err := buf.ReadFrom(resp.Body); err != nil {
		return 0, nil, &CallError{Class: "transport", Err: err}
	}
	return resp.StatusCode, buf.Bytes(), nil
}

func semFailure(status int, data []byte) error {
	var p struct {
		Code string `json:"code"`
	}
	json.Unmarshal(data, &p) // a non-problem body leaves the code empty
	class := strconv.Itoa(status)
	if p.Code != "" {
		class += " " + p.Code
	}
	return &CallError{Class: class}
}

// semEngineSession takes permits from the engine in-process: the floor.
type semEngineSession struct {
	ctx     context.Context
	backend *redisbackend.Backend
	key     locks.Key
	req     locks.SemaphoreRequest
}

func (s *semEngineSession) Acquire(wait time.Duration) (string, int64, error) {
	s.req.Wait = wait
	g, err := s.backend.AcquirePermit(s.ctx, s.key, s.req)
	if err != nil {
		return "", 0, semEngineError(err)
	}
	return g.Token, g.FencingToken, nil
}

func (s *semEngineSession) Release(token string) error {
	if _, err := s.backend.ReleasePermit(s.ctx, s.key, token); err != nil {
		return semEngineError(err)
	}
	return nil
}

func semEngineError(err error) error {
	switch {
	case errors.Is(err, locks.ErrFull):
		return &CallError{Class: "semaphore_full", Err: fmt.Errorf("engine: %w", err)}
	case errors.Is(err, locks.ErrLimitMismatch):
		return &CallError{Class: "limit_mismatch", Err: fmt.Errorf("engine: %w", err)}
	}
	return engineError(err)
}
