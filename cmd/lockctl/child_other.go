//go:build !unix

package main

import (
	"errors"
	"io"
	"os"
	"syscall"
)

// child is unsupported off Unix: run needs process groups and signals.
type child struct {
	done    chan struct{}
	stopped chan syscall.Signal
}

func startChild(argv, env []string, stdin io.Reader, stdout, stderr io.Writer) (*child, error) {
	return nil, errors.New("lockctl run needs a Unix system")
}

func (ch *child) signal(os.Signal)       {}
func (ch *child) canSuspend() bool       { return false }
func (ch *child) suspend(syscall.Signal) {}
func (ch *child) release()               {}
func (ch *child) exitCode() int          { return exitFailure }
func signalNumber(os.Signal) int         { return 0 }

func signalName(sig os.Signal) string { return sig.String() }
