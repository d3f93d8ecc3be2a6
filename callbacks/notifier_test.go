package callbacks

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/rs/zerolog"
)

// received is one request a test receiver got.
type received struct {
	header http.Header
	body   []byte
	at     time.Time
}

// countingListener counts the connections accepted.
type countingListener struct {
	net.Listener
	conns atomic.Int64
}

func (l *countingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err == nil {
		l.conns.Add(1)
	}
	return c, err
}

// receiver starts a loopback server that answers status(n) to its nth
// request (from 1), and sends what it got on the returned channel.
func receiver(t *testing.T, status func(n int) int) (*httptest.Server, *countingListener, <-chan received) {
	t.Helper()
	ch := make(chan received, 16)
	var n atomic.Int64
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		ch <- received{header: r.Header.Clone(), body: b, at: time.Now()}
		w.WriteHeader(status(int(n.Add(1))))
	}))
	cl := &countingListener{Listener: srv.Listener}
	srv.Listener = cl
	srv.Start()
	t.Cleanup(srv.Close)
	return srv, cl, ch
}

func newNotifier(t *testing.T, patterns []string, logs io.Writer) (*Notifier, Secret) {
	t.Helper()
	allow, err := ParseAllowList(patterns)
	if err != nil {
		t.Fatal(err)
	}
	if logs == nil {
		logs = io.Discard
	}
	secret := NewSecret()
	n, err := New(Config{Allow: allow, Secret: secret, AttemptTimeout: time.Second,
		Logger: zerolog.New(logs).Level(zerolog.DebugLevel)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(n.Close)
	return n, secret
}

func handed(t *testing.T, n *Notifier, rawURL string, within time.Duration) {
	t.Helper()
	d, err := n.Check(rawURL)
	if err != nil {
		t.Fatalf("Check(%q): %v", rawURL, err)
	}
	n.Notify(Handed{Dest: d, Lock: "ns/name", Ticket: "tkt1", PollURL: "/locks/ns/name/tickets/tkt1", PickUpBy: time.Now().Add(within)})
}

func waitFor(t *testing.T, ch <-chan received, d time.Duration) received {
	t.Helper()
	select {
	case r := <-ch:
		return r
	case <-time.After(d):
		t.Fatalf("no callback within %v", d)
	}
	return received{}
}

// eventually polls cond until it holds, within 5s.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within 5s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func counted(n *Notifier, outcome string) float64 { return value(n.total, outcome) }

func value(v *prometheus.CounterVec, label string) float64 {
	var m dto.Metric
	if err := v.WithLabelValues(label).Write(&m); err != nil {
		panic(err)
	}
	return m.GetCounter().GetValue()
}

func TestNotifyDeliversSigned(t *testing.T) {
	srv, _, got := receiver(t, func(int) int { return http.StatusNoContent })
	var logs bytes.Buffer
	n, operator := newNotifier(t, []string{srv.URL + "/*"}, &logs)
	handed(t, n, srv.URL+"/hook?key=receiver-secret", time.Minute)
	r := waitFor(t, got, 5*time.Second)
	secret := n.TicketSecret("ns/name", "tkt1")
	if err := Verify(secret, r.header, r.body, time.Now(), 5*time.Minute); err != nil {
		t.Fatalf("verify: %v", err)
	}
	for name, other := range map[string]Secret{
		"another secret":          NewSecret(),
		"the operator's secret":   operator,
		"another ticket's secret": n.TicketSecret("ns/name", "tkt2"),
		"another lock's secret":   n.TicketSecret("ns/other", "tkt1"),
	} {
		if err := Verify(other, r.header, r.body, time.Now(), 5*time.Minute); err == nil {
			t.Errorf("verify with %s: got nil, want an error", name)
		}
	}
	tampered := bytes.Replace(r.body, []byte("tkt1"), []byte("tkt2"), 1)
	if err := Verify(secret, r.header, tampered, time.Now(), 5*time.Minute); err == nil {
		t.Fatal("verify a changed body: got nil, want an error")
	}
	if err := Verify(secret, r.header, r.body, time.Now().Add(10*time.Minute), 5*time.Minute); err == nil {
		t.Fatal("verify 10 min later: got nil, want an error")
	}
	var b body
	if err := json.Unmarshal(r.body, &b); err != nil {
		t.Fatal(err)
	}
	if b.Type != TypeTicketGranted || b.Data.Ticket != "tkt1" || b.Data.Lock != "ns/name" || b.Data.PollURL != "/locks/ns/name/tickets/tkt1" ||
		b.Data.PickUpWithinMs <= 0 || b.Data.PickUpWithinMs > 60000 {
		t.Fatalf("body %s", r.body)
	}
	eventually(t, "delivered counted", func() bool { return counted(n, OutcomeDelivered) == 1 })
	n.Close()
	for _, secretText := range []string{operator.Encode(), secret.Encode(), "receiver-secret"} {
		if strings.Contains(logs.String(), secretText) {
			t.Fatalf("logs hold a secret: %s", logs.String())
		}
	}
}

// TestNotifyRetriesWithTheSameID: a receiver that fails twice gets the
// notification a third time, with the same webhook-id each time.
func TestNotifyRetriesWithTheSameID(t *testing.T) {
	srv, _, got := receiver(t, func(n int) int {
		if n <= 2 {
			return http.StatusInternalServerError
		}
		return http.StatusOK
	})
	n, _ := newNotifier(t, []string{srv.URL + "/*"}, nil)
	handed(t, n, srv.URL+"/hook", time.Minute)
	secret := n.TicketSecret("ns/name", "tkt1")
	var ids []string
	for range 3 {
		r := waitFor(t, got, 5*time.Second)
		if err := Verify(secret, r.header, r.body, time.Now(), 5*time.Minute); err != nil {
			t.Fatalf("verify: %v", err)
		}
		ids = append(ids, r.header.Get(HeaderID))
	}
	if ids[0] == "" || ids[0] != ids[1] || ids[1] != ids[2] {
		t.Fatalf("webhook-ids %v, want one id for every attempt", ids)
	}
	eventually(t, "delivered counted", func() bool { return counted(n, OutcomeDelivered) == 1 })
	if got := value(n.attempts, attemptStatus); got != 2 {
		t.Fatalf("failed attempts: got %v, want 2", got)
	}
}

// TestNotifyRefusesLoopbackByName: a name allowed by a pattern that
// resolves to loopback is never connected to.
func TestNotifyRefusesLoopbackByName(t *testing.T) {
	srv, conns, got := receiver(t, func(int) int { return http.StatusOK })
	n, _ := newNotifier(t, []string{"http://localhost:*/*"}, nil)
	port := srv.URL[strings.LastIndex(srv.URL, ":")+1:]
	handed(t, n, "http://localhost:"+port+"/hook", time.Minute)
	eventually(t, "refused counted", func() bool { return counted(n, OutcomeRefused) == 1 })
	select {
	case r := <-got:
		t.Fatalf("the receiver got %s", r.body)
	default:
	}
	if c := conns.conns.Load(); c != 0 {
		t.Fatalf("connections to the receiver: got %d, want 0", c)
	}
}

// TestNotifyDoesNotFollowRedirects: a 3xx is a failed attempt, and its
// target is never called.
func TestNotifyDoesNotFollowRedirects(t *testing.T) {
	target, _, targetGot := receiver(t, func(int) int { return http.StatusOK })
	redirects := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		redirects++
		http.Redirect(w, r, target.URL+"/stolen", http.StatusTemporaryRedirect)
	}))
	t.Cleanup(srv.Close)
	n, _ := newNotifier(t, []string{srv.URL + "/*"}, nil)
	handed(t, n, srv.URL+"/hook", 600*time.Millisecond)
	eventually(t, "expired counted", func() bool { return counted(n, OutcomeExpired) == 1 })
	select {
	case r := <-targetGot:
		t.Fatalf("the redirect's target got %s", r.body)
	default:
	}
	if got := value(n.attempts, attemptStatus); got < 1 {
		t.Fatalf("attempts answered 3xx: got %v, want at least 1", got)
	}
}

// TestCloseDropsWaitingRetries: Close ends a notification waiting for its
// retry, counted failed, and a Notify after it is failed too.
func TestCloseDropsWaitingRetries(t *testing.T) {
	srv, _, got := receiver(t, func(int) int { return http.StatusServiceUnavailable })
	n, _ := newNotifier(t, []string{srv.URL + "/*"}, nil)
	handed(t, n, srv.URL+"/hook", time.Minute)
	waitFor(t, got, 5*time.Second)
	eventually(t, "a retry waiting", func() bool { n.mu.Lock(); defer n.mu.Unlock(); return len(n.timers) == 1 })
	n.Close()
	handed(t, n, srv.URL+"/hook", time.Minute)
	if got := counted(n, OutcomeFailed); got != 2 {
		t.Fatalf("failed: got %v, want 2", got)
	}
}

func TestBackoffGrowsAndStaysBounded(t *testing.T) {
	for i := 1; i <= 20; i++ {
		max := 30 * time.Second
		if i < 8 {
			max = 250 * time.Millisecond << (i - 1)
		}
		if d := backoff(i); d <= max/2 || d > max {
			t.Errorf("backoff(%d) = %v, want in (%v, %v]", i, d, max/2, max)
		}
	}
}

func TestSecretParse(t *testing.T) {
	s := NewSecret()
	got, err := ParseSecret(s.Encode())
	if err != nil || !bytes.Equal(got.key, s.key) {
		t.Fatalf("round trip: %v", err)
	}
	if fmt.Sprint(s) == s.Encode() || strings.Contains(fmt.Sprintf("%v %+v", s, s), s.Encode()[6:]) {
		t.Fatal("a printed secret shows its key")
	}
	// A ticket's secret is one a receiver parses as it parses any.
	if got, err := ParseSecret(s.ForTicket("ns/name", "tkt1").Encode()); err != nil || !bytes.Equal(got.key, s.ForTicket("ns/name", "tkt1").key) {
		t.Fatalf("a ticket's secret, round trip: %v", err)
	}
	for _, bad := range []string{"", "abc", "whsec_!!", "whsec_c2hvcnQ="} {
		if _, err := ParseSecret(bad); err == nil {
			t.Errorf("ParseSecret(%q): got nil, want an error", bad)
		}
	}
}
