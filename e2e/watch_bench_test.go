package e2e

import (
	"bufio"
	"net"
	"net/http"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/lockgate/lockgate/internal/gatewaytest"
)

// BenchmarkIdleWatchers measures what an idle event stream costs its
// gateway: memory (heap and goroutine stacks, after a GC) per stream, each
// on a connection of its own (one file descriptor). The clients are bare
// connections of this process that hold no goroutine; their few hundred
// bytes each count too, so the figure is an upper bound.
//
//	go test ./e2e -run '^$' -bench IdleWatchers -benchtime 1x
func BenchmarkIdleWatchers(b *testing.B) {
	const watchers = 2000
	gw := gatewaytest.Start(b, map[string]string{"LOCKGATE_JWT_SECRET": secret}, "--history", "10", "--max-watchers", "5000")
	tok, err := jwt.NewWithClaims(jwt.SigningMethodHS256, jwt.MapClaims{"sub": "bench", "ns": []string{"*"},
		"exp": time.Now().Add(time.Hour).Unix()}).SignedString([]byte(secret))
	if err != nil {
		b.Fatal(err)
	}
	addr := strings.TrimPrefix(gw.URL, "http://")
	req := "GET /locks/bench/idle HTTP/1.1\r\nHost: " + addr + "\r\nAccept: text/event-stream\r\nAuthorization: Bearer " + tok + "\r\n\r\n"
	heap := func() uint64 {
		runtime.GC()
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		return m.HeapInuse + m.StackInuse
	}
	for b.Loop() {
		before := heap()
		conns := make([]net.Conn, 0, watchers)
		for range watchers {
			c, err := net.Dial("tcp", addr)
			if err != nil {
				b.Fatal(err)
			}
			conns = append(conns, c)
			if _, err := c.Write([]byte(req)); err != nil {
				b.Fatal(err)
			}
			resp, err := http.ReadResponse(bufio.NewReaderSize(c, 512), nil)
			if err != nil || resp.StatusCode != http.StatusOK {
				b.Fatalf("open stream: %v %v", resp, err)
			}
		}
		after := heap()
		b.ReportMetric(float64(after-before)/watchers, "bytes/watcher")
		for _, c := range conns {
			c.Close()
		}
	}
}
