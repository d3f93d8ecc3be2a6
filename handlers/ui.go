package handlers

import (
	"net/http"

	"github.com/go-chi/chi/v5"
)

// whoAmI is what GET /ui/api/whoami answers: who the bearer is and the
// namespace globs the token grants, for the dashboard to offer. Never
// the token, nor any other claim.
type whoAmI struct {
	Subject         string   `json:"subject"`
	Namespaces      []string `json:"namespaces"`
	AdminNamespaces []string `json:"admin_namespaces"`
}

// mountUI serves the dashboard (Config.UI) under /ui/, and beside it the
// one call the API has no operation for: what the bearer's token grants,
// which the dashboard cannot read from the token itself (the claim's name
// is configurable, and a policy may grant namespaces by other claims).
// It is no operation of openapi.yaml: it exists only with the dashboard,
// and answers for it alone.
func (s *Server) mountUI(r chi.Router) {
	r.Get("/ui/api/whoami", s.whoAmI)
	r.Handle("/ui", s.cfg.UI)
	r.Handle("/ui/*", s.cfg.UI)
}

func (s *Server) whoAmI(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("X-Content-Type-Options", "nosniff")
	claims, err := s.cfg.Auth.Authenticate(r)
	if err != nil {
		writeError(w, r, err)
		return
	}
	if err := s.cfg.Subjects.Allow(claims); err != nil {
		writeError(w, r, err)
		return
	}
	who := whoAmI{Subject: claims.Identity.String(), Namespaces: claims.Namespaces, AdminNamespaces: claims.AdminNamespaces}
	if who.Namespaces == nil {
		who.Namespaces = []string{}
	}
	if who.AdminNamespaces == nil {
		who.AdminNamespaces = []string{}
	}
	writeJSON(w, http.StatusOK, who)
}
