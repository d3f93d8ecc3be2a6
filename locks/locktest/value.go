package locktest

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/lockgate/lockgate/locks"
)

// RunValues runs the cases of a grant's value (locks.AcquireRequest.Value,
// locks.Valuer) against backends newBackend makes with a history of
// HistoryLen events.
func RunValues(t *testing.T, newBackend func(t *testing.T) locks.Backend) {
	for _, tc := range []struct {
		name string
		test func(t *testing.T, b locks.Backend, key locks.Key)
	}{
		{"AnAcquireCarriesItsValue", testValueAcquired},
		{"TheHolderChangesTheValue", testValueChanged},
		{"OnlyTheHolderChangesTheValue", testValueNotHolder},
		{"TheValueEndsWithTheGrant", testValueEnds},
		{"AWaitersValueComesWithTheHandOff", testValueHandedOver},
		{"ATicketsValueComesWithItsGrant", testValueTicket},
		{"BadValuesAreRefused", testValueInvalid},
		{"TheHistoryRecordsValues", testValueHistory},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tc.test(t, newBackend(t), UniqueKey(t))
		})
	}
}

func valueReq(ttl time.Duration, value string) locks.AcquireRequest {
	r := req(ttl)
	r.Value = value
	return r
}

// valueOf is the value Inspect shows for key, which must be held.
func valueOf(t testing.TB, b locks.Backend, key locks.Key) string {
	t.Helper()
	info, err := b.Inspect(context.Background(), key)
	if err != nil {
		t.Fatalf("inspect: %v", err)
	}
	if got := info.Holders[len(info.Holders)-1].Value; got != info.Value {
		t.Fatalf("holder's value %q, info's %q: want the same", got, info.Value)
	}
	return info.Value
}

func testValueAcquired(t *testing.T, b locks.Backend, key locks.Key) {
	g := MustAcquire(t, b, key, valueReq(time.Minute, "10.0.0.1:8080"))
	if got := valueOf(t, b, key); got != "10.0.0.1:8080" {
		t.Fatalf("got value %q, want %q", got, "10.0.0.1:8080")
	}
	if _, err := b.Release(context.Background(), key, g.Token); err != nil {
		t.Fatal(err)
	}
	MustAcquire(t, b, key, req(time.Minute))
	if got := valueOf(t, b, key); got != "" {
		t.Fatalf("a grant without a value: got value %q, want none", got)
	}
}

func testValueChanged(t *testing.T, b locks.Backend, key locks.Key) {
	g := MustAcquire(t, b, key, valueReq(time.Minute, "a"))
	full := strings.Repeat("x", locks.MaxValueLen)
	for _, v := range []string{"b", full, ""} {
		fence, err := b.SetValue(context.Background(), key, g.Token, v)
		if err != nil {
			t.Fatalf("set %d bytes: %v", len(v), err)
		}
		if fence != g.FencingToken {
			t.Fatalf("got fencing token %d, want the grant's %d", fence, g.FencingToken)
		}
		if got := valueOf(t, b, key); got != v {
			t.Fatalf("got value of %d bytes, want %d", len(got), len(v))
		}
	}
	info, err := b.Inspect(context.Background(), key)
	if err != nil {
		t.Fatal(err)
	}
	if info.TTL <= 50*time.Second {
		t.Fatalf("lease left %v after setting values: want the lease as it was (1m)", info.TTL)
	}
}

func testValueNotHolder(t *testing.T, b locks.Backend, key locks.Key) {
	ctx := context.Background()
	if _, err := b.SetValue(ctx, key, "no-such-token", "x"); !errors.Is(err, locks.ErrNotHolder) {
		t.Fatalf("free lock: got %v, want ErrNotHolder", err)
	}
	if _, err := b.Inspect(ctx, key); !errors.Is(err, locks.ErrNotHeld) {
		t.Fatalf("a failed SetValue made the lock: inspect got %v, want ErrNotHeld", err)
	}
	g := MustAcquire(t, b, key, valueReq(time.Minute, "mine"))
	if _, err := b.SetValue(ctx, key, "no-such-token", "theirs"); !errors.Is(err, locks.ErrNotHolder) {
		t.Fatalf("wrong token: got %v, want ErrNotHolder", err)
	}
	if got := valueOf(t, b, key); got != "mine" {
		t.Fatalf("got value %q, want %q unchanged", got, "mine")
	}
	if _, err := b.Release(ctx, key, g.Token); err != nil {
		t.Fatal(err)
	}
	_, err := b.SetValue(ctx, key, g.Token, "late")
	var nh *locks.NotHolderError
	if !errors.As(err, &nh) || nh.Reason != locks.ReasonReleased {
		t.Fatalf("released token: got %v, want ErrNotHolder (released)", err)
	}
	if _, err := b.Inspect(ctx, key); !errors.Is(err, locks.ErrNotHeld) {
		t.Fatalf("a SetValue after release made the lock: inspect got %v, want ErrNotHeld", err)
	}
}

func testValueEnds(t *testing.T, b locks.Backend, key locks.Key) {
	g := MustAcquire(t, b, key, valueReq(50*time.Millisecond, "short"))
	WaitUntilFree(t, b, key)
	if _, err := b.SetValue(context.Background(), key, g.Token, "again"); !errors.Is(err, locks.ErrNotHolder) {
		t.Fatalf("expired token: got %v, want ErrNotHolder", err)
	}
	MustAcquire(t, b, key, req(time.Minute))
	if got := valueOf(t, b, key); got != "" {
		t.Fatalf("after an expired grant's value: got value %q, want none", got)
	}
}

func testValueHandedOver(t *testing.T, b locks.Backend, key locks.Key) {
	ctx := context.Background()
	g := MustAcquire(t, b, key, valueReq(time.Minute, "first"))
	got := make(chan error, 1)
	go func() {
		r := valueReq(time.Minute, "second")
		r.Wait = 10 * time.Second
		_, err := b.Acquire(ctx, key, r)
		got <- err
	}()
	waitForInfo(t, b, key, "a waiter", func(info locks.Info, _ error) bool { return info.Waiters == 1 })
	if _, err := b.Release(ctx, key, g.Token); err != nil {
		t.Fatal(err)
	}
	if err := <-got; err != nil {
		t.Fatalf("waiter: %v", err)
	}
	if v := valueOf(t, b, key); v != "second" {
		t.Fatalf("after the hand-off: got value %q, want the waiter's %q", v, "second")
	}
}

func testValueTicket(t *testing.T, b locks.Backend, key locks.Key) {
	tb, ok := b.(locks.Tickets)
	if !ok {
		t.Skip("backend has no tickets")
	}
	ctx := context.Background()
	g := MustAcquire(t, b, key, valueReq(time.Minute, "holder"))
	r := valueReq(time.Minute, "ticket")
	r.Wait = 10 * time.Second
	st, err := tb.OpenTicket(ctx, key, r)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.Release(ctx, key, g.Token); err != nil {
		t.Fatal(err)
	}
	st, err = tb.PollTicket(ctx, key, st.ID, st.Token, 10*time.Second)
	if err != nil || st.Grant == nil {
		t.Fatalf("poll: got %+v, %v; want the grant", st, err)
	}
	if v := valueOf(t, b, key); v != "ticket" {
		t.Fatalf("after the ticket's grant: got value %q, want %q", v, "ticket")
	}
}

func testValueInvalid(t *testing.T, b locks.Backend, key locks.Key) {
	ctx := context.Background()
	long := strings.Repeat("x", locks.MaxValueLen+1)
	if _, err := b.Acquire(ctx, key, valueReq(time.Minute, long)); !errors.Is(err, locks.ErrInvalid) {
		t.Fatalf("acquire with %d bytes: got %v, want ErrInvalid", len(long), err)
	}
	shared := valueReq(time.Minute, "x")
	shared.Mode = locks.Shared
	if _, err := b.Acquire(ctx, key, shared); !errors.Is(err, locks.ErrInvalid) {
		t.Fatalf("shared acquire with a value: got %v, want ErrInvalid", err)
	}
	g := MustAcquire(t, b, key, valueReq(time.Minute, "kept"))
	if _, err := b.SetValue(ctx, key, g.Token, long); !errors.Is(err, locks.ErrInvalid) {
		t.Fatalf("set %d bytes: got %v, want ErrInvalid", len(long), err)
	}
	if got := valueOf(t, b, key); got != "kept" {
		t.Fatalf("got value %q, want %q unchanged", got, "kept")
	}
	if _, err := b.Release(ctx, key, g.Token); err != nil {
		t.Fatal(err)
	}
	shared.Value = ""
	sg := MustAcquire(t, b, key, shared)
	if _, err := b.SetValue(ctx, key, sg.Token, "x"); !errors.Is(err, locks.ErrInvalid) {
		t.Fatalf("a shared holder's SetValue: got %v, want ErrInvalid", err)
	}
	if got := valueOf(t, b, key); got != "" {
		t.Fatalf("shared: got value %q, want none", got)
	}
}

func testValueHistory(t *testing.T, b locks.Backend, key locks.Key) {
	g := MustAcquire(t, b, key, valueReq(time.Minute, "one"))
	if _, err := b.SetValue(context.Background(), key, g.Token, "two"); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Release(context.Background(), key, g.Token); err != nil {
		t.Fatal(err)
	}
	got, events := kinds(t, b, key)
	if want := "released,value_changed,acquired"; got != want {
		t.Fatalf("got events %s, want %s", got, want)
	}
	for i, want := range []string{"", "two", "one"} {
		if events[i].Value != want {
			t.Fatalf("event %s: got value %q, want %q", events[i].Kind, events[i].Value, want)
		}
		if events[i].FencingToken != g.FencingToken {
			t.Fatalf("event %s: got fencing token %d, want %d", events[i].Kind, events[i].FencingToken, g.FencingToken)
		}
	}
}
