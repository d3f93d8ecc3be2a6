package main

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/lockgate/lockgate/cmd/gateway/app"
	"github.com/lockgate/lockgate/internal/gatewaytest"
	"github.com/lockgate/lockgate/internal/redistest"
)

// TestLogIsJSONAcrossRedisOutage runs the gateway binary on a Redis that
// dies and comes back, and checks that everything it wrote to stderr is
// one JSON object a line: the Redis client's own complaints included,
// which would otherwise go to stderr as plain text.
func TestLogIsJSONAcrossRedisOutage(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	const secret = "logs-test-secret-at-least-32-bytes-long"
	rs := redistest.Start(t)
	bin := filepath.Join(t.TempDir(), "gateway")
	if out, err := exec.CommandContext(t.Context(), "go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	cmd := exec.Command(bin, "--addr", "127.0.0.1:0", "--redis-url", rs.URL(), "--redis-timeout", "500ms")
	cmd.Env = append(os.Environ(), "LOCKGATE_JWT_SECRET="+secret)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var logs gatewaytest.Buffer
	cmd.Stderr = &logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() {
		cmd.Wait()
		close(exited)
	}()
	t.Cleanup(func() {
		cmd.Process.Kill() // by PID; a no-op once it has exited
		<-exited
	})
	url, err := app.WaitListening(stdout)
	if err != nil {
		t.Fatalf("%v; logs:\n%s", err, logs.String())
	}

	tok, err := jwt.NewWithClaims(jwt.SigningMethodHS256, jwt.MapClaims{
		"sub": "tester", "ns": []string{"*"}, "exp": time.Now().Add(time.Hour).Unix(),
	}).SignedString([]byte(secret))
	if err != nil {
		t.Fatal(err)
	}
	acquire := func(name string) int {
		req, _ := http.NewRequest("POST", url+"/locks/logs/"+name, strings.NewReader(`{"ttl_ms":60000}`))
		req.Header.Set("Authorization", "Bearer "+tok)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode
	}
	if got := acquire("before"); got != http.StatusCreated {
		t.Fatalf("acquire with Redis up: got %d, want 201", got)
	}

	rs.Stop()
	for i := range 5 {
		if got := acquire("during" + string(rune('a'+i))); got != http.StatusServiceUnavailable {
			t.Fatalf("acquire with Redis down: got %d, want 503", got)
		}
	}
	rs.Restart(t)
	deadline := time.Now().Add(20 * time.Second)
	for acquire("after") != http.StatusCreated {
		if time.Now().After(deadline) {
			t.Fatalf("no 201 within 20s of Redis coming back; logs:\n%s", logs.String())
		}
		time.Sleep(50 * time.Millisecond) // poll interval
	}

	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-exited:
	case <-time.After(20 * time.Second):
		t.Fatal("no exit within 20s of SIGTERM")
	}
	n, fromRedis := 0, 0
	for line := range bytes.Lines([]byte(logs.String())) {
		n++
		var v map[string]any
		if err := json.Unmarshal(line, &v); err != nil {
			t.Errorf("log line %d is not a JSON object: %q", n, line)
		}
		if v["component"] == "redis" {
			fromRedis++
		}
	}
	if fromRedis == 0 {
		t.Errorf("no line from the Redis client (component redis) in %d lines, though its dials failed:\n%s", n, logs.String())
	}
}
