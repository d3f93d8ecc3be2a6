package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"runtime/pprof"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/lockgate/lockgate/cmd/gateway/app"
)

// inprocGateway is a gateway the lab runs in its own process with
// app.Start, as cmd/gateway runs it. Its goroutines carry the pprof label
// lockbench=gateway.
type inprocGateway struct {
	*app.Gateway
	logs *tailBuffer
}

// startGateway runs a gateway on a free loopback port against redisURL,
// verifying HS256 tokens signed with secret, and returns once it listens.
func startGateway(ctx context.Context, redisURL string, secret []byte) (*inprocGateway, error) {
	g := &inprocGateway{logs: newTailBuffer(16 << 10)}
	args := []string{"gateway", "--addr", "127.0.0.1:0", "--redis-url", redisURL, "--shutdown-timeout", "5s"}
	env := map[string]string{"LOCKGATE_JWT_SECRET": string(secret)} // not a flag: flags show in ps
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	var err error
	// Goroutines inherit the labels of the one that starts them.
	pprof.Do(ctx, pprof.Labels("lockbench", "gateway"), func(ctx context.Context) {
		g.Gateway, err = app.Start(ctx, args, func(k string) string { return env[k] }, g.logs)
	})
	if err != nil {
		return nil, fmt.Errorf("%w\n%s", err, g.logs)
	}
	return g, nil
}

// stop shuts the gateway down as SIGTERM would, and waits for it.
func (g *inprocGateway) stop() error {
	if err := g.Stop(); err != nil {
		return fmt.Errorf("gateway: %w\n%s", err, g.logs)
	}
	return nil
}

// randomSecret returns a fresh HS256 key: 32 random bytes, hex-encoded.
func randomSecret() []byte {
	b := make([]byte, 32)
	rand.Read(b) // never fails: see crypto/rand.Read
	return []byte(hex.EncodeToString(b))
}

// randomID makes the names of a run's locks unique to it.
func randomID() string {
	id := make([]byte, 4)
	rand.Read(id) // never fails: see crypto/rand.Read
	return hex.EncodeToString(id)
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
