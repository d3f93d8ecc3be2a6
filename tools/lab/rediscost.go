package main

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// What a cycle costs Redis, from Redis's own accounting: the main thread's
// CPU (INFO cpu's used_cpu_sys_main_thread + used_cpu_user_main_thread,
// which leaves out Redis's background threads and which the other
// processes on a shared machine disturb less than the wall clock), and the
// commands it ran by name (INFO commandstats, commands run by scripts
// included). Each Redis target's is divided by the plain lock's in the
// same round: the ratio the lock scripts are held to.

// redisSample is Redis's work so far, as INFO tells it.
type redisSample struct {
	mainCPU time.Duration
	calls   map[string]int64
	usec    map[string]int64
}

// sampleRedis reads INFO cpu and commandstats in one call.
func sampleRedis(ctx context.Context, rdb *redis.Client) (redisSample, error) {
	info, err := rdb.Info(ctx, "cpu", "commandstats").Result()
	if err != nil {
		return redisSample{}, fmt.Errorf("INFO cpu commandstats: %w", err)
	}
	return parseRedisSample(info), nil
}

func parseRedisSample(info string) redisSample {
	s := redisSample{calls: map[string]int64{}, usec: map[string]int64{}}
	var cpu float64
	for line := range strings.Lines(info) {
		name, rest, ok := strings.Cut(strings.TrimSpace(line), ":")
		if !ok {
			continue
		}
		switch name {
		case "used_cpu_sys_main_thread", "used_cpu_user_main_thread":
			v, _ := strconv.ParseFloat(rest, 64)
			cpu += v
			continue
		}
		cmd, isStat := strings.CutPrefix(name, "cmdstat_")
		if !isStat {
			continue
		}
		for field := range strings.SplitSeq(rest, ",") {
			k, v, _ := strings.Cut(field, "=")
			n, _ := strconv.ParseInt(v, 10, 64)
			switch k {
			case "calls":
				s.calls[cmd] = n
			case "usec":
				s.usec[cmd] = n
			}
		}
	}
	s.mainCPU = time.Duration(cpu * float64(time.Second))
	return s
}

// labCommands are the lab's own commands, left out of a run's counts.
var labCommands = []string{"info", "ping", "hello", "client|setinfo", "config|set", "config|get", "memory|usage", "scan", "pttl", "del"}

// redisCost is what Redis did between two samples, per cycle.
type redisCost struct {
	MainCPUUS float64            `json:"main_cpu_us_per_cycle"`
	Commands  float64            `json:"commands_per_cycle"`
	ByCommand map[string]float64 `json:"by_command_per_cycle"`
	// USecByCommand is INFO commandstats' usec per cycle, by command: a
	// script's own time includes the commands it runs.
	USecByCommand map[string]float64 `json:"usec_by_command_per_cycle"`
}

func costPerCycle(before, after redisSample, cycles int64) redisCost {
	c := redisCost{ByCommand: map[string]float64{}, USecByCommand: map[string]float64{}}
	if cycles <= 0 {
		return c
	}
	n := float64(cycles)
	c.MainCPUUS = float64(after.mainCPU-before.mainCPU) / float64(time.Microsecond) / n
	for _, cmd := range slices.Sorted(maps.Keys(after.calls)) {
		if slices.Contains(labCommands, cmd) {
			continue
		}
		if d := after.calls[cmd] - before.calls[cmd]; d > 0 {
			c.ByCommand[cmd] = float64(d) / n
			c.Commands += float64(d) / n
			c.USecByCommand[cmd] = float64(after.usec[cmd]-before.usec[cmd]) / n
		}
	}
	return c
}

// topCommands formats the k commands run most per cycle: "hget 3.0, set 2.0".
func topCommands(c *redisCost, k int) string {
	cmds := slices.SortedFunc(maps.Keys(c.ByCommand), func(a, b string) int {
		if d := c.ByCommand[b] - c.ByCommand[a]; d != 0 {
			if d > 0 {
				return 1
			}
			return -1
		}
		return strings.Compare(a, b)
	})
	if len(cmds) > k {
		cmds = cmds[:k]
	}
	parts := make([]string, len(cmds))
	for i, cmd := range cmds {
		parts[i] = fmt.Sprintf("%s %.1f", cmd, c.ByCommand[cmd])
	}
	return strings.Join(parts, ", ")
}
