package app

import (
	"fmt"

	"github.com/redis/go-redis/v9"
	"github.com/rs/zerolog"

	"github.com/lockgate/lockgate/callbacks"
)

// callbackNotifier is the notifier of tickets' callbacks, or nil when no
// --callback-allow pattern allows any. Its errors never quote the secret.
func callbackNotifier(cfg config, logger zerolog.Logger) (*callbacks.Notifier, error) {
	if len(cfg.callbackAllow) == 0 {
		if cfg.callbackSecret != "" {
			return nil, fmt.Errorf("--callback-secret (%s) without --callback-allow: no callback would be sent; set both or neither", envName("callback-secret"))
		}
		return nil, nil
	}
	allow, err := callbacks.ParseAllowList(cfg.callbackAllow)
	if err != nil {
		return nil, fmt.Errorf("--callback-allow: %w", err)
	}
	if cfg.callbackSecret == "" {
		return nil, fmt.Errorf("--callback-allow needs --callback-secret (%s), whsec_ and base64 of 24 to 64 random bytes "+
			"(for example: echo whsec_$(openssl rand -base64 32)), from which each ticket's callback secret is derived", envName("callback-secret"))
	}
	secret, err := callbacks.ParseSecret(cfg.callbackSecret)
	if err != nil {
		return nil, fmt.Errorf("--callback-secret: %w", err)
	}
	return callbacks.New(callbacks.Config{Allow: allow, Secret: secret, Logger: logger})
}

// houseAddresses are the addresses no callback may reach, whatever
// --callback-allow says: the gateway's listener (as configured and as
// bound), the pprof listener and the Redis addresses the URL names (a
// cluster's or a sentinel's other nodes, learnt later, are not known
// here: keep them off the allow-list).
func houseAddresses(cfg config, listening string) []string {
	addrs := []string{cfg.addr, listening}
	if cfg.pprofAddr != "" {
		addrs = append(addrs, cfg.pprofAddr)
	}
	switch {
	case cfg.redisURL == "":
	case cfg.redisSentinel != "" || isSentinelURL(cfg.redisURL):
		if fo, err := parseSentinelURL(cfg.redisURL, cfg.redisSentinel); err == nil {
			addrs = append(addrs, fo.SentinelAddrs...)
		}
	case cfg.redisCluster:
		if o, err := redis.ParseClusterURL(cfg.redisURL); err == nil {
			addrs = append(addrs, o.Addrs...)
		}
	default:
		if o, err := redis.ParseURL(cfg.redisURL); err == nil {
			addrs = append(addrs, o.Addr)
		}
	}
	return addrs
}
