package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/lockgate/lockgate/cmd/gateway/app"
)

// roleEnv makes a lab process (or the test binary standing in for
// it) a child with another job: "ceiling" serves the no-op HTTP ceiling
// (or the redis-ceiling, see ceilingRedisEnv),
// "gateway" runs the gateway as cmd/gateway does (tests only: a real run
// starts the built cmd/gateway binary, which ignores the variable).
const roleEnv = "LOCKBENCH_ROLE"

// childProc is a server process the lab started: a gateway, the ceiling,
// etcd. It prints app.ListeningPrefix and its base URL once it listens.
type childProc struct {
	name string
	url  string
	cmd  *exec.Cmd
	done chan struct{}
	logs *tailBuffer
}

// startChild runs bin with args and env (added to a minimal environment)
// and waits up to 30s for its listening line.
func startChild(ctx context.Context, name, bin string, args []string, env map[string]string) (*childProc, error) {
	p := &childProc{name: name, logs: newTailBuffer(16 << 10), done: make(chan struct{})}
	p.cmd = exec.Command(bin, args...)
	p.cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME")}
	for k, v := range env {
		p.cmd.Env = append(p.cmd.Env, k+"="+v)
	}
	p.cmd.Stderr = p.logs
	stdout, err := p.cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := p.cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	go func() { p.cmd.Wait(); close(p.done) }()
	type listening struct {
		url string
		err error
	}
	ch := make(chan listening, 1)
	go func() {
		url, err := app.WaitListening(stdout)
		ch <- listening{url, err}
	}()
	t := time.NewTimer(30 * time.Second)
	defer t.Stop()
	select {
	case l := <-ch:
		if l.err != nil {
			p.stop()
			return nil, fmt.Errorf("%s: %w\n%s", name, l.err, p.logs)
		}
		p.url = l.url
		return p, nil
	case <-t.C:
		p.stop()
		return nil, fmt.Errorf("%s did not listen within 30s\n%s", name, p.logs)
	case <-ctx.Done():
		p.stop()
		return nil, ctx.Err()
	}
}

func (p *childProc) pid() int { return p.cmd.Process.Pid }

// stop sends SIGTERM (by PID) and kills the process if it has not exited
// within 10s. It waits for the exit.
func (p *childProc) stop() {
	p.cmd.Process.Signal(syscall.SIGTERM)
	t := time.NewTimer(10 * time.Second)
	defer t.Stop()
	select {
	case <-p.done:
	case <-t.C:
		p.cmd.Process.Kill()
		<-p.done
	}
}

// clockTicks is USER_HZ, the unit of utime and stime in /proc/<pid>/stat:
// 100 on every Linux architecture Go supports.
const clockTicks = 100

// cpuTime is the user plus system CPU time pid has used so far, from
// /proc/<pid>/stat (Linux only; 10 ms resolution). pid 0 means this
// process.
func cpuTime(pid int) (time.Duration, error) {
	path := "/proc/self/stat"
	if pid != 0 {
		path = "/proc/" + strconv.Itoa(pid) + "/stat"
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	// The command name, field 2, is in parentheses and may hold spaces:
	// count fields after its closing one. utime and stime are fields 14
	// and 15, so the 12th and 13th after it.
	i := strings.LastIndexByte(string(data), ')')
	if i < 0 {
		return 0, errors.New(path + ": no command name")
	}
	f := strings.Fields(string(data[i+1:]))
	if len(f) < 13 {
		return 0, errors.New(path + ": too few fields")
	}
	utime, err1 := strconv.ParseInt(f[11], 10, 64)
	stime, err2 := strconv.ParseInt(f[12], 10, 64)
	if err := errors.Join(err1, err2); err != nil {
		return 0, fmt.Errorf("%s: %w", path, err)
	}
	return time.Duration(utime+stime) * time.Second / clockTicks, nil
}

// syscallCount is the read plus write system calls pid has made so far,
// from /proc/<pid>/io (syscr, syscw; Linux only).
func syscallCount(pid int) (int64, error) {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/io")
	if err != nil {
		return 0, err
	}
	var n int64
	for line := range strings.Lines(string(data)) {
		k, v, _ := strings.Cut(strings.TrimSpace(line), ": ")
		if k == "syscr" || k == "syscw" {
			c, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				return 0, fmt.Errorf("/proc/%d/io: %w", pid, err)
			}
			n += c
		}
	}
	return n, nil
}

// buildGateway builds cmd/gateway into dir, as a user would, and returns
// the binary's path. It needs the go command and lockgate's module: the lab runs in
// tools/lab, whose go.mod points at the repository around it.
func buildGateway(ctx context.Context, dir string) (string, error) {
	bin := filepath.Join(dir, "gateway")
	out, err := exec.CommandContext(ctx, "go", "build", "-o", bin, "github.com/lockgate/lockgate/cmd/gateway").CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("go build cmd/gateway (run the lab in tools/lab, or give --gateway-bin): %w\n%s", err, out)
	}
	return bin, nil
}
