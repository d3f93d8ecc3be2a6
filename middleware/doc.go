// Package middleware holds the gateway's HTTP plumbing that knows nothing of
// locks: JWT verification (with keys configured or fetched from JWK Sets),
// namespace grants (from a token's claim or a policy on its claims),
// request ids, and the access log. Context values have unexported keys and
// FromContext getters.
//
// Errors that reach clients are sentinel errors (ErrUnauthenticated,
// ErrForbidden) so that package handlers maps them to problem responses in
// its one table; nothing here writes a response body itself.
package middleware
