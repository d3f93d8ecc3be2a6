// Package gatewaytest runs a real gateway inside a test's process, on a free
// loopback port, and stops it when the test ends.
package gatewaytest

import (
	"bytes"
	"context"
	"sync"
	"testing"
	"time"

	"github.com/lockgate/lockgate/cmd/gateway/app"
)

// Gateway is a running gateway and the JSON logs it wrote.
type Gateway struct {
	*app.Gateway
	Logs *Buffer
}

// Start runs the gateway with env as its environment and args after
// --addr 127.0.0.1:0 (so a later --log-level or --addr wins). It fails the
// test, with the logs, if the gateway does not listen within 30 s. When the
// test ends it stops the gateway as SIGTERM would and reports an error Run
// returned.
func Start(t testing.TB, env map[string]string, args ...string) *Gateway {
	t.Helper()
	g := &Gateway{Logs: &Buffer{}}
	argv := append([]string{"gateway", "--addr", "127.0.0.1:0"}, args...)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	gw, err := app.Start(ctx, argv, func(k string) string { return env[k] }, g.Logs)
	if err != nil {
		t.Fatalf("start gateway: %v\nlogs:\n%s", err, g.Logs)
	}
	g.Gateway = gw
	t.Cleanup(func() {
		if err := gw.Stop(); err != nil {
			t.Errorf("gateway: %v", err)
		}
	})
	return g
}

// Buffer collects what a gateway or another process writes (logs,
// stdout, stderr); safe for its writes and the test's reads at once.
type Buffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *Buffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *Buffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
