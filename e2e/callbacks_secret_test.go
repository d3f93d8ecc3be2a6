package e2e

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/lockgate/lockgate/callbacks"
)

// TestCallbacksSecretPerTicket: each ticket's notifications are signed
// with a secret of its own, which the 202 that opened it returns: the
// secret alice's receiver holds for her ticket verifies her notification
// and not bob's (so it cannot forge his either), neither secret is the
// operator's, a ticket without a callback_url gets none, and the logs
// hold none of them.
func TestCallbacksSecretPerTicket(t *testing.T) {
	t.Parallel()
	whsec := callbacks.NewSecret()
	aliceHook := startHook(t, func(int) int { return http.StatusNoContent })
	bobHook := startHook(t, func(int) int { return http.StatusNoContent })
	gw := startGatewayEnv(t, map[string]string{
		"LOCKGATE_JWT_SECRET":      secret,
		"LOCKGATE_CALLBACK_SECRET": whsec.Encode(),
		"LOCKGATE_CALLBACK_ALLOW":  fmt.Sprintf("%s/hooks/* %s/hooks/*", aliceHook.URL, bobHook.URL),
	}, "--ticket-liveness", "10s")
	holder := bearer(token(t, jwt.MapClaims{"sub": "holder"}))
	// notified opens a ticket of who's on path with a callback to h, hands
	// it the lock, and returns the ticket and its notification.
	notified := func(t *testing.T, who []string, path string, h *hook) (ticket, hookCall) {
		t.Helper()
		var held grant
		wantJSON(t, call(t, "POST", gw.URL+path, `{"ttl_ms":60000}`, holder...), http.StatusCreated, &held)
		tk := openTicket(t, gw.URL+path, fmt.Sprintf(`{"ttl_ms":60000,"wait_ms":30000,"callback_url":%q}`, h.URL+"/hooks/lock"), who)
		if r := call(t, "DELETE", gw.URL+path, "", with(holder, []string{"Lock-Token", held.Token})...); r.status != http.StatusNoContent {
			t.Fatalf("release: got %d %s", r.status, r.body)
		}
		select {
		case c := <-h.got:
			return tk, c
		case <-time.After(10 * time.Second):
			t.Fatalf("no callback for %s within 10s of the release", path)
		}
		panic("unreachable")
	}
	aliceTk, aliceNote := notified(t, bearer(token(t, jwt.MapClaims{"sub": "alice"})), "/locks/secrets/alice", aliceHook)
	bobTk, bobNote := notified(t, bearer(token(t, jwt.MapClaims{"sub": "bob"})), "/locks/secrets/bob", bobHook)

	aliceSecret, bobSecret := ticketSecret(t, aliceTk), ticketSecret(t, bobTk)
	now := time.Now()
	if err := callbacks.Verify(aliceSecret, aliceNote.header, aliceNote.body, now, 5*time.Minute); err != nil {
		t.Fatalf("alice's notification under her ticket's secret: %v", err)
	}
	if err := callbacks.Verify(bobSecret, bobNote.header, bobNote.body, now, 5*time.Minute); err != nil {
		t.Fatalf("bob's notification under his ticket's secret: %v", err)
	}
	if err := callbacks.Verify(aliceSecret, bobNote.header, bobNote.body, now, 5*time.Minute); err == nil {
		t.Fatal("bob's notification verifies under the secret alice's receiver holds: she can forge his")
	}
	if err := callbacks.Verify(whsec, aliceNote.header, aliceNote.body, now, 5*time.Minute); err == nil {
		t.Fatal("alice's notification verifies under the operator's secret: every receiver would need it")
	}
	for _, s := range []string{aliceTk.CallbackSecret, bobTk.CallbackSecret} {
		if s == whsec.Encode() {
			t.Fatal("a ticket's callback_secret is the operator's secret")
		}
	}

	// A ticket without a callback has no secret.
	var held grant
	wantJSON(t, call(t, "POST", gw.URL+"/locks/secrets/none", `{"ttl_ms":60000}`, holder...), http.StatusCreated, &held)
	r := call(t, "POST", gw.URL+"/locks/secrets/none", `{"ttl_ms":60000,"wait_ms":30000}`, with(holder, respondAsync)...)
	if r.status != http.StatusAccepted || strings.Contains(string(r.body), "callback_secret") {
		t.Fatalf("a ticket without callback_url: got %d %s, want a 202 without callback_secret", r.status, r.body)
	}

	logs := gw.logs.String()
	for _, s := range []string{aliceTk.CallbackSecret, bobTk.CallbackSecret, whsec.Encode()} {
		if strings.Contains(logs, strings.TrimPrefix(s, "whsec_")) {
			t.Fatal("the logs hold a callback secret")
		}
	}
}
