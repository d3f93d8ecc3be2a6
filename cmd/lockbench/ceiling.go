package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/lockgate/lockgate/cmd/gateway/app"
	"github.com/lockgate/lockgate/handlers"
	"github.com/lockgate/lockgate/middleware"
)

// ceilingMain is the HTTP ceiling, run as a process of its own: a plain
// net/http server with the gateway's token check (the same
// middleware.Authenticator, HS256 key from LOCKGATE_JWT_SECRET) on every
// request, which answers an acquire (POST /locks/{ns}/{name}, JSON body
// read and decoded) with a 201 and a grant-shaped JSON body, and a release
// (DELETE with a Lock-Token) with a 204, holding no lock at all. What the
// gateway costs above it is routing, validation, logging, metrics and the
// locking itself. It prints the gateway's listening line and serves until
// SIGTERM.
func ceilingMain() int {
	authn, err := middleware.NewAuthenticator(middleware.AuthConfig{Secret: []byte(os.Getenv("LOCKGATE_JWT_SECRET"))})
	if err != nil {
		fmt.Fprintln(os.Stderr, "ceiling:", err)
		return 1
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Fprintln(os.Stderr, "ceiling:", err)
		return 1
	}
	srv := &http.Server{Handler: ceilingHandler(authn), ReadHeaderTimeout: 10 * time.Second}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	go func() {
		<-ctx.Done()
		srv.Close()
	}()
	fmt.Println(app.ListeningPrefix + "http://" + l.Addr().String())
	if err := srv.Serve(l); err != nil && err != http.ErrServerClosed {
		fmt.Fprintln(os.Stderr, "ceiling:", err)
		return 1
	}
	return 0
}

func ceilingHandler(authn *middleware.Authenticator) http.Handler {
	var fence atomic.Int64
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rest, ok := strings.CutPrefix(r.URL.Path, "/locks/")
		ns, name, ok2 := strings.Cut(rest, "/")
		if !ok || !ok2 || ns == "" || name == "" {
			http.NotFound(w, r)
			return
		}
		if _, err := authn.Authenticate(r); err != nil {
			w.Header().Set("Content-Type", "application/problem+json")
			w.WriteHeader(http.StatusUnauthorized)
			io.WriteString(w, `{"code":"unauthorized"}`)
			return
		}
		switch r.Method {
		case http.MethodPost:
			var body struct {
				TTLMS  int64  `json:"ttl_ms"`
				WaitMS int64  `json:"wait_ms"`
				Owner  string `json:"owner"`
			}
			if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, handlers.MaxBodyBytes)).Decode(&body); err != nil && err != io.EOF {
				w.Header().Set("Content-Type", "application/problem+json")
				w.WriteHeader(http.StatusBadRequest)
				io.WriteString(w, `{"code":"invalid_request"}`)
				return
			}
			f := fence.Add(1)
			out := fmt.Appendf(nil, `{"lock":%q,"token":"ceiling-%d","fencing_token":%d,"ttl_ms":%d,"expires_at":%q}`+"\n",
				ns+"/"+name, f, f, body.TTLMS, time.Now().Add(time.Duration(body.TTLMS)*time.Millisecond).UTC().Format(time.RFC3339Nano))
			w.Header().Set("Content-Type", "application/json")
			w.Header().Set("Content-Length", strconv.Itoa(len(out)))
			w.WriteHeader(http.StatusCreated)
			w.Write(out)
		case http.MethodDelete:
			if r.Header.Get("Lock-Token") == "" {
				w.WriteHeader(http.StatusBadRequest)
				return
			}
			w.WriteHeader(http.StatusNoContent)
		default:
			w.WriteHeader(http.StatusMethodNotAllowed)
		}
	})
}
