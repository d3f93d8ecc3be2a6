package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"runtime"
	"runtime/metrics"
	"strconv"
	"strings"
	"time"

	"github.com/lockgate/lockgate/cmd/lockbench/loadgen"
)

// ParkedWaiters is what waiting acquirers cost the gateway's process.
type ParkedWaiters struct {
	Waiters int `json:"waiters"`
	// HeapLivePerWaiter is the growth of the live heap (runtime/metrics
	// /gc/heap/live:bytes, read right after a GC), per waiter.
	HeapLivePerWaiter float64 `json:"heap_live_bytes_per_waiter"`
	// HeapInusePerWaiter is the growth of MemStats.HeapInuse (spans in use,
	// fragmentation included), per waiter.
	HeapInusePerWaiter float64 `json:"heap_inuse_bytes_per_waiter"`
	// StackPerWaiter is the growth of MemStats.StackInuse, per waiter: the
	// goroutines that serve the waiting connections.
	StackPerWaiter      float64 `json:"stack_bytes_per_waiter"`
	GoroutinesPerWaiter float64 `json:"goroutines_per_waiter"`
}

// parkEnv carries a parkSpec to a child lab process: its presence makes the
// process a parker rather than a benchmark.
const parkEnv = "LOCKBENCH_PARK"

// parkSpec is what a parker does: open n connections to the lock at url and
// send on each an acquire that waits waitMS. The token comes in
// LOCKGATE_TOKEN, never on the command line.
type parkSpec struct {
	URL    string `json:"url"`
	N      int    `json:"n"`
	WaitMS int64  `json:"wait_ms"`
}

// measureParked holds a lock through the gateway, parks n waiting acquires
// on it from a child process (so that their client side is not in this
// process's heap), and measures how this process's memory grew. The gateway
// must run in this process.
func measureParked(ctx context.Context, gw *loadgen.HTTPTarget, token string, n int) (ParkedWaiters, error) {
	p := ParkedWaiters{Waiters: n}
	// A long lease: no waiter wakes for an expiry while we measure.
	ht, err := loadgen.NewHTTPTarget(gw.URL().String(), token, gw.Namespace(), 10*time.Minute, 1)
	if err != nil {
		return p, err
	}
	holder := ht.NewSession(ctx, "parked")
	held, _, err := holder.Acquire(0)
	ht.Close()
	if err != nil {
		return p, fmt.Errorf("hold the lock to wait for: %w", err)
	}
	defer holder.Release(held)

	gw.Close() // the benchmark's idle connections are not waiters
	before := settleAndRead()

	spec, _ := json.Marshal(parkSpec{URL: gw.LockURL("parked").String(), N: n, WaitMS: 55_000})
	exe, err := os.Executable()
	if err != nil {
		return p, fmt.Errorf("find lockbench's executable to park waiters: %w", err)
	}
	child := exec.Command(exe)
	child.Env = append(os.Environ(), parkEnv+"="+string(spec), "LOCKGATE_TOKEN="+token)
	stdin, err := child.StdinPipe()
	if err != nil {
		return p, err
	}
	stdout, err := child.StdoutPipe()
	if err != nil {
		return p, err
	}
	child.Stderr = os.Stderr
	if err := child.Start(); err != nil {
		return p, fmt.Errorf("start the parker: %w", err)
	}
	exited := make(chan struct{})
	go func() { child.Wait(); close(exited) }()
	defer func() { // closing its stdin tells it to leave; the PID is the fallback
		stdin.Close()
		t := time.NewTimer(10 * time.Second)
		defer t.Stop()
		select {
		case <-exited:
		case <-t.C:
			child.Process.Kill()
			<-exited
		}
	}()

	line := make(chan string, 1)
	go func() {
		s, _ := bufio.NewReader(stdout).ReadString('\n')
		line <- s
		io.Copy(io.Discard, stdout)
	}()
	t := time.NewTimer(time.Minute)
	defer t.Stop()
	select {
	case s := <-line:
		if strings.TrimSpace(s) != "parked" {
			return p, fmt.Errorf("the parker failed (said %q)", s)
		}
	case <-t.C:
		return p, errors.New("the parker did not send its requests within a minute")
	}
	if err := waitForWaiters(ctx, gw, n); err != nil {
		return p, err
	}
	after := settleAndRead()
	per := func(b, a uint64) float64 { return (float64(a) - float64(b)) / float64(n) }
	p.HeapLivePerWaiter = per(before.live, after.live)
	p.HeapInusePerWaiter = per(before.inuse, after.inuse)
	p.StackPerWaiter = per(before.stacks, after.stacks)
	p.GoroutinesPerWaiter = float64(after.goroutines-before.goroutines) / float64(n)
	return p, nil
}

// waitForWaiters polls the gateway's lockgate_active_waiters gauge until it
// reaches n.
func waitForWaiters(ctx context.Context, gw *loadgen.HTTPTarget, n int) error {
	u := gw.URL().JoinPath("metrics").String()
	deadline := time.Now().Add(time.Minute)
	var last float64
	for time.Now().Before(deadline) {
		v, err := gaugeValue(ctx, gw.Client(), u, "lockgate_active_waiters")
		if err != nil {
			return err
		}
		if last = v; int(v) >= n {
			return nil
		}
		if err := pause(ctx, 20*time.Millisecond); err != nil {
			return err
		}
	}
	return fmt.Errorf("only %v of %d waiters parked within a minute", last, n)
}

// gaugeValue reads one unlabelled metric from a Prometheus text endpoint.
func gaugeValue(ctx context.Context, c *http.Client, u, name string) (float64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return 0, err
	}
	resp, err := c.Do(req)
	if err != nil {
		return 0, fmt.Errorf("GET /metrics: %w", err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), name+" "); ok {
			return strconv.ParseFloat(v, 64)
		}
	}
	return 0, fmt.Errorf("GET /metrics: no %s", name)
}

func pause(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

type memReading struct {
	live, inuse, stacks uint64
	goroutines          int
}

// settleAndRead waits until the goroutine count holds still (connections
// that were closing have closed), collects garbage and reads the memory.
func settleAndRead() memReading {
	last, same := runtime.NumGoroutine(), 0
	for deadline := time.Now().Add(5 * time.Second); same < 5 && time.Now().Before(deadline); {
		time.Sleep(20 * time.Millisecond)
		if n := runtime.NumGoroutine(); n == last {
			same++
		} else {
			last, same = n, 0
		}
	}
	runtime.GC()
	runtime.GC() // the second one frees what the first one's finalizers let go
	s := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
	metrics.Read(s)
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return memReading{live: s[0].Value.Uint64(), inuse: m.HeapInuse, stacks: m.StackInuse, goroutines: runtime.NumGoroutine()}
}

// parkMain is a parker's whole life: send the waiting acquires of
// the spec in LOCKBENCH_PARK without reading the answers, say "parked", and
// keep the connections open until stdin closes.
func parkMain() int {
	var spec parkSpec
	if err := json.Unmarshal([]byte(os.Getenv(parkEnv)), &spec); err != nil {
		fmt.Fprintln(os.Stderr, "lab parker: bad", parkEnv)
		return 2
	}
	u, err := url.Parse(spec.URL)
	if err != nil || u.Scheme != "http" {
		fmt.Fprintln(os.Stderr, "lab parker: want an http:// URL")
		return 2
	}
	body := fmt.Sprintf(`{"wait_ms":%d,"owner":"lockbench parked"}`, spec.WaitMS)
	var req bytes.Buffer
	fmt.Fprintf(&req, "POST %s HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer %s\r\n"+
		"Content-Type: application/json\r\nContent-Length: %d\r\n\r\n%s",
		u.EscapedPath(), u.Host, os.Getenv("LOCKGATE_TOKEN"), len(body), body)
	conns := make([]net.Conn, 0, spec.N)
	for range spec.N {
		c, err := net.DialTimeout("tcp", u.Host, 5*time.Second)
		if err == nil {
			_, err = c.Write(req.Bytes())
		}
		if err != nil {
			fmt.Fprintf(os.Stderr, "lab parker: connection %d: %v\n", len(conns)+1, err)
			return 1
		}
		conns = append(conns, c)
	}
	fmt.Println("parked")
	io.Copy(io.Discard, os.Stdin)
	for _, c := range conns {
		c.Close()
	}
	return 0
}
