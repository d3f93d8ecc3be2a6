package main

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"runtime/pprof"
	"strings"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/lockgate/lockgate/cmd/gateway/app"
)

// inprocGateway is a gateway lockbench runs in its own process with
// app.Run, as cmd/gateway does. Its goroutines carry the pprof label
// lockbench=gateway.
type inprocGateway struct {
	url    string
	logs   *tailBuffer
	cancel context.CancelFunc
	done   chan error
}

// startGateway runs a gateway on a free loopback port against redisURL,
// verifying HS256 tokens signed with secret, and returns once it listens.
func startGateway(ctx context.Context, redisURL string, secret []byte) (*inprocGateway, error) {
	ctx, cancel := context.WithCancel(ctx)
	g := &inprocGateway{logs: newTailBuffer(16 << 10), cancel: cancel, done: make(chan error, 1)}
	args := []string{"gateway", "--addr", "127.0.0.1:0", "--redis-url", redisURL, "--shutdown-timeout", "5s"}
	env := map[string]string{"LOCKGATE_JWT_SECRET": string(secret)} // not a flag: flags show in ps
	outR, outW := io.Pipe()
	go pprof.Do(ctx, pprof.Labels("lockbench", "gateway"), func(ctx context.Context) {
		err := app.Run(ctx, args, func(k string) string { return env[k] }, outW, g.logs)
		outW.CloseWithError(io.EOF)
		g.done <- err
	})
	url := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(outR)
		for sc.Scan() {
			if rest, ok := strings.CutPrefix(sc.Text(), app.ListeningPrefix); ok {
				url <- rest
			}
		}
		close(url)
		io.Copy(io.Discard, outR)
	}()
	t := time.NewTimer(20 * time.Second)
	defer t.Stop()
	select {
	case u, ok := <-url:
		if !ok {
			err := <-g.done
			return nil, fmt.Errorf("gateway exited before listening: %v\n%s", err, g.logs)
		}
		g.url = u
		return g, nil
	case <-t.C:
		g.stop()
		return nil, fmt.Errorf("gateway did not listen within 20s:\n%s", g.logs)
	}
}

// stop shuts the gateway down as SIGTERM would, and waits for it.
func (g *inprocGateway) stop() error {
	g.cancel()
	t := time.NewTimer(30 * time.Second)
	defer t.Stop()
	select {
	case err := <-g.done:
		if err != nil {
			return fmt.Errorf("gateway: %w\n%s", err, g.logs)
		}
		return nil
	case <-t.C:
		return errors.New("gateway did not stop within 30s")
	}
}

// randomSecret returns a fresh HS256 key: 32 random bytes, hex-encoded.
func randomSecret() []byte {
	b := make([]byte, 32)
	rand.Read(b) // never fails: see crypto/rand.Read
	return []byte(hex.EncodeToString(b))
}

// mintToken signs a token for every namespace, valid for ttl.
func mintToken(secret []byte, ttl time.Duration) (string, error) {
	claims := struct {
		Namespaces []string `json:"ns"`
		jwt.RegisteredClaims
	}{
		Namespaces: []string{"*"},
		RegisteredClaims: jwt.RegisteredClaims{
			Subject:   "lockbench",
			ExpiresAt: jwt.NewNumericDate(time.Now().Add(ttl)),
		},
	}
	token, err := jwt.NewWithClaims(jwt.SigningMethodHS256, claims).SignedString(secret)
	if err != nil {
		return "", fmt.Errorf("sign a token: %w", err)
	}
	return token, nil
}
