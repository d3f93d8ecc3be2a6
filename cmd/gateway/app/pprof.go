package app

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
	"strings"
	"time"

	"github.com/rs/zerolog"
)

// pprofEnv names a loopback address (127.0.0.1:6060) on which the gateway
// serves net/http/pprof, for profiling it as deployed (lockbench
// --pprof-dir sets it). Off when unset. It is an environment variable and
// not a flag on purpose: it is a tool for measuring the gateway, not a
// setting to run it with.
const pprofEnv = "LOCKGATE_PPROF_ADDR"

// checkPprofAddr accepts only loopback addresses: profiles show request
// data in memory, so they never leave the machine.
func checkPprofAddr(addr string) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("%s: want a loopback host:port such as 127.0.0.1:6060", pprofEnv)
	}
	if ip := net.ParseIP(host); host != "localhost" && (ip == nil || !ip.IsLoopback()) {
		return fmt.Errorf("%s: %q is not a loopback address; profiles never leave the machine", pprofEnv, host)
	}
	return nil
}

// cmdline is pprof.Cmdline with only the flags' names: their values may be
// secrets (--jwt-secret, a Redis URL with its password).
func cmdline(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	fmt.Fprint(w, strings.Join(redactArgs(os.Args), "\x00"))
}

// redactArgs keeps the program's name and each flag's name, and puts "…"
// for every value, given after '=' or as an argument of its own.
func redactArgs(args []string) []string {
	out := make([]string, 0, len(args))
	for i, a := range args {
		switch name, _, hasValue := strings.Cut(a, "="); {
		case i == 0:
			out = append(out, a)
		case strings.HasPrefix(a, "-") && hasValue:
			out = append(out, name+"=…")
		case strings.HasPrefix(a, "-"):
			out = append(out, a)
		default:
			out = append(out, "…")
		}
	}
	return out
}

// servePprof serves the pprof handlers on addr until ctx is done, on a mux
// of its own: nothing of it is reachable from the API's listener.
func servePprof(addr string, logger zerolog.Logger) (stop func(), err error) {
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("%s: listen on %s: %w", pprofEnv, addr, err)
	}
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := srv.Serve(l); err != nil && !errors.Is(err, http.ErrServerClosed) {
			logger.Warn().Err(err).Msg("pprof server stopped")
		}
	}()
	logger.Warn().Str("addr", l.Addr().String()).Msg("serving net/http/pprof on loopback (" + pprofEnv + ")")
	return func() {
		srv.Close()
		<-done
	}, nil
}
