// Package redistest starts a real redis-server for tests, on a free loopback
// port, and stops it by PID when the test ends.
package redistest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// Server is one redis-server process owned by a test.
type Server struct {
	Addr string // host:port on 127.0.0.1

	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{} // closed when the process has exited and been reaped
	log  logBuffer
	args []string // extra redis-server arguments, e.g. for cluster mode
	conf string   // a config file to run in sentinel mode, if set
}

// Start runs a redis-server without persistence on a free loopback port and
// waits until it answers PING. It fails the test if redis-server is not
// installed: these tests are the point, skipping them would hide that.
func Start(t testing.TB) *Server {
	t.Helper()
	return start(t, nil)
}

func start(t testing.TB, args func(port string) []string) *Server {
	t.Helper()
	return startServer(t, &Server{}, args)
}

// startServer starts s, as set up so far, on a free port.
func startServer(t testing.TB, s *Server, args func(port string) []string) *Server {
	t.Helper()
	if _, err := exec.LookPath("redis-server"); err != nil {
		t.Fatal("redis-server not found on PATH; install it (apt-get install -y redis-server) or run the README's test command, which does")
	}
	var err error
	for range 5 { // another process may take the port between pick and bind
		s.Addr = freeAddr(t)
		if args != nil {
			_, port, _ := net.SplitHostPort(s.Addr)
			s.args = args(port)
		}
		if err = s.start(); err == nil {
			t.Cleanup(s.Stop)
			return s
		}
	}
	t.Fatalf("start redis-server: %v", err)
	return nil
}

func freeAddr(t testing.TB) string {
	t.Helper()
	for {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatalf("pick a free port: %v", err)
		}
		addr := l.Addr().String()
		l.Close()
		// Never the ports of a Redis or a Sentinel that may run here.
		if _, port, _ := net.SplitHostPort(addr); port != "6379" && port != "26379" {
			return addr
		}
	}
}

func (s *Server) start() error {
	_, port, _ := net.SplitHostPort(s.Addr)
	argv := []string{
		"--port", port, "--bind", "127.0.0.1",
		"--save", "", "--appendonly", "no",
		"--daemonize", "no", "--loglevel", "warning"}
	if s.conf != "" { // the file must come first; sentinel rewrites it
		argv = append([]string{s.conf, "--sentinel"}, argv...)
	}
	cmd := exec.Command("redis-server", append(argv, s.args...)...)
	s.log.Reset()
	cmd.Stdout, cmd.Stderr = &s.log, &s.log
	if err := cmd.Start(); err != nil {
		return err
	}
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	s.mu.Lock()
	s.cmd, s.done = cmd, done
	s.mu.Unlock()

	deadline := time.After(10 * time.Second)
	for ping(s.Addr) != nil { // poll until it answers
		select {
		case <-done:
			return fmt.Errorf("redis-server exited: %s", s.log.String())
		case <-deadline:
			s.Stop()
			return fmt.Errorf("redis-server did not answer PING within 10s")
		case <-time.After(5 * time.Millisecond):
		}
	}
	// The server that answered may be another's that took the port first
	// (a test of another package, all starting servers at once): ours then
	// failed to bind. TestUnpickedGrantEndsWithinWaiterLease's cluster node
	// got "ERR This instance has cluster support disabled" from one.
	if pid, err := serverPID(s.Addr); err != nil || (pid != cmd.Process.Pid && parentPID(pid) != cmd.Process.Pid) {
		s.Stop()
		return fmt.Errorf("the server on %s is not the one started (process %d, ours %d: %v)", s.Addr, pid, cmd.Process.Pid, err)
	}
	return nil
}

// parentPID returns the parent's process id of process pid, or 0 when it
// cannot tell. A "redis-server" on PATH may be a wrapper that runs the
// real one as its child: scripts/redis-instructions puts Redis under
// callgrind that way.
func parentPID(pid int) int {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	// pid (comm) state ppid ...: comm may hold spaces, so after its last ')'.
	fields := strings.Fields(string(stat[bytes.LastIndexByte(stat, ')')+1:]))
	if len(fields) < 2 {
		return 0
	}
	ppid, _ := strconv.Atoi(fields[1])
	return ppid
}

// serverPID returns the process id of the server on addr.
func serverPID(addr string) (int, error) {
	c := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1, DialTimeout: time.Second})
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	info, err := c.Info(ctx, "server").Result()
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "process_id:"); ok {
			return strconv.Atoi(v)
		}
	}
	return 0, errors.New("INFO server names no process_id")
}

func ping(addr string) error {
	c := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1, DialTimeout: time.Second})
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	return c.Ping(ctx).Err()
}

// logBuffer is a process's output, safe to read while it writes.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *logBuffer) Reset() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.buf.Reset()
}

func (b *logBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// Client returns a client for this server, closed when the test ends.
func (s *Server) Client(t testing.TB) *redis.Client {
	t.Helper()
	c := redis.NewClient(&redis.Options{Addr: s.Addr})
	t.Cleanup(func() { c.Close() })
	return c
}

// URL returns the server's redis:// URL.
func (s *Server) URL() string { return "redis://" + s.Addr }

// Stop kills the server (SIGKILL, as a crash would) and waits for it to exit.
// It is safe to call more than once.
func (s *Server) Stop() {
	s.mu.Lock()
	cmd, done := s.cmd, s.done
	s.mu.Unlock()
	if cmd == nil {
		return
	}
	cmd.Process.Signal(syscall.SIGCONT) // a stopped process must run to die
	cmd.Process.Kill()
	<-done
}

// Restart kills the server and starts an empty one on the same port, as a
// Redis without persistence comes back after a crash.
func (s *Server) Restart(t testing.TB) {
	t.Helper()
	s.Stop()
	if err := s.start(); err != nil {
		t.Fatalf("restart redis-server: %v", err)
	}
}

// Pause stops the server process (SIGSTOP): connections stay open, nothing
// answers. Resume undoes it.
func (s *Server) Pause(t testing.TB) { s.signal(t, syscall.SIGSTOP) }

// Resume continues a paused server (SIGCONT).
func (s *Server) Resume(t testing.TB) { s.signal(t, syscall.SIGCONT) }

func (s *Server) signal(t testing.TB, sig syscall.Signal) {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.cmd.Process.Signal(sig); err != nil {
		t.Fatalf("signal redis-server: %v", err)
	}
}

// StartWith is Start with extra redis-server arguments, such as
// "--maxmemory-policy", "allkeys-lru" or "--rename-command", "CONFIG", "".
func StartWith(t testing.TB, args ...string) *Server {
	t.Helper()
	return start(t, func(string) []string { return args })
}
