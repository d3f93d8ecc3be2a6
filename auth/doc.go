// Package auth verifies bearer JWTs and says what they grant: who the
// caller is (Identity: the token's iss and sub), which namespaces it may
// touch (from a claim, or from a Policy on its other claims), the longest
// lease it may ask for and its subject limits. Keys are the gateway's own
// (an HS256 secret, PEM public keys) or fetched from JWK Sets, each set
// verifying the tokens of its issuer only.
//
// Errors that reach clients are sentinel errors (ErrUnauthenticated,
// ErrForbidden) so that package handlers maps them to problem responses in
// its one table; nothing here writes a response.
package auth
