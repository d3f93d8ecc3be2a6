package handlers

import (
	"context"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/lockgate/lockgate/auth"
	"github.com/lockgate/lockgate/locks"
)

// The dashboard's calls beside whoami, served only with --ui (mountUI):
// the namespaces a token may read, and the contention this gateway saw.

// namespacesEvery is how long the gateway reuses the backend's list of
// namespaces: naming them reads the whole key space of a Redis, so every
// viewer shares one reading.
const namespacesEvery = 10 * time.Second

// maxNamespaces bounds the namespaces the dashboard is offered.
const maxNamespaces = 1000

// namespaceCache is the backend's last list of namespaces.
type namespaceCache struct {
	mu    sync.Mutex
	at    time.Time
	names []string
}

// get returns the backend's namespaces, read at most once per
// namespacesEvery; a backend that cannot name them names none.
func (c *namespaceCache) get(ctx context.Context, b any) ([]string, error) {
	nl, ok := b.(locks.NamespaceLister)
	if !ok {
		return nil, nil
	}
	c.mu.Lock() // one reading at a time: the others wait for it
	defer c.mu.Unlock()
	if !c.at.IsZero() && time.Since(c.at) < namespacesEvery {
		return c.names, nil
	}
	names, err := nl.Namespaces(ctx, maxNamespaces)
	if err != nil {
		return nil, err
	}
	c.at, c.names = time.Now(), names
	return names, nil
}

// UINamespaces is the answer of GET /ui/api/namespaces.
type UINamespaces struct {
	// Namespaces are those the token grants by name, and those with held
	// locks that one of its globs matches, in order.
	Namespaces []string `json:"namespaces"`
}

// uiClaims authenticates a dashboard call and counts it against the
// subject's rate, as the gate does for the API; false: it answered.
func (s *Server) uiClaims(w http.ResponseWriter, r *http.Request) (auth.Claims, bool) {
	w.Header().Set("X-Content-Type-Options", "nosniff")
	claims, err := s.cfg.Auth.Authenticate(r)
	if err == nil {
		err = s.cfg.Subjects.Allow(claims)
	}
	if err != nil {
		writeError(w, r, err)
		return auth.Claims{}, false
	}
	return claims, true
}

func (s *Server) uiNamespaces(w http.ResponseWriter, r *http.Request) {
	claims, ok := s.uiClaims(w, r)
	if !ok {
		return
	}
	held, err := s.namespaces.get(r.Context(), s.cfg.Backend)
	if err != nil {
		writeError(w, r, err)
		return
	}
	out := []string{}
	for _, g := range claims.Namespaces {
		if !strings.Contains(g, "*") && locks.ValidNamespace(g) {
			out = append(out, g)
		}
	}
	for _, ns := range held {
		if claims.Allows(ns) {
			out = append(out, ns)
		}
	}
	slices.Sort(out)
	writeJSON(w, http.StatusOK, UINamespaces{Namespaces: slices.Compact(out)})
}

func (s *Server) uiContention(w http.ResponseWriter, r *http.Request) {
	claims, ok := s.uiClaims(w, r)
	if !ok {
		return
	}
	ns := r.URL.Query().Get("namespace")
	switch {
	case !locks.ValidNamespace(ns):
		writeError(w, r, invalid(`query parameter "namespace" `+patternRules[locks.NamespacePattern]))
	case !claims.Allows(ns):
		writeError(w, r, &forbiddenError{namespace: ns})
	default:
		writeJSON(w, http.StatusOK, s.contention.snapshot(ns, time.Now()))
	}
}

// UISession is one live session of the viewer: its id, never its token.
type UISession struct {
	ID string `json:"id"`
	// TTLMs is what is left of its lease; ExpiresAt when it ends, ms
	// since the epoch.
	TTLMs     int64 `json:"ttl_ms"`
	ExpiresAt int64 `json:"expires_at"`
}

// UISessions is the answer of GET /ui/api/sessions.
type UISessions struct {
	Sessions []UISession `json:"sessions"`
}

// uiSessions lists the live sessions of the token's own subject, and no
// one else's: one read of the backend's count of that subject's sessions.
func (s *Server) uiSessions(w http.ResponseWriter, r *http.Request) {
	claims, ok := s.uiClaims(w, r)
	if !ok {
		return
	}
	out := UISessions{Sessions: []UISession{}}
	if sl, ok := s.cfg.Backend.(locks.SessionLister); ok {
		list, err := sl.SessionsOf(r.Context(), claims.Identity.String())
		if err != nil {
			writeError(w, r, err)
			return
		}
		now := time.Now()
		for _, ss := range list {
			out.Sessions = append(out.Sessions, UISession{ID: ss.ID, TTLMs: max(ss.ExpiresAt.Sub(now).Milliseconds(), 0), ExpiresAt: ss.ExpiresAt.UnixMilli()})
		}
	}
	writeJSON(w, http.StatusOK, out)
}
