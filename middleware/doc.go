// Package middleware holds the gateway's HTTP plumbing that knows nothing
// of locks: the request scope (Requests: request id, logger, routing
// context and access log), request ids, the verified claims of a
// request's token in its context (SetClaims, ClaimsFromContext), and each
// subject's share of the gateway (SubjectLimiter). Context values have
// unexported keys and FromContext getters.
//
// Verifying tokens is package auth's. Errors that reach clients are
// sentinel errors (ErrTooManyRequests) so that package handlers maps them
// to problem responses in its one table; nothing here writes a response
// body itself.
package middleware
