package main

import (
	"cmp"
	"fmt"
	"slices"

	"github.com/lockgate/lockgate/cmd/lockbench/loadgen"
)

// With --repeat N, --processes runs each scenario N rounds, each round over
// every target in the same order, so that each round is one stretch of the
// machine's load for all of them. One round moves by tens of percent on a
// shared machine; the median of the rounds, and the spread of each round's
// ratio to that round's ceiling, say what a single run cannot.

// median is the middle of vs (the mean of the two middle ones of an even
// count), or 0 for none. It leaves vs as it is.
func median(vs []float64) float64 {
	if len(vs) == 0 {
		return 0
	}
	s := slices.Sorted(slices.Values(vs))
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

// mergeRounds merges rounds of the same scenarios (each round the runs of
// every target in order) into one run per target and scenario, in the
// order of their first appearance: see combineRounds. One round comes back
// as it went in.
func mergeRounds(rounds [][]TargetRun) []TargetRun {
	type key struct {
		target, mode string
		clients      int
	}
	var order []key
	byKey := map[key][]TargetRun{}
	for _, round := range rounds {
		for _, run := range round {
			k := key{run.Target, run.Mode, run.Clients}
			if _, ok := byKey[k]; !ok {
				order = append(order, k)
			}
			byKey[k] = append(byKey[k], run)
		}
	}
	merged := make([]TargetRun, 0, len(order))
	for _, k := range order {
		merged = append(merged, combineRounds(byKey[k]))
	}
	return merged
}

// combineRounds summarises the rounds of one scenario against one target.
// Cycles/s, the ratio to the ceiling (each round's own, against that
// round's ceiling), CPU and system calls per cycle are the medians of the
// rounds, and the ratio's min and max are kept. Latencies, waits and the
// other figures of a distribution are the median round's by cycles/s (of
// an even count, the slower of the two middle ones): percentiles do not
// combine, and one round's set stays consistent. The counts that say
// something went wrong are pooled, so that no round hides one: errors,
// self-hand-offs (of contested releases) and conflicts are summed, the
// most holders at once and the longest lead of a self-hand-off's waiter
// are the most of any round. Rounds holds every round.
// One round is returned as it is.
func combineRounds(rounds []TargetRun) TargetRun {
	if len(rounds) == 1 {
		return rounds[0]
	}
	bySpeed := slices.SortedStableFunc(slices.Values(rounds), func(a, b TargetRun) int {
		return cmp.Compare(a.Result.CyclesPerSec, b.Result.CyclesPerSec)
	})
	out := bySpeed[(len(bySpeed)-1)/2]
	out.Round = 0
	out.Rounds = slices.Clone(rounds)
	res := &out.Result

	// The median round's pointers are shared with its entry in Rounds:
	// copy before pooling into them.
	var errs map[string]int64
	var f loadgen.Fairness
	var st loadgen.SemaphoreStats
	var mx loadgen.MixedStats
	if res.Fairness != nil {
		f = *res.Fairness
		f.SelfRegrants, f.ContestedReleases, f.SelfRegrantLeadMS = 0, 0, 0
		res.Fairness = &f
	}
	if res.Semaphore != nil {
		st = *res.Semaphore
		res.Semaphore = &st
	}
	if res.Mixed != nil {
		mx = *res.Mixed
		mx.Conflicts = 0
		res.Mixed = &mx
	}

	field := func(get func(TargetRun) float64) []float64 {
		vs := make([]float64, len(rounds))
		for i, r := range rounds {
			vs[i] = get(r)
		}
		return vs
	}
	res.CyclesPerSec = median(field(func(r TargetRun) float64 { return r.Result.CyclesPerSec }))
	out.ServerCPUUS = median(field(func(r TargetRun) float64 { return r.ServerCPUUS }))
	out.RedisCPUUS = median(field(func(r TargetRun) float64 { return r.RedisCPUUS }))
	out.BenchCPUUS = median(field(func(r TargetRun) float64 { return r.BenchCPUUS }))
	out.ServerSyscalls = median(field(func(r TargetRun) float64 { return r.ServerSyscalls }))
	ratios := slices.DeleteFunc(field(func(r TargetRun) float64 { return r.OverCeiling }), func(v float64) bool { return v <= 0 })
	if len(ratios) > 0 {
		out.OverCeiling = median(ratios)
		out.OverCeilingMin, out.OverCeilingMax = slices.Min(ratios), slices.Max(ratios)
	}

	if out.Redis != nil {
		rc := *out.Redis
		rc.MainCPUUS = median(field(func(r TargetRun) float64 {
			if r.Redis == nil {
				return 0
			}
			return r.Redis.MainCPUUS
		}))
		out.Redis = &rc
	}
	plainRatios := slices.DeleteFunc(field(func(r TargetRun) float64 { return r.RedisOverPlain }), func(v float64) bool { return v <= 0 })
	if len(plainRatios) > 0 {
		out.RedisOverPlain = median(plainRatios)
		out.RedisOverPlainMin, out.RedisOverPlainMax = slices.Min(plainRatios), slices.Max(plainRatios)
	}

	for i, r := range rounds {
		out.Rounds[i].Round = i + 1
		for class, n := range r.Result.Errors {
			if errs == nil {
				errs = map[string]int64{}
			}
			errs[class] += n
		}
		if rf := r.Result.Fairness; rf != nil && res.Fairness != nil {
			f.SelfRegrants += rf.SelfRegrants
			f.ContestedReleases += rf.ContestedReleases
			f.SelfRegrantLeadMS = max(f.SelfRegrantLeadMS, rf.SelfRegrantLeadMS)
		}
		if rs := r.Result.Semaphore; rs != nil && res.Semaphore != nil {
			st.MostHolders = max(st.MostHolders, rs.MostHolders)
		}
		if rm := r.Result.Mixed; rm != nil && res.Mixed != nil {
			mx.Conflicts += rm.Conflicts
			mx.MostHolders = max(mx.MostHolders, rm.MostHolders)
		}
	}
	if res.Fairness != nil {
		f.SelfRegrantShare = 0
		if f.ContestedReleases > 0 {
			f.SelfRegrantShare = float64(f.SelfRegrants) / float64(f.ContestedReleases)
		}
	}
	if errs != nil {
		res.Errors = errs
	}
	return out
}

// ratioCell is a run's ratio to the ceiling, and with rounds the spread
// of the rounds' ratios: "0.85 (0.80–0.90)".
func ratioCell(run TargetRun) string {
	if run.OverCeiling == 0 {
		return ""
	}
	if len(run.Rounds) == 0 {
		return fmt.Sprintf("%.2f", run.OverCeiling)
	}
	return fmt.Sprintf("%.2f (%.2f–%.2f)", run.OverCeiling, run.OverCeilingMin, run.OverCeilingMax)
}

// roundsNote says, in a report of several rounds, what its figures are.
func roundsNote(n int) string {
	return fmt.Sprintf("%d rounds of each scenario, each round over every target in the same order: cycles/s, x ceiling and CPU "+
		"and syscalls per cycle are the medians of the rounds (x ceiling: the median of each round's ratio to that round's "+
		"ceiling, the rounds' min–max in brackets); latencies, waits, the FIFO bound and mean holders are the median round's "+
		"by cycles/s (the slower middle one of an even count); errors, self-hand-offs and conflicts are summed over the "+
		"rounds, most holders at once and the longest lead of a self-hand-off are the most of any round; --json has every round", n)
}
