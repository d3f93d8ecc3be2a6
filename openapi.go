// Package lockgate holds the HTTP contract, openapi.yaml, for the gateway to
// serve as it is. It sits at the repository's root because go:embed cannot
// reach a parent directory, and the file belongs here: handlers/api.gen.go
// and the TypeScript client in examples/node are generated from it.
package lockgate

import _ "embed"

// OpenAPI is openapi.yaml, byte for byte.
//
//go:embed openapi.yaml
var OpenAPI []byte
