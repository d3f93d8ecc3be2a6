package handlers

import (
	"context"
	"strconv"
	"strings"

	"github.com/lockgate/lockgate/auth"
	"github.com/lockgate/lockgate/middleware"
)

// Operations on grants that are not the caller's own are for the
// administrators of the namespace (auth.Claims.Administers); the gate has
// already checked that the token grants it.

// administer returns a *notAdminError (403) unless the caller administers
// namespace; what names the operation in its detail.
func administer(ctx context.Context, namespace, what string) error {
	c, _ := middleware.ClaimsFromContext(ctx)
	if c.Administers(namespace) {
		return nil
	}
	return &notAdminError{namespace: namespace, what: what, admin: c.AdminNamespaces}
}

// notAdminError names the namespace a token does not administer, and
// those it does.
type notAdminError struct {
	namespace, what string
	admin           []string
}

func (e *notAdminError) Error() string {
	return "forbidden: not an administrator of namespace " + e.namespace
}
func (e *notAdminError) Detail() string {
	d := "to " + e.what + ", a token must administer namespace " + strconv.Quote(e.namespace) +
		": only an administrator may (a token whose ns_admin claim, or the admin_namespaces of the policy rules that grant it, names it); this one only uses it"
	if len(e.admin) > 0 {
		q := make([]string, len(e.admin))
		for i, a := range e.admin {
			q[i] = strconv.Quote(a)
		}
		d += ", and administers " + strings.Join(q, ", ")
	}
	return d
}
func (e *notAdminError) Is(target error) bool { return target == auth.ErrForbidden }
