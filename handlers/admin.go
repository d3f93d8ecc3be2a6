package handlers

import (
	"context"
	"strconv"

	"github.com/lockgate/lockgate/auth"
	"github.com/lockgate/lockgate/middleware"
)

// Operations on grants that are not the caller's own are for the
// administrators of the namespace (auth.Claims.Administers); the gate has
// already checked that the token grants it.

// administer returns a *notAdminError (403) unless the caller administers
// namespace; what names the operation in its detail.
func administer(ctx context.Context, namespace, what string) error {
	if c, _ := middleware.ClaimsFromContext(ctx); c.Administers(namespace) {
		return nil
	}
	return &notAdminError{namespace: namespace, what: what}
}

// notAdminError names the namespace a token does not administer.
type notAdminError struct{ namespace, what string }

func (e *notAdminError) Error() string {
	return "forbidden: not an administrator of namespace " + e.namespace
}
func (e *notAdminError) Detail() string {
	return "to " + e.what + ", a token must administer namespace " + strconv.Quote(e.namespace) +
		": only an administrator may (a token whose ns_admin claim, or the admin_namespaces of the policy rules that grant it, names it); this one only uses it"
}
func (e *notAdminError) Is(target error) bool { return target == auth.ErrForbidden }
