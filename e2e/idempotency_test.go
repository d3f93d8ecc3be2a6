package e2e

import (
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/lockgate/lockgate/internal/redistest"
)

// TestIdempotencyKeyAcrossGateways: with two gateways on one Redis, a
// retry with the same Idempotency-Key reaches the other gateway and gets
// the same grant; another body is a 422; a retry while the first call
// waits is a 409 idempotency_in_progress; a retry after the release is a
// 409 grant_ended. Permits as locks.
func TestIdempotencyKeyAcrossGateways(t *testing.T) {
	t.Parallel()
	t.Run("redis", func(t *testing.T) {
		u := redistest.Start(t).URL()
		idempotencyAcross(t, []string{"--redis-url", u}, []string{"--redis-url", u})
	})
	t.Run("cluster", func(t *testing.T) {
		c := redistest.StartCluster(t, 3)
		idempotencyAcross(t,
			[]string{"--redis-cluster", "--redis-url", "redis://" + c.Nodes[0].Addr},
			[]string{"--redis-cluster", "--redis-url", "redis://" + c.Nodes[1].Addr})
	})
}

func idempotencyAcross(t *testing.T, args1, args2 []string) {
	gw1 := startGateway(t, args1...)
	gw2 := startGateway(t, args2...)
	auth := bearer(token(t, nil))
	idem := func(k string) []string { return with(auth, []string{"Idempotency-Key", k}) }

	t.Run("Lost201", func(t *testing.T) {
		path := "/locks/idem/lost"
		const key, body = "5c0ffa5e-lost-201", `{"ttl_ms":60000,"owner":"job-1"}`
		// The first answer never reaches the caller: it sends the acquire,
		// and hangs up once the lock is taken, without reading a byte.
		lose201(t, gw1.URL+path, body, with(auth, []string{"Idempotency-Key", key}))
		var held struct {
			FencingToken int64 `json:"fencing_token"`
			Owner        string
		}
		wantJSON(t, call(t, "GET", gw2.URL+path, "", auth...), http.StatusOK, &held)

		// The lock is held once the acquire's script ran; the first call
		// records the grant for its key just after, and until then a retry
		// is told to ask again (idempotency_in_progress), as any client is.
		var g grant
		wantJSON(t, retryInProgress(t, func() response { return call(t, "POST", gw2.URL+path, body, idem(key)...) }), http.StatusCreated, &g)
		if g.FencingToken != held.FencingToken || g.TTLMs <= 0 || g.TTLMs > 60000 || g.Lock != "idem/lost" {
			t.Fatalf("retry on gateway 2: got %+v, want the grant of fencing token %d, with what remains of 60 s", g, held.FencingToken)
		}
		// Quoted as a structured-field string, it is the same key.
		var again grant
		wantJSON(t, call(t, "POST", gw1.URL+path, body, idem(`"`+key+`"`)...), http.StatusCreated, &again)
		if again.Token != g.Token || again.FencingToken != g.FencingToken || again.TTLMs > g.TTLMs {
			t.Fatalf("retry with the quoted key: got fencing token %d, ttl %d, want %d and at most %d",
				again.FencingToken, again.TTLMs, g.FencingToken, g.TTLMs)
		}

		p := wantProblem(t, call(t, "POST", gw1.URL+path, `{"ttl_ms":30000}`, idem(key)...),
			http.StatusUnprocessableEntity, "idempotency_key_mismatch")
		if strings.Contains(p.Detail, key) {
			t.Fatalf("the problem repeats the key: %s", p.Detail)
		}

		// The replayed token is the holder's: it releases the lock.
		if r := call(t, "DELETE", gw1.URL+path, "", with(auth, []string{"Lock-Token", g.Token})...); r.status != http.StatusNoContent {
			t.Fatalf("release with the replayed token: got %d %s", r.status, r.body)
		}
		p = wantProblem(t, call(t, "POST", gw2.URL+path, body, idem(key)...), http.StatusConflict, "grant_ended")
		if !strings.Contains(p.Detail, "new key") {
			t.Fatalf("grant_ended detail: got %q, want it to say to use a new key", p.Detail)
		}
		acquire(t, gw2.URL+path, "") // the lock is free
	})

	t.Run("InProgressWhileWaiting", func(t *testing.T) {
		path := "/locks/idem/queue"
		holder := acquire(t, gw2.URL+path, `{"ttl_ms":60000}`)
		const key, body = "in-progress", `{"ttl_ms":60000,"wait_ms":30000}`
		first := callAsync(t, "POST", gw1.URL+path, body, idem(key)...)
		// Queued in the lock, not counted in gw1's waiters gauge: the gauge
		// counts the call before its pending record is written, and a
		// retry that overtakes the record owns the key. The call queues
		// only after it wrote the record.
		waitForQueued(t, gw1.URL+path, 1)

		r := call(t, "POST", gw2.URL+path, body, idem(key)...)
		p := wantProblem(t, r, http.StatusConflict, "idempotency_in_progress")
		if r.header.Get("Retry-After") != "1" || p.RetryAfterMs == nil || *p.RetryAfterMs <= 0 || *p.RetryAfterMs > 1000 {
			t.Fatalf("in progress: got Retry-After %q and retry_after_ms %v, want 1 and (0, 1000]", r.header.Get("Retry-After"), p.RetryAfterMs)
		}
		wantProblem(t, call(t, "POST", gw2.URL+path, `{"ttl_ms":1000,"wait_ms":30000}`, idem(key)...),
			http.StatusUnprocessableEntity, "idempotency_key_mismatch")

		if r := call(t, "DELETE", gw2.URL+path, "", with(auth, []string{"Lock-Token", holder.Token})...); r.status != http.StatusNoContent {
			t.Fatalf("release: got %d %s", r.status, r.body)
		}
		var g, retry grant
		select {
		case r := <-first:
			wantJSON(t, r, http.StatusCreated, &g)
		case <-time.After(10 * time.Second):
			t.Fatal("the waiter was not served within 10 s of the release")
		}
		wantJSON(t, call(t, "POST", gw2.URL+path, body, idem(key)...), http.StatusCreated, &retry)
		if retry.Token != g.Token || retry.FencingToken != g.FencingToken {
			t.Fatalf("retry after the wait: got fencing token %d, want the waiter's %d", retry.FencingToken, g.FencingToken)
		}
	})

	t.Run("NotGrantedLeavesNothing", func(t *testing.T) {
		path := "/locks/idem/refused"
		holder := acquire(t, gw1.URL+path, `{"ttl_ms":60000}`)
		wantProblem(t, call(t, "POST", gw1.URL+path, "", idem("refused")...), http.StatusConflict, "lock_held")
		call(t, "DELETE", gw1.URL+path, "", with(auth, []string{"Lock-Token", holder.Token})...)
		var g grant
		wantJSON(t, call(t, "POST", gw2.URL+path, "", idem("refused")...), http.StatusCreated, &g)
		if g.FencingToken <= holder.FencingToken {
			t.Fatalf("the retry after a 409 got fencing token %d, want a new grant after %d", g.FencingToken, holder.FencingToken)
		}
	})

	t.Run("Permit", func(t *testing.T) {
		path := "/semaphores/idem/pool"
		const body = `{"limit":3,"ttl_ms":60000}`
		var g, retry grant
		wantJSON(t, call(t, "POST", gw1.URL+path, body, idem("permit")...), http.StatusCreated, &g)
		wantJSON(t, call(t, "POST", gw2.URL+path, body, idem("permit")...), http.StatusCreated, &retry)
		if retry.Token != g.Token || retry.FencingToken != g.FencingToken {
			t.Fatalf("permit retry: got fencing token %d, want %d", retry.FencingToken, g.FencingToken)
		}
		var info struct {
			Holders []struct{} `json:"holders"`
		}
		wantJSON(t, call(t, "GET", gw2.URL+path, "", auth...), http.StatusOK, &info)
		if len(info.Holders) != 1 {
			t.Fatalf("got %d permits taken, want 1", len(info.Holders))
		}
		wantProblem(t, call(t, "POST", gw2.URL+path, `{"limit":4,"ttl_ms":60000}`, idem("permit")...),
			http.StatusUnprocessableEntity, "idempotency_key_mismatch")
	})
}

// lose201 sends an acquire on a connection of its own, waits until the
// lock is held, and closes the connection without reading the answer.
func lose201(t *testing.T, target, body string, headers []string) {
	t.Helper()
	u, err := url.Parse(target)
	if err != nil {
		t.Fatal(err)
	}
	conn, err := net.Dial("tcp", u.Host)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	var req strings.Builder
	fmt.Fprintf(&req, "POST %s HTTP/1.1\r\nHost: %s\r\nContent-Length: %d\r\n", u.Path, u.Host, len(body))
	for i := 0; i+1 < len(headers); i += 2 {
		fmt.Fprintf(&req, "%s: %s\r\n", headers[i], headers[i+1])
	}
	req.WriteString("\r\n" + body)
	if _, err := conn.Write([]byte(req.String())); err != nil {
		t.Fatal(err)
	}
	auth := headers[:2]
	pollUntil(t, "the lost acquire to take the lock", func() bool {
		return call(t, "GET", target, "", auth...).status == http.StatusOK
	})
}

// TestIdempotencyKeyHeader: the header's forms, what is refused (without
// repeating the key), and that other methods ignore it.
func TestIdempotencyKeyHeader(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, b backend) {
		gw := startGateway(t, b.args(t)...)
		auth := bearer(token(t, nil))
		url := gw.URL + "/locks/idem/header"
		secret := "s3cr3t-idempotency-key"
		for name, k := range map[string]string{
			"empty":             "",
			"too long":          strings.Repeat("k", 256),
			"quoted, too long":  `"` + strings.Repeat("k", 256) + `"`,
			"space":             secret + " x",
			"non-ASCII":         secret + "é",
			"unterminated":      `"` + secret,
			"bad escape":        `"` + secret + `\n"`,
			"quote inside":      `"` + secret + `"x"`,
			"empty quoted":      `""`,
			"quoted with space": `"` + secret + ` x"`,
		} {
			r := call(t, "POST", url, "", with(auth, []string{"Idempotency-Key", k})...)
			p := wantProblem(t, r, http.StatusBadRequest, "invalid_request")
			if strings.Contains(string(r.body), secret) {
				t.Errorf("%s: the 400 repeats the key: %s", name, p.Detail)
			}
		}
		// Escapes are undone: "a\"b" is the key a"b.
		var g, again grant
		wantJSON(t, call(t, "POST", url, "", with(auth, []string{"Idempotency-Key", `"a\"b\\c"`})...), http.StatusCreated, &g)
		wantJSON(t, call(t, "POST", url, "", with(auth, []string{"Idempotency-Key", `a"b\c`})...), http.StatusCreated, &again)
		if again.Token != g.Token {
			t.Fatal(`"a\"b\\c" and a"b\c are not the same key`)
		}
		// Not with a Lock-Token: a retried re-entry would take a hold more.
		wantProblem(t, call(t, "POST", url, "", with(auth, []string{"Lock-Token", g.Token}, []string{"Idempotency-Key", "x"})...),
			http.StatusBadRequest, "invalid_request")
		// Accepted and ignored elsewhere.
		withKey := []string{"Idempotency-Key", "ignored, even when invalid: spaces, é"}
		if r := call(t, "GET", url, "", with(auth, withKey)...); r.status != http.StatusOK {
			t.Fatalf("GET with a key: got %d %s", r.status, r.body)
		}
		if r := call(t, "PUT", url+"/lease", "", with(auth, withKey, []string{"Lock-Token", g.Token})...); r.status != http.StatusOK {
			t.Fatalf("PUT with a key: got %d %s", r.status, r.body)
		}
		if r := call(t, "DELETE", url, "", with(auth, withKey, []string{"Lock-Token", g.Token})...); r.status != http.StatusNoContent {
			t.Fatalf("DELETE with a key: got %d %s", r.status, r.body)
		}
		if err := gw.stop(); err != nil {
			t.Fatal(err)
		}
		if strings.Contains(gw.logs.String(), secret) || strings.Contains(gw.logs.String(), `a"b`) {
			t.Fatal("the logs hold an idempotency key")
		}
	})
}

// retryInProgress calls send until its answer is not 409
// idempotency_in_progress, for at most 10 s, as the answer's Retry-After
// tells a client to.
func retryInProgress(t *testing.T, send func() response) response {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		r := send()
		if r.status != http.StatusConflict || !strings.Contains(string(r.body), `"idempotency_in_progress"`) || time.Now().After(deadline) {
			return r
		}
		time.Sleep(50 * time.Millisecond) // shorter than the Retry-After it was given: this is a test
	}
}
