package handlers

import (
	"net/http"

	"github.com/go-chi/chi/v5"
)

// mountUI serves the dashboard (Config.UI) under /ui/, and beside it its
// one call, GET /ui/api/whoami: what the bearer's token grants, which the
// dashboard cannot read from the token itself (the claim's name is
// configurable, and a policy may grant namespaces by other claims).
// openapi.yaml describes it (operation whoAmI), but the strict server
// does not serve it (oapi-codegen.yaml leaves it out): it exists only
// with the dashboard, and a generated route would answer without it.
func (s *Server) mountUI(r chi.Router) {
	// Not the dashboard's text 404 for another method: the API's 405.
	r.HandleFunc("/ui/api/whoami", getOnly(s.whoAmI))
	r.HandleFunc("/ui/api/namespaces", getOnly(s.uiNamespaces))
	r.HandleFunc("/ui/api/contention", getOnly(s.uiContention))
	r.HandleFunc("/ui/api/sessions", getOnly(s.uiSessions))
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
	// Who the bearer is and the namespace globs it is granted, for the
	// dashboard to offer: never the token, nor any other claim.
	who := WhoAmI{Subject: claims.Identity.String(), Namespaces: claims.Namespaces, AdminNamespaces: claims.AdminGrants()}
	if who.Namespaces == nil {
		who.Namespaces = []string{}
	}
	if who.AdminNamespaces == nil {
		who.AdminNamespaces = []string{}
	}
	writeJSON(w, http.StatusOK, who)
}

// getOnly serves h to GETs, and a 405 problem naming GET to any other
// method.
func getOnly(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, req *http.Request) {
		if req.Method != http.MethodGet {
			w.Header().Set("Allow", http.MethodGet)
			writeError(w, req, errMethodNotAllowed)
			return
		}
		h(w, req)
	}
}
