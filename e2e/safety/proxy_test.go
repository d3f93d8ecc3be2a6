package safety

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// proxy is a TCP proxy on loopback between the gateway and Redis that can
// slow the link down or cut every connection, as a flaky network does. It
// can also hold back what Redis sends on subscription connections only
// (the hand-off messages), add random delays in both directions, and lose
// the reply of a chosen command or deliver it twice (addFault).
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
	// faults are armed by addFault, applied in order of arming.
	faults []*fault
	// errors counts the error replies Redis sent the gateway, by kind
	// (see errorKind).
	errors map[string]int
	wg     sync.WaitGroup
}

// link is what the proxy knows of one connection.
type link struct {
	// subscriber: the gateway sent a SUBSCRIBE (or PSUBSCRIBE, SSUBSCRIBE)
	// on it, so Redis sends pub/sub messages down it.
	subscriber atomic.Bool
	replies    replies
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
		p.mu.Lock()
		upstream := p.upstream
		p.mu.Unlock()
		up, err := net.Dial("tcp", upstream)
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
// either fails. toGateway is the direction from Redis to the gateway. It
// reads whole RESP values, so that the faults armed with addFault can
// pick one command and its reply out of a pipeline; what one read brings
// is sent on in one write, as a plain TCP proxy does.
func (p *proxy) pipe(dst, src net.Conn, toGateway bool, l *link) {
	defer p.forget(dst, src)
	r := bufio.NewReaderSize(src, 32<<10)
	var out []byte
	nreply := 0 // replies read so far, on a connection that is no subscription
	for {
		v, err := readRESP(r, !toGateway)
		if errors.Is(err, errNotRESP) {
			p.send(dst, append(out, v...), toGateway, l)
			p.copyRaw(dst, r, toGateway, l)
			return
		}
		if err != nil { // EOF, or the connection was cut: a partial value goes nowhere
			p.send(dst, out, toGateway, l)
			return
		}
		switch {
		case !toGateway:
			if !l.subscriber.Load() && bytes.Contains(bytes.ToLower(v[:min(len(v), 64)]), subscribeCmd) {
				l.subscriber.Store(true)
			}
			var f *fault
			if !l.subscriber.Load() {
				f = p.faultFor(v)
			}
			for range l.replies.deliver(f) {
				out = append(out, v...)
			}
		case l.subscriber.Load():
			out = append(out, v...)
		default:
			cut, swallow := l.replies.reply(nreply, v)
			nreply++
			p.noteError(v)
			if cut { // what came before it goes through; it and the rest never do
				p.send(dst, out, toGateway, l)
				return
			}
			if !swallow {
				out = append(out, v...)
			}
		}
		if r.Buffered() == 0 {
			if !p.send(dst, out, toGateway, l) {
				return
			}
			out = out[:0]
		}
	}
}

// send writes b to dst after the delays set, and reports whether it could.
func (p *proxy) send(dst net.Conn, b []byte, toGateway bool, l *link) bool {
	if len(b) == 0 {
		return true
	}
	if d := p.delay(toGateway); d > 0 {
		time.Sleep(d) // the injected latency
	}
	if toGateway && l.subscriber.Load() {
		p.waitHeld()
	}
	_, err := dst.Write(b)
	return err == nil
}

// copyRaw copies what is not RESP chunk by chunk, with the delays but no
// faults.
func (p *proxy) copyRaw(dst net.Conn, src io.Reader, toGateway bool, l *link) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 && !p.send(dst, buf[:n], toGateway, l) {
			return
		}
		if err != nil {
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

// setUpstream sends new connections to addr from now on (as a failover
// moves a service address) and cuts the open ones.
func (p *proxy) setUpstream(addr string) {
	p.mu.Lock()
	p.upstream = addr
	p.mu.Unlock()
	p.drop()
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

// noteError counts v if it is an error reply.
func (p *proxy) noteError(v []byte) {
	if len(v) == 0 || (v[0] != '-' && v[0] != '!') {
		return
	}
	kind := errorKind(v)
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.errors == nil {
		p.errors = make(map[string]int)
	}
	p.errors[kind]++
}

// replyErrors returns the error replies counted so far, by kind, and
// forgets them.
func (p *proxy) replyErrors() map[string]int {
	p.mu.Lock()
	defer p.mu.Unlock()
	errs := p.errors
	p.errors = nil
	return errs
}

// errorKind names an error reply (RESP2 "-", RESP3 "!<len>"): its code
// (MOVED, ASK, TRYAGAIN, NOSCRIPT, ...) without the slot and address that
// follow, or for an ERR its message up to where a script's name or a
// colon begins.
func errorKind(v []byte) string {
	msg := string(v[1:])
	if v[0] == '!' {
		if _, rest, ok := strings.Cut(msg, "\r\n"); ok {
			msg = rest
		}
	}
	msg, _, _ = strings.Cut(msg, "\r\n")
	code, _, _ := strings.Cut(msg, " ")
	if code != "ERR" {
		return code
	}
	msg, _, _ = strings.Cut(msg, " script:")
	msg, _, _ = strings.Cut(msg, ":")
	return msg
}
