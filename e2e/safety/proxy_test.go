package safety

import (
	"bytes"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// proxy is a TCP proxy on loopback between the gateway and Redis that can
// slow the link down or cut every connection, as a flaky network does. It
// can also hold back what Redis sends on subscription connections only
// (the hand-off messages), and add random delays in both directions.
type proxy struct {
	Addr     string
	upstream string
	l        net.Listener

	mu      sync.Mutex
	latency time.Duration // added to every chunk Redis sends back
	// jitter, when set, is a delay for each chunk, in either direction.
	jitter func(toGateway bool) time.Duration
	// held, while not nil, keeps what Redis sends on subscription
	// connections from reaching the gateway until it is closed.
	held  chan struct{}
	conns map[net.Conn]struct{}
	wg    sync.WaitGroup
}

// link is what the proxy knows of one connection.
type link struct {
	// subscriber: the gateway sent a SUBSCRIBE (or PSUBSCRIBE, SSUBSCRIBE)
	// on it, so Redis sends pub/sub messages down it.
	subscriber atomic.Bool
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
		l := &link{}
		p.wg.Go(func() { p.pipe(up, down, false, l) })
		p.wg.Go(func() { p.pipe(down, up, true, l) })
	}
}

// subscribeCmd ends the name of every subscribing command as RESP sends it
// (lower-cased before the comparison).
var subscribeCmd = []byte("subscribe\r\n")

// pipe copies from src to dst, delayed as set, and closes both ends when
// either fails. toGateway is the direction from Redis to the gateway.
func (p *proxy) pipe(dst, src net.Conn, toGateway bool, l *link) {
	defer p.forget(dst, src)
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			if !toGateway && !l.subscriber.Load() && bytes.Contains(bytes.ToLower(buf[:n]), subscribeCmd) {
				l.subscriber.Store(true)
			}
			if d := p.delay(toGateway); d > 0 {
				time.Sleep(d) // the injected latency
			}
			if toGateway && l.subscriber.Load() {
				p.waitHeld()
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

func (p *proxy) delay(toGateway bool) time.Duration {
	p.mu.Lock()
	defer p.mu.Unlock()
	var d time.Duration
	if toGateway {
		d = p.latency
	}
	if p.jitter != nil {
		d += p.jitter(toGateway)
	}
	return d
}

// setLatency delays every reply from Redis by d from now on.
func (p *proxy) setLatency(d time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.latency = d
}

// setJitter delays each chunk, in either direction, by what f says (nil:
// none). f is called with the proxy's lock held, one call at a time.
func (p *proxy) setJitter(f func(toGateway bool) time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.jitter = f
}

// holdSubscriptions keeps what Redis sends on subscription connections
// (hand-off messages, subscription confirmations, pongs) from reaching the
// gateway, in order and without loss, until releaseSubscriptions. Other
// connections are not touched.
func (p *proxy) holdSubscriptions() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.held == nil {
		p.held = make(chan struct{})
	}
}

// releaseSubscriptions lets everything held back through at once.
func (p *proxy) releaseSubscriptions() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.held != nil {
		close(p.held)
		p.held = nil
	}
}

func (p *proxy) waitHeld() {
	p.mu.Lock()
	held := p.held
	p.mu.Unlock()
	if held != nil {
		<-held
	}
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
	p.setJitter(nil)
	p.releaseSubscriptions()
	p.drop()
	p.wg.Wait()
}
