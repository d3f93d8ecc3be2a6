// Package middleware holds the gateway's HTTP plumbing that knows nothing
// of locks: the request scope (Requests: request id, logger, routing
// context and access log), request ids, and the verified claims of a
// request's token in its context (SetClaims, ClaimsFromContext). Context
// values have unexported keys and FromContext getters.
//
// Verifying tokens is package auth's, and each subject's share of the
// gateway package ratelimit's. Nothing here writes a response body
// itself.
package middleware
