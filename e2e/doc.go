// Package e2e drives the real gateway (app.Run in-process, or the built
// binary) over HTTP on loopback, against the embedded backend and a real
// redis-server started by internal/redistest. It has no non-test code.
package e2e
