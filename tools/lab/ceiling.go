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

	"github.com/redis/go-redis/v9"

	"github.com/lockgate/lockgate/auth"
	"github.com/lockgate/lockgate/cmd/gateway/app"
	"github.com/lockgate/lockgate/handlers"
)

// ceilingMain is the HTTP ceiling, run as a process of its own: a plain
// net/http server with the gateway's token check (the same
// auth.Authenticator, HS256 key from LOCKGATE_JWT_SECRET) on every
// request, which answers an acquire (POST /locks/{ns}/{name}, JSON body
// read and decoded) with a 201 and a grant-shaped JSON body, and a release
// (DELETE with a Lock-Token) with a 204, holding no lock at all. What the
// gateway costs above it is routing, validation, logging, metrics and the
// locking itself. It prints the gateway's listening line and serves until
// SIGTERM.
//
// With ceilingRedisEnv set it is the redis-ceiling: the same server, whose
// acquire and release are the plain lock's (plainLock) on that Redis, with
// the gateway's client settings. What the gateway costs above it is
// what it does beyond one plain Redis round trip per call.
func ceilingMain() int {
	authn, err := auth.NewAuthenticator(auth.Config{Secret: []byte(os.Getenv("LOCKGATE_JWT_SECRET"))})
	if err != nil {
		fmt.Fprintln(os.Stderr, "ceiling:", err)
		return 1
	}
	var lk *plainLock
	if u := os.Getenv(ceilingRedisEnv); u != "" {
		opts, err := redis.ParseURL(u)
		if err != nil {
			fmt.Fprintln(os.Stderr, "ceiling: invalid", ceilingRedisEnv) // not err: it may quote a password
			return 1
		}
		// The gateway's client settings (cmd/gateway/app): RESP2, no
		// retries. What it does beyond them (several calls in one write)
		// is its own design, and stays out of the yardstick.
		opts.Protocol, opts.MaxRetries = 2, -1
		lk = &plainLock{client: redis.NewClient(opts)}
		defer lk.client.Close()
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Fprintln(os.Stderr, "ceiling:", err)
		return 1
	}
	srv := &http.Server{Handler: ceilingHandler(authn, lk), ReadHeaderTimeout: 10 * time.Second}
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

// ceilingRedisEnv is the redis:// URL that makes the ceiling the
// redis-ceiling.
const ceilingRedisEnv = "LOCKBENCH_CEILING_REDIS_URL"

// ceilingHandler serves the ceiling's two calls. lk, when not nil, takes
// and frees the plain lock of each call's name: a 409 problem when it is
// held or not the caller's, a 503 when Redis fails.
func ceilingHandler(authn *auth.Authenticator, lk *plainLock) http.Handler {
	var fence atomic.Int64
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rest, ok := strings.CutPrefix(r.URL.Path, "/locks/")
		ns, name, ok2 := strings.Cut(rest, "/")
		if !ok || !ok2 || ns == "" || name == "" {
			http.NotFound(w, r)
			return
		}
		if _, err := authn.Authenticate(r); err != nil {
			ceilingProblem(w, http.StatusUnauthorized, "unauthorized")
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
				ceilingProblem(w, http.StatusBadRequest, "invalid_request")
				return
			}
			f := fence.Add(1)
			token := "ceiling-" + strconv.FormatInt(f, 10)
			if lk != nil {
				ttl := 30 * time.Second // the gateway's default lease
				if body.TTLMS > 0 {
					ttl = time.Duration(body.TTLMS) * time.Millisecond
				}
				var taken bool
				var err error
				if token, taken, err = lk.acquire(r.Context(), plainKey(ns, name), ttl); err != nil {
					ceilingProblem(w, http.StatusServiceUnavailable, "backend_unavailable")
					return
				}
				if !taken {
					ceilingProblem(w, http.StatusConflict, "lock_held")
					return
				}
			}
			out := fmt.Appendf(nil, `{"lock":%q,"token":%q,"fencing_token":%d,"ttl_ms":%d,"expires_at":%q}`+"\n",
				ns+"/"+name, token, f, body.TTLMS, time.Now().Add(time.Duration(body.TTLMS)*time.Millisecond).UTC().Format(time.RFC3339Nano))
			w.Header().Set("Content-Type", "application/json")
			w.Header().Set("Content-Length", strconv.Itoa(len(out)))
			w.WriteHeader(http.StatusCreated)
			w.Write(out)
		case http.MethodDelete:
			token := r.Header.Get("Lock-Token")
			if token == "" {
				w.WriteHeader(http.StatusBadRequest)
				return
			}
			if lk != nil {
				released, err := lk.release(r.Context(), plainKey(ns, name), token)
				if err != nil {
					ceilingProblem(w, http.StatusServiceUnavailable, "backend_unavailable")
					return
				}
				if !released {
					ceilingProblem(w, http.StatusConflict, "not_holder")
					return
				}
			}
			w.WriteHeader(http.StatusNoContent)
		default:
			w.WriteHeader(http.StatusMethodNotAllowed)
		}
	})
}

// ceilingProblem answers a problem+json of code alone.
func ceilingProblem(w http.ResponseWriter, status int, code string) {
	w.Header().Set("Content-Type", "application/problem+json")
	w.WriteHeader(status)
	io.WriteString(w, `{"code":"`+code+`"}`)
}
