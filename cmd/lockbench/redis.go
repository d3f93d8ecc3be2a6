package main

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"
)

// redisProc is a redis-server that lockbench started and must stop.
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
		if up, _ := infoField(ctx, c, "replication", "master_link_status"); up == "up" {
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

// RedisCalls counts the commands Redis ran during a run, commands run by
// scripts included (INFO commandstats counts those too).
type RedisCalls struct {
	Total int64 `json:"total"`
	// PerHandoff is Total divided by the run's grants: what one handoff
	// costs Redis, the retries of woken waiters included.
	PerHandoff float64 `json:"per_handoff"`
	// ScriptsPerHandoff counts only the script calls (EVALSHA and kin):
	// the round trips a handoff costs.
	ScriptsPerHandoff float64 `json:"scripts_per_handoff"`
	// ByCommand splits Total per command ("evalsha", "hget", ...).
	ByCommand map[string]int64 `json:"by_command"`
}

// commandCalls reads the calls counter of every command from INFO
// commandstats.
func commandCalls(ctx context.Context, c redis.UniversalClient) (map[string]int64, error) {
	info, err := c.Info(ctx, "commandstats").Result()
	if err != nil {
		return nil, fmt.Errorf("INFO commandstats: %w", err)
	}
	return parseCommandStats(info), nil
}

// parseCommandStats parses lines such as
// "cmdstat_evalsha:calls=12,usec=340,usec_per_call=28.33,...".
func parseCommandStats(info string) map[string]int64 {
	calls := make(map[string]int64)
	for line := range strings.Lines(info) {
		name, rest, ok := strings.Cut(strings.TrimSpace(line), ":")
		cmd, isStat := strings.CutPrefix(name, "cmdstat_")
		if !ok || !isStat {
			continue
		}
		for field := range strings.SplitSeq(rest, ",") {
			if v, ok := strings.CutPrefix(field, "calls="); ok {
				n, _ := strconv.ParseInt(v, 10, 64)
				calls[cmd] = n
			}
		}
	}
	return calls
}

// scriptCommands are the commands that run a script or a function.
var scriptCommands = []string{"eval", "evalsha", "eval_ro", "evalsha_ro", "fcall", "fcall_ro"}

// diffCalls is after minus before, without lockbench's own INFO calls.
func diffCalls(before, after map[string]int64) RedisCalls {
	rc := RedisCalls{ByCommand: make(map[string]int64)}
	for _, cmd := range slices.Sorted(maps.Keys(after)) {
		if cmd == "info" {
			continue
		}
		if d := after[cmd] - before[cmd]; d > 0 {
			rc.ByCommand[cmd] = d
			rc.Total += d
		}
	}
	return rc
}

// infoField reads one field of an INFO section, such as redis_version
// from "server" or used_memory from "memory".
func infoField(ctx context.Context, c redis.UniversalClient, section, field string) (string, error) {
	info, err := c.Info(ctx, section).Result()
	if err != nil {
		return "", fmt.Errorf("INFO %s: %w", section, err)
	}
	for line := range strings.Lines(info) {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), field+":"); ok {
			return v, nil
		}
	}
	return "", fmt.Errorf("INFO %s has no %s", section, field)
}
