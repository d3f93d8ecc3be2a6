package main

import (
	"fmt"
	"io"
	"slices"
	"strings"
)

// writeMarkdown renders the report as markdown tables.
func writeMarkdown(w io.Writer, r *Report) error {
	var b strings.Builder
	m := r.Machine
	fmt.Fprintf(&b, "## lockbench, %s\n\n", r.Started.Format("2006-01-02 15:04 MST"))
	target := "the gateway at " + r.Target
	if r.Target == "self" {
		target = "a gateway in lockbench's process (app.Run) and a redis-server on loopback, both started by lockbench"
	}
	fmt.Fprintf(&b, "- target: %s\n", target)
	fmt.Fprintf(&b, "- machine: %s/%s, %d CPUs, GOMAXPROCS %d, %s", m.OS, m.Arch, m.CPUs, m.GOMAXPROCS, m.Go)
	if r.RedisVersion != "" {
		fmt.Fprintf(&b, ", Redis %s", r.RedisVersion)
	}
	if m.LoadStart != "" {
		fmt.Fprintf(&b, "; load average %s at the start, %s at the end", m.LoadStart, m.LoadEnd)
	}
	fmt.Fprintf(&b, "\n- each run: %gs of new cycles, lease %d ms, contended acquires wait up to %d ms server-side\n",
		r.Settings.DurationS, r.Settings.TTLMS, r.Settings.WaitMS)
	if slices.ContainsFunc(r.Scenarios, func(s ScenarioReport) bool { return s.Floor != nil }) {
		b.WriteString("- floor: the same calls to the lock engine in-process (`locks.NewRedis`) against the same Redis, no HTTP\n\n")
	} else {
		b.WriteString("- floor: not measured (give --redis-url to measure it, and Redis commands per handoff)\n\n")
	}

	b.WriteString("### Throughput and latency\n\n")
	b.WriteString("A cycle is an acquire and its release. Latencies in ms, p50 / p90 / p99 / max; in contended runs the acquire latency is the wait.\n\n")
	b.WriteString("| scenario | path | cycles/s | gateway / floor | acquire | release | errors |\n")
	b.WriteString("| --- | --- | ---: | ---: | --- | --- | --- |\n")
	for _, s := range r.Scenarios {
		ratio := ""
		if s.Floor != nil {
			ratio = fmt.Sprintf("**%.0f %%**", 100*s.GatewayOverFloor)
		}
		fmt.Fprintf(&b, "| %s | gateway | %.0f | %s | %s | %s | %s |\n", s.Name, s.Gateway.CyclesPerSec, ratio,
			latency4(s.Gateway.Acquire), latency4(s.Gateway.Release), formatErrors(s.Gateway.Errors))
		if f := s.Floor; f != nil {
			fmt.Fprintf(&b, "| | floor | %.0f | | %s | %s | %s |\n", f.CyclesPerSec,
				latency4(f.Acquire), latency4(f.Release), formatErrors(f.Errors))
		}
	}

	if slices.ContainsFunc(r.Scenarios, func(s ScenarioReport) bool { return s.Mode == contended }) {
		b.WriteString("\n### Contention: every client on one lock\n\n")
		b.WriteString("Handoff: from a release's answer to the next grant's answer (ms). Self-regrants: releases during which " +
			"another client's acquire was pending (sent, not necessarily arrived), after which the releaser got the lock " +
			"again; lead: the longest such an acquire had been pending when the release was sent. A FIFO server " +
			"regrants only when the pending acquires have not reached it yet: a lead of about a round trip is that; a long " +
			"one is a stalled request or a queue jumped, which only the server can tell. FIFO bound: (clients − 1) × the mean " +
			"cycle, about the longest a strict FIFO queue makes anyone wait. Redis per handoff: INFO commandstats calls " +
			"during the run over grants, all commands (those inside scripts included) / script calls (round trips).\n\n")
		b.WriteString("| scenario | path | handoff p50 / p99 | self-regrants while others' acquires were pending, longest lead | wait p99 / max (ms) | FIFO bound (ms) | p99 / FIFO, max / FIFO | grants per client min – max | Redis per handoff: commands / scripts |\n")
		b.WriteString("| --- | --- | --- | --- | --- | ---: | --- | --- | --- |\n")
		for _, s := range r.Scenarios {
			if s.Mode != contended {
				continue
			}
			b.WriteString(contentionRow(s.Name, s.Gateway))
			if s.Floor != nil {
				b.WriteString(contentionRow("", *s.Floor))
			}
		}
	}

	writeSemaphores(&b, r)
	writeMixed(&b, r)

	if r.HeldLocks != nil || r.Parked != nil {
		b.WriteString("\n### Memory\n\n| what | per lock or waiter |\n| --- | ---: |\n")
	}
	if h := r.HeldLocks; h != nil {
		fmt.Fprintf(&b, "| Redis, held lock: MEMORY USAGE of its keys (%.1f keys; %d locks held) | %.0f B |\n", h.KeysPerLock, h.Locks, h.BytesPerLock)
		fmt.Fprintf(&b, "| Redis, held lock: its acquire's call record, for seconds | %.0f B |\n", h.CallRecordBytesPerLock)
		fmt.Fprintf(&b, "| Redis, held lock: growth of used_memory | %.0f B |\n", h.UsedMemoryPerLock)
		fmt.Fprintf(&b, "| Redis, released lock: what stays until it expires (%.1f keys) | %.0f B |\n", h.ReleasedKeysPerLock, h.BytesPerReleasedLock)
	}
	if p := r.Parked; p != nil {
		fmt.Fprintf(&b, "| gateway, parked waiter: live heap (%d waiting on one lock) | %.0f B |\n", p.Waiters, p.HeapLivePerWaiter)
		fmt.Fprintf(&b, "| gateway, parked waiter: heap in use (spans) | %.0f B |\n", p.HeapInusePerWaiter)
		fmt.Fprintf(&b, "| gateway, parked waiter: goroutine stacks (%.1f goroutines) | %.0f B |\n", p.GoroutinesPerWaiter, p.StackPerWaiter)
		fmt.Fprintf(&b, "| gateway, parked waiter: live heap + stacks | %.0f B |\n", p.HeapLivePerWaiter+p.StackPerWaiter)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func contentionRow(name string, r Result) string {
	f, h := r.Fairness, r.Handoff
	if f == nil || h == nil {
		return ""
	}
	calls := ""
	if r.Redis != nil {
		calls = fmt.Sprintf("%s / %s", num(r.Redis.PerHandoff), num(r.Redis.ScriptsPerHandoff))
	}
	return fmt.Sprintf("| %s | %s | %s / %s | %s | %s / %s | %s | %.2f, %.2f | %d – %d | %s |\n",
		name, r.Path, num(h.P50), num(h.P99), selfRegrantCell(f),
		num(f.P99WaitMS), num(f.LongestWaitMS), num(f.FIFOBoundMS), f.P99OverFIFO, f.LongestOverFIFO,
		f.MinGrants, f.MaxGrants, calls)
}

func latency4(l Latency) string {
	if l.N == 0 {
		return "–"
	}
	return fmt.Sprintf("%s / %s / %s / %s", num(l.P50), num(l.P90), num(l.P99), num(l.Max))
}

// num prints a number with about three significant digits.
func num(v float64) string {
	switch {
	case v >= 100:
		return fmt.Sprintf("%.0f", v)
	case v >= 10:
		return fmt.Sprintf("%.1f", v)
	default:
		return fmt.Sprintf("%.2f", v)
	}
}
