package app

import (
	"context"
	"fmt"
	"strings"

	"github.com/redis/go-redis/v9"
	"github.com/rs/zerolog"
)

// redisLogger puts go-redis's own messages (failed dials, pool trouble,
// cluster reloads) into the gateway's JSON log. By default go-redis prints
// them to os.Stderr as plain text, in the middle of the JSON lines.
type redisLogger struct{ log zerolog.Logger }

// useRedisLogger routes go-redis's messages to logger. go-redis has one
// logger per process, not per client: in a process running several
// gateways (tests), the last one started gets them all.
func useRedisLogger(logger zerolog.Logger) {
	redis.SetLogger(redisLogger{log: logger.With().Str("component", "redis").Logger()})
}

func (l redisLogger) Printf(ctx context.Context, format string, v ...any) {
	msg := strings.TrimPrefix(fmt.Sprintf(format, v...), "redis: ")
	// A call made for a request carries the request's logger, and so its
	// request id.
	if rl := zerolog.Ctx(ctx); rl.GetLevel() != zerolog.Disabled {
		rl.Warn().Str("component", "redis").Msg(msg)
		return
	}
	l.log.Warn().Msg(msg)
}
