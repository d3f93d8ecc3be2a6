//go:build unix

package main

import (
	"io"
	"os"
	"os/exec"
	"os/signal"
	"runtime"
	"syscall"
	"time"
	"unsafe"
)

// child is the command that run watches. It runs in a process group of its
// own: a signal lockctl passes on, and the kill after a lost lease, reach
// everything the command started (a shell's children too), and nothing
// else (not the other commands of a pipeline lockctl is part of).
//
// Only the foreground process group of a terminal may read it; any other
// group that tries is stopped with SIGTTIN. So when lockctl runs in the
// foreground of the terminal on its standard input, it hands the terminal
// to the command's group, as a shell hands it to a job: the command reads
// what is typed, and Ctrl-C and Ctrl-Z reach it as if lockctl were not
// there. lockctl takes the terminal back when the command exits.
type child struct {
	cmd     *exec.Cmd
	done    chan struct{}       // closed once the command has exited and been reaped
	stopped chan syscall.Signal // the signal that stopped the command, each time it stops
	tty     *os.File            // the terminal lockctl shares with the command's job; nil without one
	fg      bool                // the command's group was started in the terminal's foreground
	conts   chan os.Signal      // SIGCONT to lockctl, with a terminal
}

// startChild starts argv with env and the given standard streams.
func startChild(argv, env []string, stdin io.Reader, stdout, stderr io.Writer) (*child, error) {
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = env
	cmd.Stdin, cmd.Stdout, cmd.Stderr = stdin, stdout, stderr
	ch := &child{cmd: cmd, done: make(chan struct{}), stopped: make(chan syscall.Signal, 4)}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if f, ok := stdin.(*os.File); ok {
		// TIOCGPGRP answers only for our controlling terminal: with it, we
		// are part of a session with job control.
		if pgrp, err := tcgetpgrp(f); err == nil {
			ch.tty = f
			if pgrp == syscall.Getpgrp() {
				// The new group gets the terminal in the child, between fork
				// and exec, so that no read can come before it.
				ch.fg = true
				cmd.SysProcAttr = &syscall.SysProcAttr{Foreground: true, Ctty: int(f.Fd())}
			}
		}
	}
	setParentDeathSignal(cmd.SysProcAttr)
	// A grandchild that keeps our stdout open must not keep run waiting.
	cmd.WaitDelay = 2 * time.Second
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
	if ch.tty != nil {
		// In the background, lockctl must still write its warnings and take
		// the terminal back, whatever "stty tostop" says. Set only now: an
		// ignored signal stays ignored across exec.
		signal.Ignore(syscall.SIGTTOU)
		ch.conts = make(chan os.Signal, 1)
		signal.Notify(ch.conts, syscall.SIGCONT)
	}
	watchStops(ch)
	return ch, nil
}

// signal sends sig to the command's process group, then SIGCONT: a
// stopped process acts on no signal but SIGKILL until it is continued.
// Nothing is sent once the command has been reaped (its id may then belong
// to someone else).
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
	pgid := ch.cmd.Process.Pid
	syscall.Kill(-pgid, s) // ESRCH: gone already
	if s != syscall.SIGKILL && s != syscall.SIGCONT {
		syscall.Kill(-pgid, syscall.SIGCONT)
	}
}

// canSuspend says whether lockctl is part of a job a shell can resume.
func (ch *child) canSuspend() bool { return ch.tty != nil }

// suspend relays a stop of the command to lockctl's own job, as a shell
// would see a job stop: lockctl takes the terminal back and stops its own
// process group with sig. Once the shell continues it ("fg" or "bg"), the
// command is continued too, in the foreground if lockctl is.
func (ch *child) suspend(sig syscall.Signal) {
	pgid := ch.cmd.Process.Pid
	if fg, err := tcgetpgrp(ch.tty); err == nil && fg == pgid {
		tcsetpgrp(ch.tty, syscall.Getpgrp())
	}
	if sig == syscall.SIGSTOP {
		sig = syscall.SIGTSTP // what a shell can resume, and what a job sees from Ctrl-Z
	}
	select {
	case <-ch.conts: // an old one
	default:
	}
	// The stop may take effect a moment after kill returns (another thread
	// takes it), so wait for the SIGCONT. The kernel discards the stop when
	// our group is orphaned (no shell would resume it): then none comes,
	// and we carry on after a second.
	syscall.Kill(0, sig)
	t := time.NewTimer(time.Second)
	select {
	case <-ch.conts:
	case <-t.C:
	}
	t.Stop()
	if fg, err := tcgetpgrp(ch.tty); err == nil && fg == syscall.Getpgrp() {
		tcsetpgrp(ch.tty, pgid)
	}
	ch.signal(syscall.SIGCONT)
}

// release gives the terminal back to lockctl's group once the command has
// exited, if the command's group still has it.
func (ch *child) release() {
	if ch.tty == nil {
		return
	}
	if fg, err := tcgetpgrp(ch.tty); err == nil && fg == ch.cmd.Process.Pid {
		tcsetpgrp(ch.tty, syscall.Getpgrp())
	}
	signal.Reset(syscall.SIGTTOU)
	signal.Stop(ch.conts)
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

// tcgetpgrp is the foreground process group of f, which must be the
// caller's controlling terminal.
func tcgetpgrp(f *os.File) (int, error) {
	var pgrp int32
	err := ttyIoctl(f, syscall.TIOCGPGRP, unsafe.Pointer(&pgrp))
	return int(pgrp), err
}

// tcsetpgrp makes pgrp the foreground process group of f.
func tcsetpgrp(f *os.File, pgrp int) error {
	p := int32(pgrp)
	return ttyIoctl(f, syscall.TIOCSPGRP, unsafe.Pointer(&p))
}

func ttyIoctl(f *os.File, req uintptr, arg unsafe.Pointer) error {
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

// signalName names sig as kill -l does, with the SIG prefix.
func signalName(sig os.Signal) string {
	switch sig {
	case syscall.SIGINT:
		return "SIGINT"
	case syscall.SIGTERM:
		return "SIGTERM"
	case syscall.SIGHUP:
		return "SIGHUP"
	case syscall.SIGSTOP:
		return "SIGSTOP"
	case syscall.SIGTSTP:
		return "SIGTSTP"
	case syscall.SIGTTIN:
		return "SIGTTIN"
	case syscall.SIGTTOU:
		return "SIGTTOU"
	}
	return sig.String()
}
