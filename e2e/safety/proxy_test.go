package safety

import (
	"net"
	"sync"
	"testing"
	"time"
)

// proxy is a TCP proxy on loopback between the gateway and Redis that can
// slow the link down or cut every connection, as a flaky network does.
type proxy struct {
	Addr     string
	upstream string
	l        net.Listener

	mu      sync.Mutex
	latency time.Duration // added to every chunk Redis sends back
	conns   map[net.Conn]struct{}
	wg      sync.WaitGroup
}

func startProxy(t *testing.T, upstream string) *proxy {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &proxy{Addr: l.Addr().String(), upstream: upstream, l: l, conns: make(map[net.Conn]struct{})}
	p.wg.Go(p.accept)
	t.Cleanup(p.close)
	return p
}

func (p *proxy) accept() {
	for {
		down, err := p.l.Accept()
		if err != nil {
			return
		}
		up, err := net.Dial("tcp", p.upstream)
		if err != nil {
			down.Close()
			continue
		}
		p.mu.Lock()
		p.conns[down], p.conns[up] = struct{}{}, struct{}{}
		p.mu.Unlock()
		p.wg.Go(func() { p.pipe(up, down, false) })
		p.wg.Go(func() { p.pipe(down, up, true) })
	}
}

// pipe copies from src to dst, delayed when slow, and closes both ends
// when either fails.
func (p *proxy) pipe(dst, src net.Conn, slow bool) {
	defer p.forget(dst, src)
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			if d := p.delay(); slow && d > 0 {
				time.Sleep(d) // the injected latency
			}
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil { // EOF, or the connection was cut
			return
		}
	}
}

func (p *proxy) forget(conns ...net.Conn) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range conns {
		c.Close()
		delete(p.conns, c)
	}
}

func (p *proxy) delay() time.Duration {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.latency
}

// setLatency delays every reply from Redis by d from now on.
func (p *proxy) setLatency(d time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.latency = d
}

// drop cuts every open connection, as a network failure would; new ones
// are accepted.
func (p *proxy) drop() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for c := range p.conns {
		c.Close()
	}
}

func (p *proxy) close() {
	p.l.Close()
	p.setLatency(0)
	p.drop()
	p.wg.Wait()
}
