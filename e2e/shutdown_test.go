package e2e

import (
	"bytes"
	"io"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lockgate/lockgate/internal/redistest"
)

// TestShutdownWaitsForHandlers: a handler stuck in a backend call past
// --shutdown-timeout has its connection closed, but Run waits for it to
// return before it closes the backend (which the handler still uses) and
// returns.
func TestShutdownWaitsForHandlers(t *testing.T) {
	t.Parallel()
	rs := redistest.Start(t)
	p := startHoldProxy(t, rs.Addr)
	gw := startGateway(t, "--redis-url", "redis://"+p.addr, "--redis-timeout", "2s", "--shutdown-timeout", "1ms")
	acquire(t, gw.URL+"/locks/stuck/warmup", "")

	p.hold.Store(true) // the next script call gets no answer: it waits out --redis-timeout
	got := callAsync(t, "POST", gw.URL+"/locks/stuck/x", "", bearer(token(t, nil))...)
	select {
	case <-p.held:
	case <-time.After(10 * time.Second):
		t.Fatal("the acquire did not reach Redis within 10s")
	}
	start := time.Now()
	if err := gw.stop(); err != nil {
		t.Fatalf("Run: %v", err)
	}
	stopped := time.Since(start)
	if !strings.Contains(gw.logs.String(), `"path":"/locks/stuck/x"`) {
		t.Fatalf("Run returned after %v with the handler still running (no access log line for it); logs:\n%s", stopped, gw.logs)
	}
	<-got // an error: its connection was closed
}

// holdProxy forwards TCP connections to a Redis; once hold is set, it
// swallows the first script call (FCALL or EVALSHA) it sees and everything after it
// on that connection, and closes held.
type holdProxy struct {
	addr string
	hold atomic.Bool
	held chan struct{}
	once sync.Once
}

func startHoldProxy(t *testing.T, target string) *holdProxy {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &holdProxy{addr: l.Addr().String(), held: make(chan struct{})}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var conns []net.Conn
	t.Cleanup(func() {
		l.Close()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	wg.Go(func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			s, err := net.Dial("tcp", target)
			if err != nil {
				c.Close()
				continue
			}
			mu.Lock()
			conns = append(conns, c, s)
			mu.Unlock()
			wg.Go(func() { io.Copy(c, s); c.Close() })
			wg.Go(func() { p.forward(s, c); s.Close() })
		}
	})
	return p
}

func (p *holdProxy) forward(dst io.Writer, src io.Reader) {
	buf := make([]byte, 32<<10)
	holding := false
	for {
		n, err := src.Read(buf)
		if n > 0 && !holding && p.hold.Load() && (bytes.Contains(bytes.ToLower(buf[:n]), []byte("evalsha")) || bytes.Contains(bytes.ToLower(buf[:n]), []byte("fcall"))) {
			holding = true
			p.once.Do(func() { close(p.held) })
		}
		if n > 0 && !holding {
			if _, err := dst.Write(buf[:n]); err != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}
