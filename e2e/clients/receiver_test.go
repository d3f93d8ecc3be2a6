package clients

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/lockgate/lockgate/callbacks"
)

// receiverBlock is the README block that writes receiver.py, the receiver
// a reader pastes, and runs it against a gateway (TestREADME).
const receiverBlock = "Callbacks instead of polling#2"

// TestREADMEReceiver runs the README's receiver.py against notifications
// the test signs, as the gateway does, with the ticket's secret. Those that
// do not verify with it (another ticket's secret, no signature, a body
// changed after signing) get a 400, print nothing and leave it listening;
// the one that verifies gets a 204, its ticket id printed, and the
// receiver exits 0 without following poll_url, which points at a listener
// that must see no request.
func TestREADMEReceiver(t *testing.T) {
	t.Parallel()
	lookPaths(t, "python3")
	port := freePort(t)
	script := filepath.Join(t.TempDir(), "receiver.py")
	if err := os.WriteFile(script, []byte(strings.ReplaceAll(readmeReceiver(t), "8090", port)), 0o600); err != nil {
		t.Fatal(err)
	}
	var followed atomic.Int32
	trap := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { followed.Add(1) }))
	t.Cleanup(trap.Close)

	const lock, ticket = "demo/hooked", "jghkNdPMI8AMf42CpRX6Kw"
	secret := callbacks.NewSecret().ForTicket(lock, ticket).Encode()
	other := callbacks.NewSecret().ForTicket(lock, "Q0tHZXJ3b3JrZXJzLXR3bw").Encode()
	body, err := json.Marshal(map[string]any{"type": "ticket.granted", "timestamp": time.Now().UTC().Format(time.RFC3339Nano),
		"data": map[string]any{"lock": lock, "ticket": ticket, "poll_url": trap.URL + "/locks/demo/hooked/tickets/" + ticket, "pick_up_within_ms": 119998}})
	if err != nil {
		t.Fatal(err)
	}

	// Its stdout is a file, as in the README: what it printed before it
	// answered is in the file when the answer arrives.
	stdout, err := os.Create(filepath.Join(t.TempDir(), "received.txt"))
	if err != nil {
		t.Fatal(err)
	}
	defer stdout.Close()
	printed := func() string {
		b, err := os.ReadFile(stdout.Name())
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	var stderr bytes.Buffer
	cmd := exec.Command("python3", "-B", script)
	cmd.Dir = filepath.Dir(examples) // the clone, where the README runs it
	cmd.Env = append(os.Environ(), "CALLBACK_SECRET="+secret)
	cmd.Stdout, cmd.Stderr = stdout, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGKILL)
		<-exited
	})

	url := "http://127.0.0.1:" + port + "/lockgate"
	for _, tc := range []struct {
		name    string
		headers http.Header
		body    []byte
	}{
		{"another ticket's secret", signNote(t, other, body), body},
		{"no signature", http.Header{"Webhook-Id": {"msg_1"}, "Webhook-Timestamp": {strconv.FormatInt(time.Now().Unix(), 10)}}, body},
		{"body changed after signing", signNote(t, secret, body), bytes.Replace(body, []byte(ticket), []byte("AAAAAAAAAAAAAAAAAAAAAA"), 1)},
	} {
		if got := postNote(t, url, tc.headers, tc.body, exited); got != http.StatusBadRequest {
			t.Errorf("%s: the receiver answered %d, want 400", tc.name, got)
		}
		// It prints before it answers: anything printed is here by now.
		if got := printed(); got != "" {
			t.Errorf("%s: the receiver printed %q, want nothing", tc.name, got)
		}
	}
	if got := postNote(t, url, signNote(t, secret, body), body, exited); got != http.StatusNoContent {
		t.Fatalf("a notification signed with the ticket's secret: the receiver answered %d, want 204", got)
	}
	select {
	case err := <-exited:
		exited <- err // for the cleanup
		if err != nil {
			t.Errorf("the receiver exited with %v, want 0; stderr:\n%s", err, &stderr)
		}
	case <-time.After(60 * time.Second): // a guard against a hang, not a pass criterion
		t.Fatal("the receiver did not exit after a notification that verified")
	}
	if got, want := printed(), ticket+"\n"; got != want {
		t.Errorf("the receiver printed %q, want %q", got, want)
	}
	if n := followed.Load(); n != 0 {
		t.Errorf("the receiver sent %d requests to the notification's poll_url, want none", n)
	}
	if stderr.Len() > 0 {
		t.Errorf("the receiver wrote to stderr:\n%s", &stderr)
	}
}

// readmeReceiver returns receiver.py as the README writes it.
func readmeReceiver(t *testing.T) string {
	t.Helper()
	for _, b := range readmeShBlocks(t) {
		if b.id() != receiverBlock {
			continue
		}
		_, rest, ok := strings.Cut(b.text, "cat >receiver.py <<'EOF'\n")
		script, _, ok2 := strings.Cut(rest, "\nEOF\n")
		if !ok || !ok2 {
			t.Fatalf("%s writes no receiver.py with cat >receiver.py <<'EOF' ... EOF:\n%s", receiverBlock, b.text)
		}
		return script + "\n"
	}
	t.Fatalf("the README has no block %s", receiverBlock)
	return ""
}

// signNote returns the headers the gateway sends with body, signed with
// secret (whsec_ and base64) as Standard Webhooks sign, and checks them
// with the gateway's own verifier, so that the test signs as the gateway
// does.
func signNote(t *testing.T, secret string, body []byte) http.Header {
	t.Helper()
	key, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(secret, "whsec_"))
	if err != nil {
		t.Fatal(err)
	}
	id, ts := "msg_"+strconv.Itoa(len(body)), strconv.FormatInt(time.Now().Unix(), 10)
	mac := hmac.New(sha256.New, key)
	mac.Write([]byte(id + "." + ts + "."))
	mac.Write(body)
	h := http.Header{}
	h.Set(callbacks.HeaderID, id)
	h.Set(callbacks.HeaderTimestamp, ts)
	h.Set(callbacks.HeaderSignature, "v1,"+base64.StdEncoding.EncodeToString(mac.Sum(nil)))
	s, err := callbacks.ParseSecret(secret)
	if err != nil {
		t.Fatal(err)
	}
	if err := callbacks.Verify(s, h, body, time.Now(), time.Minute); err != nil {
		t.Fatalf("the test signs otherwise than the gateway: %v", err)
	}
	return h
}

// postNote POSTs a notification to the receiver at url, once it listens,
// and returns the status it answered.
func postNote(t *testing.T, url string, h http.Header, body []byte, exited chan error) int {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		req, err := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header = h.Clone()
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			resp.Body.Close()
			return resp.StatusCode
		}
		select {
		case werr := <-exited:
			exited <- werr
			t.Fatalf("the receiver exited (%v) before it answered: %v", werr, err)
		default:
		}
		if !errors.Is(err, syscall.ECONNREFUSED) || time.Now().After(deadline) {
			t.Fatalf("POST %s: %v", url, err)
		}
		time.Sleep(20 * time.Millisecond) // poll interval until it listens, not synchronisation
	}
}
