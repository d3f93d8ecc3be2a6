//go:build lockgate_redis

package e2e

func init() { redisReady = true }
