package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os/exec"
	"strings"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockgate/lockgate/cmd/lockbench/loadgen"
)

// redisProc is a redis-server that the lab started and must stop.
type redisProc struct {
	addr string
	cmd  *exec.Cmd
	done chan struct{} // closed once the process has exited and been reaped
	log  *tailBuffer
}

// startRedis runs bin as a redis-server without persistence on a free
// loopback port (never 6379, where a real one may live), and waits until it
// answers PING.
func startRedis(ctx context.Context, bin string) (*redisProc, error) {
	path, err := exec.LookPath(bin)
	if err != nil {
		return nil, fmt.Errorf("%s not found: install Redis 7 (apt-get install -y redis-server) or point --redis-server at it", bin)
	}
	var lastErr error
	for range 5 { // another process may take the port between pick and bind
		addr, err := freeLoopbackAddr()
		if err != nil {
			return nil, err
		}
		p, err := runRedis(ctx, path, addr)
		if err == nil {
			return p, nil
		}
		if ctx.Err() != nil {
			return nil, err
		}
		lastErr = err
	}
	return nil, fmt.Errorf("start redis-server: %w", lastErr)
}

func freeLoopbackAddr() (string, error) {
	for {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return "", fmt.Errorf("pick a free port: %w", err)
		}
		addr := l.Addr().String()
		l.Close()
		if !strings.HasSuffix(addr, ":6379") {
			return addr, nil
		}
	}
}

func runRedis(ctx context.Context, path, addr string, extra ...string) (*redisProc, error) {
	_, port, _ := net.SplitHostPort(addr)
	p := &redisProc{addr: addr, log: newTailBuffer(8 << 10), done: make(chan struct{})}
	p.cmd = exec.Command(path, append([]string{
		"--port", port, "--bind", "127.0.0.1",
		"--save", "", "--appendonly", "no",
		"--daemonize", "no", "--loglevel", "warning"}, extra...)...)
	p.cmd.Stdout, p.cmd.Stderr = p.log, p.log
	if err := p.cmd.Start(); err != nil {
		return nil, err
	}
	go func() { p.cmd.Wait(); close(p.done) }()

	c := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1, DialTimeout: time.Second})
	defer c.Close()
	deadline := time.NewTimer(10 * time.Second)
	defer deadline.Stop()
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for { // poll until it answers
		pctx, cancel := context.WithTimeout(ctx, time.Second)
		err := c.Ping(pctx).Err()
		cancel()
		if err == nil {
			return p, nil
		}
		select {
		case <-p.done:
			return nil, fmt.Errorf("redis-server exited: %s", p.log)
		case <-deadline.C:
			p.stop()
			return nil, errors.New("redis-server did not answer PING within 10s")
		case <-ctx.Done():
			p.stop()
			return nil, ctx.Err()
		case <-tick.C:
		}
	}
}

// startReplica runs bin as a replica of primary (diskless sync) on a free
// loopback port, and waits until its link is up.
func startReplica(ctx context.Context, bin string, primary *redisProc) (*redisProc, error) {
	path, err := exec.LookPath(bin)
	if err != nil {
		return nil, err
	}
	pc := redis.NewClient(&redis.Options{Addr: primary.addr, MaxRetries: -1})
	defer pc.Close()
	if err := pc.ConfigSet(ctx, "repl-diskless-sync-delay", "0").Err(); err != nil {
		return nil, fmt.Errorf("config set on the primary: %w", err)
	}
	addr, err := freeLoopbackAddr()
	if err != nil {
		return nil, err
	}
	host, port, _ := net.SplitHostPort(primary.addr)
	p, err := runRedis(ctx, path, addr, "--replicaof", host, port, "--repl-diskless-load", "on-empty-db")
	if err != nil {
		return nil, fmt.Errorf("start the replica: %w", err)
	}
	c := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1})
	defer c.Close()
	// Poll until the link is up and the replica acknowledges a write: a
	// link just up may not acknowledge yet, and the replicated target's
	// first grant would fail its WAIT.
	for deadline := time.Now().Add(10 * time.Second); ; {
		if up, _ := loadgen.InfoField(ctx, c, "replication", "master_link_status"); up == "up" {
			pc.Set(ctx, "lockbench:replica-check", "1", time.Second)
			if n, _ := pc.Do(ctx, "WAIT", 1, 100).Int(); n >= 1 {
				return p, nil
			}
		}
		if time.Now().After(deadline) {
			p.stop()
			return nil, errors.New("the replica's link to its primary was not up within 10s")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// url is the server's redis:// URL.
func (p *redisProc) url() string { return "redis://" + p.addr }

// stop asks the server to exit (SIGTERM, by PID), and kills it if it has
// not within 5s. It waits for the exit.
func (p *redisProc) stop() {
	p.cmd.Process.Signal(syscall.SIGTERM)
	t := time.NewTimer(5 * time.Second)
	defer t.Stop()
	select {
	case <-p.done:
	case <-t.C:
		p.cmd.Process.Kill()
		<-p.done
	}
}
