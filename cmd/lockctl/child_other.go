//go:build !unix

package main

import (
	"errors"
	"io"
	"os"
)

// child is unsupported off Unix: run needs process groups and signals.
type child struct{ done chan struct{} }

func startChild(argv, env []string, stdin io.Reader, stdout, stderr io.Writer) (*child, error) {
	return nil, errors.New("lockctl run needs a Unix system")
}

func (ch *child) signal(os.Signal) {}
func (ch *child) exitCode() int    { return exitFailure }
func signalNumber(os.Signal) int   { return 0 }
