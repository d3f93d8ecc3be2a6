package e2e

import (
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

	"github.com/lockgate/lockgate/callbacks"
)

// hook is a callback receiver on loopback: it answers status(n) to its
// nth request (from 1), sends each on got, and counts the connections
// made to it.
type hook struct {
	URL   string
	port  string
	got   chan hookCall
	conns atomic.Int64
}

type hookCall struct {
	header http.Header
	body   []byte
	at     time.Time
}

type countConns struct {
	net.Listener
	n *atomic.Int64
}

func (l countConns) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err == nil {
		l.n.Add(1)
	}
	return c, err
}

func startHook(t *testing.T, status func(n int) int) *hook {
	t.Helper()
	h := &hook{got: make(chan hookCall, 16)}
	var n atomic.Int64
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		h.got <- hookCall{header: r.Header.Clone(), body: b, at: time.Now()}
		w.WriteHeader(status(int(n.Add(1))))
	}))
	srv.Listener = countConns{Listener: srv.Listener, n: &h.conns}
	srv.Start()
	t.Cleanup(srv.Close)
	h.URL = srv.URL
	h.port = srv.URL[strings.LastIndex(srv.URL, ":")+1:]
	return h
}

// notification is a callback's body.
type notification struct {
	Type string `json:"type"`
	Data struct {
		Lock           string `json:"lock"`
		Ticket         string `json:"ticket"`
		PollURL        string `json:"poll_url"`
		PickUpWithinMs int64  `json:"pick_up_within_ms"`
	} `json:"data"`
}

// ticketSecret is the secret of tk's notifications, its 202's
// callback_secret.
func ticketSecret(t *testing.T, tk ticket) callbacks.Secret {
	t.Helper()
	s, err := callbacks.ParseSecret(tk.CallbackSecret)
	if err != nil {
		t.Fatalf("ticket %s: callback_secret: %v", tk.Ticket, err)
	}
	return s
}

// metricValue is the value /metrics shows for series, or -1.
func metricValue(t *testing.T, base, series string) float64 {
	t.Helper()
	for line := range strings.Lines(string(call(t, "GET", base+"/metrics", "").body)) {
		if rest, ok := strings.CutPrefix(line, series+" "); ok {
			var v float64
			fmt.Sscan(rest, &v)
			return v
		}
	}
	return -1
}

// TestCallbacks: a ticket with a callback_url: when a release hands the
// lock to it, the receiver gets a notification within 1 s that verifies
// with the ticket's callback_secret and names the ticket, not its token; the
// pick-up with the ticket token gets the grant. A name that resolves to
// loopback, though its pattern matches, is never connected to, and the
// metric says refused. A receiver that fails at first gets the same
// notification again. Bad callback URLs are 400s. No secret (the
// operator's, a ticket's) nor a ticket token is logged.
func TestCallbacks(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, b backend) {
		whsec := callbacks.NewSecret()
		// An IP pattern names its port: the receivers start first.
		delivered := startHook(t, func(int) int { return http.StatusNoContent })
		refused := startHook(t, func(int) int { return http.StatusNoContent })
		retried := startHook(t, func(n int) int {
			if n == 1 {
				return http.StatusInternalServerError
			}
			return http.StatusOK
		})
		env := map[string]string{
			"LOCKGATE_JWT_SECRET":      secret,
			"LOCKGATE_CALLBACK_SECRET": whsec.Encode(),
			"LOCKGATE_CALLBACK_ALLOW": fmt.Sprintf("%s/hooks/* %s/hooks/* http://127.0.0.1:1/hooks/* http://localhost:*/*",
				delivered.URL, retried.URL),
		}
		gw := startGatewayEnv(t, env, append(b.args(t), "--ticket-liveness", "10s")...)
		auth := bearer(token(t, nil))
		waitBody := func(cb string) string {
			return fmt.Sprintf(`{"ttl_ms":60000,"wait_ms":30000,"callback_url":%q}`, cb)
		}
		release := func(t *testing.T, path, tok string) time.Time {
			t.Helper()
			at := time.Now()
			if r := call(t, "DELETE", gw.URL+path, "", with(auth, []string{"Lock-Token", tok})...); r.status != http.StatusNoContent {
				t.Fatalf("release: got %d %s", r.status, r.body)
			}
			return at
		}
		var tokens []string

		t.Run("Delivered", func(t *testing.T) {
			h := delivered
			path := "/locks/callbacks/delivered"
			holder := acquire(t, gw.URL+path, `{"ttl_ms":60000}`)
			tk := openTicket(t, gw.URL+path, waitBody(h.URL+"/hooks/lock"), auth)
			tokens = append(tokens, tk.TicketToken, strings.TrimPrefix(tk.CallbackSecret, "whsec_"))
			released := release(t, path, holder.Token)
			var c hookCall
			select {
			case c = <-h.got:
			case <-time.After(5 * time.Second):
				t.Fatal("no callback within 5s of the release")
			}
			took := c.at.Sub(released)
			t.Logf("the callback came %v after the release", took)
			if took > time.Second {
				t.Errorf("the callback came %v after the release, want within 1s", took)
			}
			if err := callbacks.Verify(ticketSecret(t, tk), c.header, c.body, time.Now(), 5*time.Minute); err != nil {
				t.Fatalf("verify: %v", err)
			}
			var n notification
			if err := json.Unmarshal(c.body, &n); err != nil {
				t.Fatal(err)
			}
			if n.Type != "ticket.granted" || n.Data.Ticket != tk.Ticket || n.Data.Lock != "callbacks/delivered" || n.Data.PollURL != tk.location ||
				n.Data.PickUpWithinMs <= 0 || n.Data.PickUpWithinMs > 10000 {
				t.Fatalf("notification %s: want ticket %s at %s, with its pick-up time", c.body, tk.Ticket, tk.location)
			}
			if strings.Contains(string(c.body), tk.TicketToken) || strings.Contains(fmt.Sprint(c.header), tk.TicketToken) {
				t.Fatal("the notification holds the ticket token")
			}
			var g grant
			wantJSON(t, call(t, "GET", gw.URL+n.Data.PollURL, "", with(auth, []string{"Ticket-Token", tk.TicketToken})...), http.StatusCreated, &g)
			if g.Token != tk.TicketToken || g.FencingToken <= holder.FencingToken {
				t.Fatalf("pick-up: got %+v, want the grant of the ticket token after fencing token %d", g, holder.FencingToken)
			}
			release(t, path, g.Token)
			// The notifier counts the delivery once the receiver's answer is
			// read, which may come after the receiver has the callback.
			for deadline := time.Now().Add(5 * time.Second); ; {
				v := metricValue(t, gw.URL, `lockgate_callbacks_total{outcome="delivered"}`)
				if v == 1 {
					break
				}
				if v > 1 || time.Now().After(deadline) {
					t.Fatalf("delivered: got %v, want 1", v)
				}
				time.Sleep(5 * time.Millisecond) // poll interval, not synchronisation
			}
		})

		t.Run("RefusedByAddress", func(t *testing.T) {
			h := refused
			path := "/locks/callbacks/refused"
			holder := acquire(t, gw.URL+path, `{"ttl_ms":60000}`)
			// Allowed by http://localhost:*/*, but localhost is loopback,
			// which only a pattern naming the address allows.
			tk := openTicket(t, gw.URL+path, waitBody("http://localhost:"+h.port+"/hooks/lock"), auth)
			tokens = append(tokens, tk.TicketToken, strings.TrimPrefix(tk.CallbackSecret, "whsec_"))
			release(t, path, holder.Token)
			deadline := time.Now().Add(5 * time.Second)
			for metricValue(t, gw.URL, `lockgate_callbacks_total{outcome="refused"}`) != 1 {
				if time.Now().After(deadline) {
					t.Fatal("refused not counted within 5s")
				}
				time.Sleep(10 * time.Millisecond) // polling the metric
			}
			if n := h.conns.Load(); n != 0 {
				t.Fatalf("connections to the refused receiver: got %d, want 0", n)
			}
			var g grant
			wantJSON(t, pollTicket(t, gw.URL, tk, auth), http.StatusCreated, &g)
			release(t, path, g.Token)
		})

		t.Run("RetriedUntilDelivered", func(t *testing.T) {
			h := retried
			path := "/locks/callbacks/retried"
			holder := acquire(t, gw.URL+path, `{"ttl_ms":60000}`)
			tk := openTicket(t, gw.URL+path, waitBody(h.URL+"/hooks/lock"), auth)
			tokens = append(tokens, tk.TicketToken, strings.TrimPrefix(tk.CallbackSecret, "whsec_"))
			release(t, path, holder.Token)
			var ids []string
			for range 2 {
				select {
				case c := <-h.got:
					if err := callbacks.Verify(ticketSecret(t, tk), c.header, c.body, time.Now(), 5*time.Minute); err != nil {
						t.Fatalf("verify: %v", err)
					}
					ids = append(ids, c.header.Get("webhook-id"))
				case <-time.After(5 * time.Second):
					t.Fatalf("got %d callbacks within 5s, want 2", len(ids))
				}
			}
			if ids[0] != ids[1] {
				t.Fatalf("webhook-ids %v: want the same id on the retry", ids)
			}
			var g grant
			wantJSON(t, pollTicket(t, gw.URL, tk, auth), http.StatusCreated, &g)
			release(t, path, g.Token)
		})

		t.Run("BadInput", func(t *testing.T) {
			path := gw.URL + "/locks/callbacks/bad"
			holder := acquire(t, path, `{"ttl_ms":60000}`)
			for _, tc := range []struct {
				name, body string
				headers    []string
				detail     string
			}{
				{"OffTheList", waitBody("https://hooks.example.com/x"), respondAsync, "allow-list"},
				{"NotHTTPS", waitBody("http://hooks.example.com/hooks/x"), respondAsync, "allow-list"},
				{"OtherPath", waitBody("http://127.0.0.1:1/other"), respondAsync, "allow-list"},
				{"DotDot", waitBody("http://127.0.0.1:1/hooks/../admin"), respondAsync, "clean"},
				{"NotATicket", waitBody("http://127.0.0.1:1/hooks/x"), nil, "tickets only"},
				{"NoWait", `{"callback_url":"http://127.0.0.1:1/hooks/x"}`, respondAsync, "tickets only"},
			} {
				t.Run(tc.name, func(t *testing.T) {
					p := wantProblem(t, call(t, "POST", path, tc.body, with(auth, tc.headers)...), http.StatusBadRequest, "invalid_request")
					if !strings.Contains(p.Detail, tc.detail) || !strings.Contains(p.Detail, "callback") {
						t.Fatalf("detail %q, want it to say %q", p.Detail, tc.detail)
					}
				})
			}
			release(t, "/locks/callbacks/bad", holder.Token)
		})

		logs := gw.logs.String()
		for _, s := range append(tokens, whsec.Encode(), strings.TrimPrefix(whsec.Encode(), "whsec_")) {
			if strings.Contains(logs, s) {
				t.Fatalf("the logs hold a secret")
			}
		}
	})
}

// TestCallbacksNotAllowed: a gateway without --callback-allow refuses
// every callback_url with a 400 that says how to allow one.
func TestCallbacksNotAllowed(t *testing.T) {
	t.Parallel()
	gw := startGateway(t)
	auth := bearer(token(t, nil))
	r := call(t, "POST", gw.URL+"/locks/callbacks/none", `{"wait_ms":1000,"callback_url":"https://hooks.example.com/x"}`, with(auth, respondAsync)...)
	if p := wantProblem(t, r, http.StatusBadRequest, "invalid_request"); !strings.Contains(p.Detail, "--callback-allow") {
		t.Fatalf("detail %q, want it to name --callback-allow", p.Detail)
	}
}
