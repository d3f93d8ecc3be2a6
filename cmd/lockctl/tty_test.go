//go:build linux

package main

import (
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"github.com/lockgate/lockgate/internal/gatewaytest"
)

// TestRunTerminal runs lockctl as an interactive shell would: in the
// foreground of a terminal (a pty it controls), with the terminal as its
// standard streams. The command can read what is typed; Ctrl-C and SIGTERM
// end lockctl, and the lock is released.
func TestRunTerminal(t *testing.T) {
	bin := lockctlBinary(t)
	gw := startGateway(t)
	for _, tc := range []struct {
		name   string
		script string
		act    func(t *testing.T, term *terminal)
		want   int
		output string // the terminal shows this
	}{{
		name:   "reads",
		script: `echo ready; read x; echo "got:$x"; exit 7`,
		act:    func(t *testing.T, term *terminal) { term.typeIn(t, "hello\n") },
		want:   7,
		output: "got:hello",
	}, {
		name:   "ctrl-c",
		script: `echo ready; read x; echo "read returned"; exit 7`,
		act:    func(t *testing.T, term *terminal) { term.typeIn(t, "\x03") },
		want:   128 + int(syscall.SIGINT),
	}, {
		// The command ignores SIGTERM and SIGINT: lockctl kills it after
		// --kill-after.
		name:   "sigterm",
		script: `trap '' TERM INT; echo ready; read x; exit 7`,
		act: func(t *testing.T, term *terminal) {
			if err := term.cmd.Process.Signal(syscall.SIGTERM); err != nil {
				t.Fatal(err)
			}
		},
		want:   128 + int(syscall.SIGKILL),
		output: "did not exit within 1s of SIGTERM",
	}} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			lock := "tty/" + tc.name
			term := startInTerminal(t, bin, gw, "run", lock, "--ttl", "30s", "--kill-after", "1s", "--", "sh", "-c", tc.script)
			term.waitOutput(t, "ready")
			lockctl(t, gw, nil, "status", lock).want(t, exitOK)
			tc.act(t, term)
			select {
			case <-term.exited:
			case <-time.After(20 * time.Second):
				t.Fatalf("lockctl did not exit within 20s; the terminal shows %q", term.out.String())
			}
			if got := term.cmd.ProcessState.ExitCode(); got != tc.want {
				t.Fatalf("exit code: got %d, want %d; the terminal shows %q", got, tc.want, term.out.String())
			}
			if tc.output != "" {
				term.waitOutput(t, tc.output)
			}
			lockctl(t, gw, nil, "status", lock).want(t, exitFree)
		})
	}
}

// TestRunStoppedCommand: a command stopped without a terminal to relay the
// stop to is reported, and SIGTERM still ends lockctl (the command gets
// SIGCONT with it) and releases the lock.
func TestRunStoppedCommand(t *testing.T) {
	bin := lockctlBinary(t)
	gw := startGateway(t)
	dir := t.TempDir()
	ready := filepath.Join(dir, "ready")
	cmd := exec.Command(bin, "run", "tty/stopped", "--kill-after", "20s", "--", "sh", "-c",
		`echo $$ > `+shq(ready)+`; kill -STOP $$; while :; do sleep 0.05; done`)
	cmd.Env = append(os.Environ(), "LOCKGATE_URL="+gw.URL, "LOCKGATE_TOKEN="+jwtFor(t, secret))
	var stderr gatewaytest.Buffer
	cmd.Stderr = &stderr
	exited := startProcess(t, cmd)
	t.Cleanup(func() { killGroup(ready) })
	waitFile(t, ready)
	deadline := time.Now().Add(20 * time.Second)
	for !strings.Contains(stderr.String(), "stopped (SIGSTOP)") {
		if time.Now().After(deadline) {
			t.Fatalf("stderr %q: want it to report the stopped command within 20s", stderr.String())
		}
		time.Sleep(5 * time.Millisecond) // poll interval
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-exited:
	case <-time.After(20 * time.Second):
		t.Fatalf("lockctl did not exit within 20s of SIGTERM; stderr %q", stderr.String())
	}
	if got := cmd.ProcessState.ExitCode(); got != 128+int(syscall.SIGTERM) {
		t.Fatalf("exit code: got %d, want 143; stderr %q", got, stderr.String())
	}
	lockctl(t, gw, nil, "status", "tty/stopped").want(t, exitFree)
}

// terminal is a lockctl process whose controlling terminal is a pty.
type terminal struct {
	cmd    *exec.Cmd
	master *os.File
	out    *gatewaytest.Buffer // everything the terminal showed
	exited <-chan struct{}
}

// startInTerminal starts lockctl with args as the leader of a new session
// whose controlling terminal is a fresh pty: the foreground process group
// of that terminal, as a shell would start it.
func startInTerminal(t *testing.T, bin string, gw *gateway, args ...string) *terminal {
	t.Helper()
	master, slave := openPTY(t)
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), "LOCKGATE_URL="+gw.URL, "LOCKGATE_TOKEN="+jwtFor(t, secret))
	cmd.Stdin, cmd.Stdout, cmd.Stderr = slave, slave, slave
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: 0}
	exited := startProcess(t, cmd)
	slave.Close()
	term := &terminal{cmd: cmd, master: master, out: &gatewaytest.Buffer{}, exited: exited}
	go io.Copy(term.out, master) // ends with EIO once every slave is closed
	return term
}

// typeIn writes s to the terminal as keystrokes.
func (term *terminal) typeIn(t *testing.T, s string) {
	t.Helper()
	if _, err := term.master.WriteString(s); err != nil {
		t.Fatal(err)
	}
}

// waitOutput polls until the terminal has shown s.
func (term *terminal) waitOutput(t *testing.T, s string) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !strings.Contains(term.out.String(), s) {
		if time.Now().After(deadline) {
			t.Fatalf("the terminal did not show %q within 20s; it shows %q", s, term.out.String())
		}
		time.Sleep(5 * time.Millisecond) // poll interval
	}
}

// openPTY opens a new pseudo-terminal pair, closed when the test ends.
func openPTY(t *testing.T) (master, slave *os.File) {
	t.Helper()
	master, err := os.OpenFile("/dev/ptmx", os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Skipf("no pseudo-terminals here: %v", err)
	}
	t.Cleanup(func() { master.Close() })
	var unlock int32
	if err := ioctl(master, syscall.TIOCSPTLCK, unsafe.Pointer(&unlock)); err != nil {
		t.Fatalf("unlockpt: %v", err)
	}
	var n uint32
	if err := ioctl(master, syscall.TIOCGPTN, unsafe.Pointer(&n)); err != nil {
		t.Fatalf("ptsname: %v", err)
	}
	slave, err = os.OpenFile("/dev/pts/"+strconv.Itoa(int(n)), os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { slave.Close() })
	return master, slave
}

func ioctl(f *os.File, req uintptr, arg unsafe.Pointer) error {
	rc, err := f.SyscallConn()
	if err != nil {
		return err
	}
	var errno syscall.Errno
	if err := rc.Control(func(fd uintptr) {
		_, _, errno = syscall.Syscall(syscall.SYS_IOCTL, fd, req, uintptr(arg))
	}); err != nil {
		return err
	}
	if errno != 0 {
		return errno
	}
	return nil
}
