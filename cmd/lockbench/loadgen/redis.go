package loadgen

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"
)

// RedisCalls counts the commands Redis ran during a run, commands run by
// scripts included (INFO commandstats counts those too).
type RedisCalls struct {
	Total int64 `json:"total"`
	// PerHandoff is Total divided by the run's grants: what one handoff
	// costs Redis, the retries of woken waiters included.
	PerHandoff float64 `json:"per_handoff"`
	// ScriptsPerHandoff counts only the script calls (EVALSHA and kin):
	// the round trips a handoff costs.
	ScriptsPerHandoff float64 `json:"scripts_per_handoff"`
	// ByCommand splits Total per command ("evalsha", "hget", ...).
	ByCommand map[string]int64 `json:"by_command"`
}

// commandCalls reads the calls counter of every command from INFO
// commandstats.
func commandCalls(ctx context.Context, c redis.UniversalClient) (map[string]int64, error) {
	info, err := c.Info(ctx, "commandstats").Result()
	if err != nil {
		return nil, fmt.Errorf("INFO commandstats: %w", err)
	}
	return parseCommandStats(info), nil
}

// parseCommandStats parses lines such as
// "cmdstat_evalsha:calls=12,usec=340,usec_per_call=28.33,...".
func parseCommandStats(info string) map[string]int64 {
	calls := make(map[string]int64)
	for line := range strings.Lines(info) {
		name, rest, ok := strings.Cut(strings.TrimSpace(line), ":")
		cmd, isStat := strings.CutPrefix(name, "cmdstat_")
		if !ok || !isStat {
			continue
		}
		for field := range strings.SplitSeq(rest, ",") {
			if v, ok := strings.CutPrefix(field, "calls="); ok {
				n, _ := strconv.ParseInt(v, 10, 64)
				calls[cmd] = n
			}
		}
	}
	return calls
}

// scriptCommands are the commands that run a script or a function.
var scriptCommands = []string{"eval", "evalsha", "eval_ro", "evalsha_ro", "fcall", "fcall_ro"}

// diffCalls is after minus before, without lockbench's own INFO calls.
func diffCalls(before, after map[string]int64) RedisCalls {
	rc := RedisCalls{ByCommand: make(map[string]int64)}
	for _, cmd := range slices.Sorted(maps.Keys(after)) {
		if cmd == "info" {
			continue
		}
		if d := after[cmd] - before[cmd]; d > 0 {
			rc.ByCommand[cmd] = d
			rc.Total += d
		}
	}
	return rc
}

// InfoField reads one field of an INFO section, such as redis_version
// from "server" or used_memory from "memory".
func InfoField(ctx context.Context, c redis.UniversalClient, section, field string) (string, error) {
	info, err := c.Info(ctx, section).Result()
	if err != nil {
		return "", fmt.Errorf("INFO %s: %w", section, err)
	}
	for line := range strings.Lines(info) {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), field+":"); ok {
			return v, nil
		}
	}
	return "", fmt.Errorf("INFO %s has no %s", section, field)
}
