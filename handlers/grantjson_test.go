package handlers

import (
	"encoding/json"
	"math"
	"testing"
	"time"
)

// TestGrantJSON holds the hand-written grant encoders to encoding/json:
// the same bytes for the same values, whether they write them or fall
// back to encoding/json.
func TestGrantJSON(t *testing.T) {
	one, many := 1, math.MaxInt32
	excl, shared, odd := GrantModeExclusive, GrantModeShared, GrantMode(`<a&"b">`)
	at := time.Date(2026, 11, 30, 1, 43, 57, 986_000_000, time.UTC)
	times := []time.Time{at, at.Truncate(time.Second), at.Add(123456789), time.Time{},
		time.Date(9999, 12, 31, 23, 59, 59, 999_000_000, time.UTC), time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC),
		time.Date(-1, 1, 1, 0, 0, 0, 0, time.UTC), at.In(time.FixedZone("x", 3600))}
	strs := []string{"", "demo/report", "A3lisOPehb2PnzoJJynkrw", "a/b.c:d-e_f", `q"uote`, `back\slash`, "<html>&",
		"tab\tnew\nline", "\x00\x1f\x7f", "é ü", "\u2028\u2029", "bad \xff utf-8"}
	ints := []int64{0, 1, -1, 20000, math.MaxInt64, math.MinInt64}

	check := func(t *testing.T, body any) {
		t.Helper()
		want, wantErr := json.Marshal(body)
		got, err := appendJSONBody(make([]byte, 0, 8), body)
		if (err != nil) != (wantErr != nil) {
			t.Fatalf("%#v: got error %v, want %v", body, err, wantErr)
		}
		if err == nil && string(got) != string(want) {
			t.Errorf("got  %s\nwant %s", got, want)
		}
	}
	// Each value in each field, the others plain, so that no field's
	// fallback hides another's mistake.
	base := Grant{ExpiresAt: at, FencingToken: 7, Lock: "demo/report", RenewAfterMs: 20000, Token: "A3lisOPehb2PnzoJJynkrw", TtlMs: 60000}
	sem := SemaphoreGrant{ExpiresAt: at, FencingToken: 7, Limit: 4, RenewAfterMs: 20000, Semaphore: "etl/nightly", Token: "A3lisOPehb2PnzoJJynkrw", TtlMs: 60000}
	// The usual values take the hand-written path, not the fallback.
	if _, ok := appendGrant(nil, &base); !ok {
		t.Fatal("appendGrant fell back to encoding/json for a usual grant")
	}
	if _, ok := appendSemaphoreGrant(nil, &sem); !ok {
		t.Fatal("appendSemaphoreGrant fell back to encoding/json for a usual grant")
	}
	grants := func(g Grant) {
		t.Helper()
		check(t, g)
		g.Holds, g.Mode = &one, &excl
		check(t, AcquireLock201JSONResponse(g))
		g.Holds, g.Mode = &many, &shared
		check(t, g)
	}
	for _, ts := range times {
		g, sg := base, sem
		g.ExpiresAt, sg.ExpiresAt = ts, ts
		grants(g)
		check(t, sg)
	}
	for _, s := range strs {
		for _, set := range []func(*Grant, *SemaphoreGrant){
			func(g *Grant, sg *SemaphoreGrant) { g.Lock, sg.Semaphore = s, s },
			func(g *Grant, sg *SemaphoreGrant) { g.Token, sg.Token = s, s },
		} {
			g, sg := base, sem
			set(&g, &sg)
			grants(g)
			check(t, sg)
		}
		mode := GrantMode(s)
		g := base
		g.Mode = &mode
		check(t, g)
	}
	for _, n := range ints {
		for _, set := range []func(*Grant, *SemaphoreGrant){
			func(g *Grant, sg *SemaphoreGrant) { g.FencingToken, sg.FencingToken = n, n },
			func(g *Grant, sg *SemaphoreGrant) { g.RenewAfterMs, sg.RenewAfterMs = n, n },
			func(g *Grant, sg *SemaphoreGrant) { g.TtlMs, sg.TtlMs = n, n },
			func(g *Grant, sg *SemaphoreGrant) { h := int(n); g.Holds, sg.Limit = &h, int(n) },
		} {
			g, sg := base, sem
			set(&g, &sg)
			grants(g)
			check(t, sg)
		}
	}
	g := base
	g.Mode = &odd
	check(t, g)
	check(t, Ticket{Lock: "a/b", Ticket: "t"}) // not a grant: encoding/json's own
}

// TestContentLength: the shared values say the number they are for.
func TestContentLength(t *testing.T) {
	for _, n := range []int{0, 9, 100, 511, maxSharedLength, maxSharedLength + 1, 1 << 20} {
		if got := contentLength(n); len(got) != 1 || got[0] != itoa(n) {
			t.Errorf("contentLength(%d) = %q", n, got)
		}
	}
}

func itoa(n int) string { b, _ := json.Marshal(n); return string(b) }
