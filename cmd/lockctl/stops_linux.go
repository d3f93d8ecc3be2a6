package main

import (
	"os"
	"os/signal"
	"syscall"
	"unsafe"
)

// watchStops sends the stopping signal to ch.stopped each time the command
// stops (Ctrl-Z, SIGTTIN, SIGSTOP), until it has exited. os/exec waits only
// for the exit; a stop is learned from SIGCHLD and waitid(WSTOPPED), which
// leaves the exit for os/exec to reap.
func watchStops(ch *child) {
	chld := make(chan os.Signal, 1)
	signal.Notify(chld, syscall.SIGCHLD)
	pid := ch.cmd.Process.Pid
	go func() {
		defer signal.Stop(chld)
		for {
			// Several stops may have coalesced into one SIGCHLD, or come
			// before Notify: each waitid consumes one.
			for {
				sig, ok := waitStopped(pid)
				if !ok {
					break
				}
				select {
				case ch.stopped <- sig:
				default: // the watcher has not caught up; it has heard of a stop
				}
			}
			select {
			case <-ch.done:
				return
			case <-chld:
			}
		}
	}()
}

// siginfoChld is the start of Linux's siginfo_t as waitid fills it for a
// child: si_signo, si_errno, si_code, then (after padding to 8 bytes on
// 64-bit systems) si_pid, si_uid, si_status.
type siginfoChld struct {
	Signo, Errno, Code int32
	_                  [siginfoPad]byte
	Pid                int32
	UID                uint32
	Status             int32
	_                  [128 - 12 - siginfoPad - 12]byte // siginfo_t is 128 bytes
}

const siginfoPad = unsafe.Sizeof(uintptr(0)) - 4

const (
	pPID       = 1 // P_PID
	cldStopped = 5 // CLD_STOPPED
)

// waitStopped consumes one stop of child pid, if it is stopped now, and
// returns the signal that stopped it.
func waitStopped(pid int) (syscall.Signal, bool) {
	var info siginfoChld
	_, _, errno := syscall.Syscall6(syscall.SYS_WAITID, pPID, uintptr(pid), uintptr(unsafe.Pointer(&info)),
		syscall.WSTOPPED|syscall.WNOHANG, 0, 0)
	if errno != 0 || info.Pid != int32(pid) || info.Code != cldStopped {
		return 0, false
	}
	return syscall.Signal(info.Status), true
}
