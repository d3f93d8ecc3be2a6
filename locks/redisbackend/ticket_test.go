package redisbackend_test

import (
	"bufio"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/lockgate/lockgate/internal/redistest"
	"github.com/lockgate/lockgate/locks"
	"github.com/lockgate/lockgate/locks/locktest"
	"github.com/lockgate/lockgate/locks/redisbackend"
)

// The ticket cases of the conformance suite, on both backends: two Redis
// backends on one Redis stand for two gateways.
func TestRedisTickets(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	locktest.RunTickets(t, func(t *testing.T, liveness time.Duration) (a, b locktest.TicketBackend) {
		return newRedis(t, srv, redisbackend.Options{TicketLiveness: liveness}), newRedis(t, srv, redisbackend.Options{TicketLiveness: liveness})
	})
}

// TestTicketTokenNotInRedis: Redis holds the ticket token's hash, never
// the token.
func TestTicketTokenNotInRedis(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	b := newRedis(t, srv, redisbackend.Options{})
	admin := srv.Client(t)
	key := locktest.UniqueKey(t)
	locktest.MustAcquire(t, b, key, locks.AcquireRequest{TTL: time.Minute})
	tk, err := b.OpenTicket(t.Context(), key, locks.AcquireRequest{TTL: time.Minute, Wait: time.Minute})
	if err != nil || tk.Grant != nil {
		t.Fatalf("open ticket: %+v, %v; want a ticket", tk, err)
	}
	keys, err := admin.Keys(t.Context(), "*").Result()
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range keys {
		dump, err := admin.Dump(t.Context(), k).Result()
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(k+dump, tk.Token) {
			t.Fatalf("key %s holds the ticket token", k)
		}
	}
}

// TestRedisTicketLongPollRunsOncePerSecond: a long-poll keeps its ticket
// alive by running the ticket script at most about once a second, however
// short the liveness (a third of it, 30 runs a second at 100 ms, was each
// long poll's cost before; 8 runs in this test).
func TestRedisTicketLongPollRunsOncePerSecond(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	const liveness, poll = 1500 * time.Millisecond, 4 * time.Second
	b := newRedis(t, srv, redisbackend.Options{TicketLiveness: liveness})
	key := locktest.UniqueKey(t)
	locktest.MustAcquire(t, b, key, locks.AcquireRequest{TTL: time.Minute})
	tk, err := b.OpenTicket(t.Context(), key, locks.AcquireRequest{TTL: time.Minute, Wait: time.Minute})
	if err != nil || tk.Grant != nil {
		t.Fatalf("open ticket: %+v, %v; want a ticket", tk, err)
	}
	polls := monitor(t, srv.Addr, `"poll" "`+tk.ID+`"`)
	st, err := b.PollTicket(t.Context(), key, tk.ID, tk.Token, poll)
	runs := polls()
	if err != nil || st.Grant != nil || st.Rank != 0 {
		t.Fatalf("long-poll: got %+v, %v; want rank 0", st, err)
	}
	if runs > 6 {
		t.Fatalf("the %v long-poll ran the ticket script %d times, want at most 6 (about one a second)", poll, runs)
	}
}

// monitor counts the commands the Redis at addr runs whose MONITOR line
// holds want, from now until the function it returns is called.
func monitor(t *testing.T, addr, want string) (count func() int) {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	r := bufio.NewReader(conn)
	if _, err := conn.Write([]byte("MONITOR\r\n")); err != nil {
		t.Fatal(err)
	}
	if line, err := r.ReadString('\n'); err != nil || line != "+OK\r\n" {
		t.Fatalf("MONITOR: got %q, %v", line, err)
	}
	n := 0
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			line, err := r.ReadString('\n')
			if err != nil {
				return
			}
			if strings.Contains(line, want) {
				n++
			}
		}
	}()
	return func() int {
		conn.Close()
		<-done
		return n
	}
}
