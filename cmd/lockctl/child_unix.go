//go:build unix

package main

import (
	"io"
	"os"
	"os/exec"
	"runtime"
	"syscall"
	"time"
)

// child is the command that run watches. It runs in a process group of its
// own: a signal lockctl passes on, and the kill after a lost lease, reach
// everything the command started (a shell's children too), and a Ctrl-C in
// the terminal reaches the command once, through lockctl, not twice. The
// price: the command is not in the terminal's foreground process group, so
// it cannot read from the terminal.
type child struct {
	cmd  *exec.Cmd
	done chan struct{} // closed once the command has exited and been reaped
}

// startChild starts argv with env and the given standard streams.
func startChild(argv, env []string, stdin io.Reader, stdout, stderr io.Writer) (*child, error) {
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = env
	cmd.Stdin, cmd.Stdout, cmd.Stderr = stdin, stdout, stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	setParentDeathSignal(cmd.SysProcAttr)
	// A grandchild that keeps our stdout open must not keep run waiting.
	cmd.WaitDelay = 2 * time.Second
	ch := &child{cmd: cmd, done: make(chan struct{})}
	started := make(chan error, 1)
	go func() {
		// The parent-death signal fires when the thread that started the
		// child ends, not the process: keep this thread until it is reaped.
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		if err := cmd.Start(); err != nil {
			started <- err
			return
		}
		started <- nil
		cmd.Wait()
		close(ch.done)
	}()
	if err := <-started; err != nil {
		return nil, err
	}
	return ch, nil
}

// signal sends sig to the command's process group, unless it has been
// reaped already (its id may then belong to someone else).
func (ch *child) signal(sig os.Signal) {
	s, ok := sig.(syscall.Signal)
	if !ok {
		return
	}
	select {
	case <-ch.done:
		return
	default:
	}
	syscall.Kill(-ch.cmd.Process.Pid, s) // ESRCH: gone already
}

// exitCode is the command's code as a shell reports it: 128+N when signal
// N killed it. Valid once done is closed.
func (ch *child) exitCode() int {
	ps := ch.cmd.ProcessState
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return exitSignalBase + int(ws.Signal())
	}
	return ps.ExitCode()
}

// signalNumber is sig's number, for 128+N.
func signalNumber(sig os.Signal) int {
	if s, ok := sig.(syscall.Signal); ok {
		return int(s)
	}
	return 0
}
