// Package handlers is lockgate's HTTP API: the code generated from
// openapi.yaml (api.gen.go, never edited by hand), the Server that
// implements it on a locks.Backend, the gate that applies the spec's
// security and validation to each operation, and the one table that maps
// errors to RFC 9457 problem responses.
package handlers
