package app

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
)

// Gateway is a gateway that Start runs in this process.
type Gateway struct {
	// URL is the base URL it listens on, e.g. http://127.0.0.1:40123.
	URL string

	cancel context.CancelFunc
	done   chan struct{} // closed when Run has returned
	err    error         // what Run returned, once done is closed
}

// Start runs Run in a goroutine, as a process would with these args and
// environment, and returns once the gateway listens (pass --addr
// 127.0.0.1:0 for a free port). Logs go to stderr; stdout is read for the
// listening line and dropped. Tests and lockbench use it; Stop it when done.
//
// ctx bounds the start only, as it does for net.ListenConfig.Listen: once
// Start has returned, ending ctx does not stop the gateway. If ctx ends
// before the gateway listens, Start cancels it and returns ctx's error at
// once, without waiting for Run to return: a start that hangs fails.
func Start(ctx context.Context, args []string, getenv func(string) string, stderr io.Writer) (*Gateway, error) {
	runCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	g := &Gateway{cancel: cancel, done: make(chan struct{})}
	out, stdout := io.Pipe()
	go func() {
		g.err = Run(runCtx, args, getenv, stdout, stderr)
		stdout.Close()
		close(g.done)
	}()
	stopAbort := context.AfterFunc(ctx, func() { out.CloseWithError(context.Cause(ctx)) })
	url, err := WaitListening(out)
	if !stopAbort() { // ctx ended first and closed the pipe
		cancel()
		return nil, fmt.Errorf("gateway did not listen: %w", context.Cause(ctx))
	}
	if err != nil {
		cancel()
		<-g.done
		if g.err != nil {
			return nil, fmt.Errorf("gateway exited before it listened: %w", g.err)
		}
		return nil, err
	}
	g.URL = url
	return g, nil
}

// Stop shuts the gateway down as SIGTERM does, waits for Run to return
// (within its --shutdown-timeout) and returns what Run returned. It is safe
// to call more than once, and from several goroutines.
func (g *Gateway) Stop() error {
	g.cancel()
	<-g.done
	return g.err
}

// WaitListening reads a gateway's stdout (in this process or a child's) up
// to the line Run prints once it accepts connections, and returns the base
// URL from it. Whatever happens, it then reads and drops the rest in the
// background until EOF or an error, so the gateway never blocks on a full
// pipe.
func WaitListening(stdout io.Reader) (string, error) {
	defer func() { go io.Copy(io.Discard, stdout) }()
	sc := bufio.NewScanner(stdout)
	for sc.Scan() {
		if url, ok := strings.CutPrefix(sc.Text(), ListeningPrefix); ok {
			return url, nil
		}
	}
	if err := sc.Err(); err != nil {
		return "", fmt.Errorf("read the gateway's stdout: %w", err)
	}
	return "", errors.New("gateway exited before it listened")
}
