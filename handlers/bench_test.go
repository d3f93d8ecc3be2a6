package handlers

import (
	"bytes"
	"io"
	"net/http"
	"net/url"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/rs/zerolog"

	"github.com/lockgate/lockgate/grantsig"
	"github.com/lockgate/lockgate/locks/embedded"
)

// BenchmarkAcquireRelease is one uncontended cycle, an acquire and its
// release, through the whole handler (access log, metrics, routing, the
// gate, the generated code, the answer) on the embedded backend, without
// net/http's connection handling. Its allocs/op is the gateway's own
// share of the allocations per cycle, the steadier signal on a busy box.
// It logs as lockbench runs the gateway (LOCKGATE_LOG_LEVEL=warn), to a
// writer that discards.
//
// Its sub-benchmarks are the ways a grant is signed or not: with no
// signer (--grant-keys off); with one, the default (--sign-grants
// on-request) for a call that does not ask; the same for a call that asks
// ("signed": true); and every grant (always), as every grant was before
// signing became a call's choice.
func BenchmarkAcquireRelease(b *testing.B) {
	const plain, asked = `{"ttl_ms":30000,"wait_ms":0,"owner":"lockbench"}`, `{"ttl_ms":30000,"wait_ms":0,"owner":"lockbench","signed":true}`
	k, _ := grantsig.Generate()
	signer, _ := grantsig.NewSigner("bench", []grantsig.Key{k})
	b.Run("signing=off", func(b *testing.B) { benchAcquireRelease(b, Config{}, plain) })
	b.Run("signing=on-request", func(b *testing.B) { benchAcquireRelease(b, Config{Signer: signer}, plain) })
	b.Run("signing=on-request,asked", func(b *testing.B) { benchAcquireRelease(b, Config{Signer: signer}, asked) })
	b.Run("signing=always", func(b *testing.B) { benchAcquireRelease(b, Config{Signer: signer, SignAll: true}, plain) })
}

// benchAcquireRelease runs cycles through the handler of cfg, on the
// embedded backend, each acquire with body.
func benchAcquireRelease(b *testing.B, cfg Config, acquireBody string) {
	mem := embedded.New(embedded.Options{})
	b.Cleanup(func() { mem.Close() })
	cfg.Backend, cfg.Logger = mem, zerolog.New(io.Discard).Level(zerolog.WarnLevel)
	_, h := newTestHandler(b, cfg)
	tok, err := jwt.NewWithClaims(jwt.SigningMethodHS256, jwt.MapClaims{
		"sub": "bench", "ns": []string{"*"}, "exp": time.Now().Add(time.Hour).Unix(),
	}).SignedString([]byte(testSecret))
	if err != nil {
		b.Fatal(err)
	}
	auth := []string{"Bearer " + tok}
	u := &url.URL{Path: "/locks/bench/cycle"}
	body := []byte(acquireBody)
	var (
		w      benchWriter
		reader bytes.Reader
		grant  struct {
			Token string `json:"token"`
		}
	)
	b.ReportAllocs()
	for b.Loop() {
		reader.Reset(body)
		acq := &http.Request{Method: http.MethodPost, URL: u, RequestURI: u.Path, Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
			Header: http.Header{"Authorization": auth, "Content-Type": {"application/json"}},
			Body:   io.NopCloser(&reader), ContentLength: int64(len(body))}
		w.reset()
		h.ServeHTTP(&w, acq)
		if w.status != http.StatusCreated {
			b.Fatalf("acquire: got %d %s, want 201", w.status, w.body.Bytes())
		}
		grant.Token = ""
		if err := jsonUnmarshalToken(w.body.Bytes(), &grant.Token); err != nil {
			b.Fatal(err)
		}
		rel := &http.Request{Method: http.MethodDelete, URL: u, RequestURI: u.Path, Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
			Header: http.Header{"Authorization": auth, "Lock-Token": {grant.Token}}, Body: http.NoBody}
		w.reset()
		h.ServeHTTP(&w, rel)
		if w.status != http.StatusNoContent {
			b.Fatalf("release: got %d %s, want 204", w.status, w.body.Bytes())
		}
	}
}

// jsonUnmarshalToken finds the token of a grant without encoding/json, so
// that the benchmark's own allocations stay out of the count.
func jsonUnmarshalToken(body []byte, token *string) error {
	const key = `"token":"`
	i := bytes.Index(body, []byte(key))
	if i < 0 {
		return io.ErrUnexpectedEOF
	}
	rest := body[i+len(key):]
	j := bytes.IndexByte(rest, '"')
	if j < 0 {
		return io.ErrUnexpectedEOF
	}
	*token = string(rest[:j])
	return nil
}

// benchWriter is a reusable http.ResponseWriter and http.Flusher.
type benchWriter struct {
	header http.Header
	status int
	body   bytes.Buffer
}

func (w *benchWriter) reset() {
	if w.header == nil {
		w.header = make(http.Header)
	}
	clear(w.header)
	w.status = 0
	w.body.Reset()
}

func (w *benchWriter) Header() http.Header { return w.header }

func (w *benchWriter) WriteHeader(status int) {
	if w.status == 0 {
		w.status = status
	}
}

func (w *benchWriter) Write(p []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.body.Write(p)
}

func (w *benchWriter) Flush() {}
