package callbacks

import (
	"net/netip"
	"testing"
	"time"
)

func TestHouseRefuses(t *testing.T) {
	h := newHouse(t.Context(), []string{":8080", "127.0.0.1:6060", "10.0.0.7:6379", "localhost:7000", "bad"})
	for addr, want := range map[string]bool{
		"127.0.0.1:8080":   true, // a listener on every address
		"127.0.0.2:8080":   true,
		"[::1]:8080":       true,
		"0.0.0.0:8080":     true,
		"127.0.0.1:6060":   true, // pprof
		"127.0.0.9:6060":   true, // loopback: every loopback address
		"10.0.0.7:6379":    true, // Redis
		"10.0.0.8:6379":    false,
		"127.0.0.1:7000":   true, // localhost resolved
		"127.0.0.1:9000":   false,
		"93.184.216.34:80": false,
	} {
		if got := h.refuses(netip.MustParseAddrPort(addr)); got != want {
			t.Errorf("refuses(%s): got %v, want %v", addr, got, want)
		}
	}
	if !h.refusesURL("localhost", "7000") || h.refusesURL("localhost", "7001") {
		t.Error("a name given is refused at its port only")
	}
}

// TestBreaker: five failed attempts in a row open a destination's
// breaker; after the cool-down one probe goes through; a failed probe
// doubles the cool-down, a success closes it.
func TestBreaker(t *testing.T) {
	var h host
	now := time.Unix(1000, 0)
	for i := range breakerFailures {
		if !h.allows(now, 2) {
			t.Fatalf("closed breaker refused attempt %d", i+1)
		}
		h.record(true, now)
	}
	if h.allows(now, 2) || !h.open(now) {
		t.Fatal("open breaker allowed an attempt")
	}
	now = now.Add(breakerCooldown)
	if !h.allows(now, 2) {
		t.Fatal("no probe after the cool-down")
	}
	h.probing = true
	if h.allows(now, 2) {
		t.Fatal("a second probe while one is in flight")
	}
	h.record(true, now)
	if h.cooldown != 2*breakerCooldown || h.allows(now.Add(breakerCooldown), 2) {
		t.Fatalf("a failed probe: cool-down %v, want %v", h.cooldown, 2*breakerCooldown)
	}
	now = now.Add(2 * breakerCooldown)
	h.probing = true
	h.record(false, now)
	if h.open(now) || !h.allows(now, 2) || h.failures != 0 {
		t.Fatal("a successful probe left the breaker open")
	}
	h.inflight = 2
	if h.allows(now, 2) {
		t.Fatal("an attempt past the per-destination cap")
	}
}
