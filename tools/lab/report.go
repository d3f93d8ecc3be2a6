package main

import (
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/lockgate/lockgate/cmd/lockbench/loadgen"
)

// Report is everything one run of the lab measured: the load generator's
// report, and what only the lab measures.
type Report struct {
	loadgen.Report
	HeldLocks *HeldLockMemory `json:"held_locks,omitempty"`
	Parked    *ParkedWaiters  `json:"parked_waiters,omitempty"`
	// Comparison is set by --processes, which leaves Scenarios empty.
	Comparison *Comparison `json:"comparison,omitempty"`
}

// writeSelfMarkdown renders a --self report as markdown: the load
// generator's tables, then the memory measurements.
func writeSelfMarkdown(w io.Writer, r *Report) error {
	var b strings.Builder
	target := "a gateway in lockbench's process (app.Run) and a redis-server on loopback, both started by lockbench"
	if err := loadgen.WriteMarkdown(&b, &r.Report, target); err != nil {
		return err
	}
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

// writeComparison renders a --processes report as markdown.
func writeComparison(w io.Writer, r *Report) error {
	var b strings.Builder
	c, m := r.Comparison, r.Machine
	fmt.Fprintf(&b, "## lockbench --processes, %s\n\n", r.Started.Format("2006-01-02 15:04 MST"))
	fmt.Fprintf(&b, "- every target its own process on loopback, started by lockbench: the built cmd/gateway binary "+
		"(LOCKGATE_LOG_LEVEL=warn) with the embedded backend and with its own redis-server, the HTTP ceiling, etcd; "+
		"each scenario runs against every target in turn\n")
	fmt.Fprintf(&b, "- machine: %s/%s, %d CPUs, %s", m.OS, m.Arch, m.CPUs, m.Go)
	if r.RedisVersion != "" {
		fmt.Fprintf(&b, ", Redis %s", r.RedisVersion)
	}
	if c.EtcdVersion != "" {
		fmt.Fprintf(&b, ", etcd %s", c.EtcdVersion)
	}
	if m.LoadStart != "" {
		fmt.Fprintf(&b, "; load average %s at the start, %s at the end", m.LoadStart, m.LoadEnd)
	}
	fmt.Fprintf(&b, "\n- each run: %gs of new cycles, lease %d ms, contended acquires wait up to %d ms server-side, hold 0\n",
		r.Settings.DurationS, r.Settings.TTLMS, r.Settings.WaitMS)
	b.WriteString("- HTTP ceiling: a plain net/http server process with the gateway's JWT check that answers 201 / 204 with a small JSON body and holds no lock\n")
	if slices.ContainsFunc(c.Runs, func(run TargetRun) bool { return run.Target == "redis-ceiling" }) {
		b.WriteString("- HTTP ceiling + plain Redis lock: the same process, whose acquire is a SET NX PX of a random token and whose release " +
			"is a compare-and-delete script, on the Redis targets' redis-server (the gateway's go-redis settings: RESP2, no retries)\n")
	}
	b.WriteString("- CPU per cycle: utime + stime from /proc/<pid>/stat over the timed part of the run (10 ms ticks), over cycles; " +
		"syscalls per cycle: syscr + syscw from /proc/<pid>/io, which the machine's load hardly moves\n")
	if c.Repeat > 1 {
		fmt.Fprintf(&b, "- %s\n", roundsNote(c.Repeat))
	}
	for _, n := range c.Notes {
		fmt.Fprintf(&b, "- %s\n", n)
	}

	find := func(key, mode string, clients int) *TargetRun {
		for i := range c.Runs {
			if r := &c.Runs[i]; r.Target == key && r.Mode == mode && r.Clients == clients {
				return r
			}
		}
		return nil
	}
	var unc, con []int
	for _, run := range c.Runs {
		if run.Mode == loadgen.ModeUncontended && !slices.Contains(unc, run.Clients) {
			unc = append(unc, run.Clients)
		}
		if run.Mode == loadgen.ModeContended && !slices.Contains(con, run.Clients) {
			con = append(con, run.Clients)
		}
	}
	join := func(ns []int) string {
		s := make([]string, len(ns))
		for i, n := range ns {
			s[i] = fmt.Sprint(n)
		}
		return strings.Join(s, " / ")
	}

	fmt.Fprintf(&b, "\n| target | uncontended %s clients (cycles/s) | x ceiling | contended %s | server CPU per uncontended cycle (µs) |\n", join(unc), join(con))
	b.WriteString("| --- | --- | --- | --- | --- |\n")
	for _, key := range allTargets {
		var label string
		var cps, ratio, ccps, cpu []string
		for _, n := range unc {
			if r := find(key, loadgen.ModeUncontended, n); r != nil {
				label = r.Label
				cps = append(cps, fmt.Sprintf("%.0f", r.Result.CyclesPerSec))
				if r.OverCeiling > 0 {
					ratio = append(ratio, ratioCell(*r))
				}
				switch {
				case r.ServerCPUUS > 0 && r.RedisCPUUS > 0:
					cpu = append(cpu, fmt.Sprintf("%.0f + %.0f Redis", r.ServerCPUUS, r.RedisCPUUS))
				case r.ServerCPUUS > 0:
					cpu = append(cpu, fmt.Sprintf("%.0f", r.ServerCPUUS))
				case r.RedisCPUUS > 0:
					cpu = append(cpu, fmt.Sprintf("%.0f Redis", r.RedisCPUUS))
				}
			}
		}
		for _, n := range con {
			if r := find(key, loadgen.ModeContended, n); r != nil {
				label = r.Label
				ccps = append(ccps, fmt.Sprintf("%.0f", r.Result.CyclesPerSec))
			}
		}
		if label == "" {
			continue
		}
		dash := func(s []string) string {
			if len(s) == 0 {
				return "-"
			}
			return strings.Join(s, " / ")
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s |\n", label, dash(cps), dash(ratio), dash(ccps), dash(cpu))
	}
	writeGoals(&b, r)

	b.WriteString("\n### Uncontended: each client its own lock, acquire + release\n\n")
	b.WriteString("| target | clients | cycles/s | x ceiling | acquire p50 / p99 (ms) | release p50 / p99 (ms) | CPU µs per cycle: server / Redis / lockbench | server syscalls per cycle | errors |\n")
	b.WriteString("| --- | ---: | ---: | ---: | --- | --- | --- | ---: | --- |\n")
	for _, run := range c.Runs {
		if run.Mode != loadgen.ModeUncontended {
			continue
		}
		r := run.Result
		fmt.Fprintf(&b, "| %s | %d | %.0f | %s | %s / %s | %s / %s | %s | %s | %s |\n", run.Target, run.Clients, r.CyclesPerSec, ratioCell(run),
			loadgen.Num(r.Acquire.P50), loadgen.Num(r.Acquire.P99), loadgen.Num(r.Release.P50), loadgen.Num(r.Release.P99), cpuCell(run), syscallCell(run), loadgen.FormatErrors(r.Errors))
	}
	writeRedisCost(&b, c)
	writeReleased(&b, c)
	if len(con) > 0 {
		b.WriteString("\n### Contended: every client on one lock, server-side wait, hold 0\n\n")
		b.WriteString("Self-hand-offs: releases during which another client's acquire was pending (sent, not necessarily " +
			"arrived), after which the releaser got the lock again; lead: the longest such an acquire had been pending " +
			"when the release was sent. A FIFO server hands the lock back only while the pending acquires have not " +
			"reached it: a lead of about a round trip is an acquire still on its way; a long one is a stalled request " +
			"or a queue jumped, which only the server can tell. FIFO bound: (clients − 1) × the mean cycle.\n\n")
		b.WriteString("| target | clients | cycles/s | self-hand-offs while others' acquires were pending, longest lead | wait p99 / max (ms) | FIFO bound (ms) | p99 / FIFO | CPU µs per cycle: server / Redis / lockbench | server syscalls per cycle | errors |\n")
		b.WriteString("| --- | ---: | ---: | --- | --- | ---: | ---: | --- | ---: | --- |\n")
		for _, run := range c.Runs {
			if run.Mode != loadgen.ModeContended || run.Result.Fairness == nil {
				continue
			}
			r, f := run.Result, run.Result.Fairness
			fmt.Fprintf(&b, "| %s | %d | %.0f | %s | %s / %s | %s | %.2f | %s | %s | %s |\n", run.Target, run.Clients, r.CyclesPerSec,
				loadgen.SelfRegrantCell(f), loadgen.Num(f.P99WaitMS), loadgen.Num(f.LongestWaitMS), loadgen.Num(f.FIFOBoundMS),
				f.P99OverFIFO, cpuCell(run), syscallCell(run), loadgen.FormatErrors(r.Errors))
		}
	}
	if slices.ContainsFunc(c.Runs, func(run TargetRun) bool { return run.Result.Semaphore != nil }) {
		b.WriteString("\n### Semaphore: every client on one semaphore, server-side wait, hold 0\n\n")
		b.WriteString("Holders as the clients saw them, from an acquire's answer to its release being sent: the most at once " +
			"(never above the limit) and the mean (permit-time held over the run's length).\n\n")
		b.WriteString("| target | clients | limit | cycles/s | most holders at once | mean holders | wait p50 / p99 / max (ms) | CPU µs per cycle: server / Redis / lockbench | server syscalls per cycle | errors |\n")
		b.WriteString("| --- | ---: | ---: | ---: | ---: | ---: | --- | --- | ---: | --- |\n")
		for _, run := range c.Runs {
			st := run.Result.Semaphore
			if st == nil {
				continue
			}
			r := run.Result
			fmt.Fprintf(&b, "| %s | %d | %d | %.0f | %d | %s | %s / %s / %s | %s | %s | %s |\n", run.Target, run.Clients, st.Limit, r.CyclesPerSec,
				st.MostHolders, loadgen.Num(st.MeanHolders), loadgen.Num(r.Acquire.P50), loadgen.Num(r.Acquire.P99), loadgen.Num(r.Acquire.Max), cpuCell(run), syscallCell(run),
				loadgen.FormatErrors(r.Errors))
		}
	}
	if slices.ContainsFunc(c.Runs, func(run TargetRun) bool { return run.Result.Mixed != nil }) {
		loadgen.WriteMixedHeader(&b)
		for _, run := range c.Runs {
			if run.Result.Mixed != nil {
				loadgen.WriteMixedRow(&b, run.Target, run.Clients, &run.Result)
			}
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func syscallCell(run TargetRun) string {
	if run.ServerSyscalls == 0 {
		return "-"
	}
	return fmt.Sprintf("%.1f", run.ServerSyscalls)
}

func cpuCell(run TargetRun) string {
	cell := func(v float64) string {
		if v == 0 {
			return "-"
		}
		return fmt.Sprintf("%.0f", v)
	}
	return cell(run.ServerCPUUS) + " / " + cell(run.RedisCPUUS) + " / " + cell(run.BenchCPUUS)
}

// writeRedisCost writes what each run cost Redis by Redis's own
// accounting, with the plain lock's ratio, when any run has it.
func writeRedisCost(b *strings.Builder, c *Comparison) {
	if !slices.ContainsFunc(c.Runs, func(run TargetRun) bool { return run.Redis != nil }) {
		return
	}
	b.WriteString("\n### What a cycle costs Redis, by its own accounting\n\n")
	b.WriteString("Redis main-thread CPU (INFO cpu: used_cpu_sys_main_thread + used_cpu_user_main_thread) over the timed part " +
		"of the run, per cycle; x plain: over the plain lock's in the same round and scenario (of rounds, the median of " +
		"the rounds' ratios, min–max in brackets). Commands per cycle from INFO commandstats, those run by scripts " +
		"included, of the median round.\n\n")
	b.WriteString("| target | mode | clients | Redis main-thread µs per cycle | x plain | commands per cycle | most run per cycle |\n")
	b.WriteString("| --- | --- | ---: | ---: | ---: | ---: | --- |\n")
	for _, run := range c.Runs {
		rc := run.Redis
		if rc == nil {
			continue
		}
		ratio := "-"
		switch {
		case run.RedisOverPlain > 0 && len(run.Rounds) > 0:
			ratio = fmt.Sprintf("%.2f (%.2f–%.2f)", run.RedisOverPlain, run.RedisOverPlainMin, run.RedisOverPlainMax)
		case run.RedisOverPlain > 0:
			ratio = fmt.Sprintf("%.2f", run.RedisOverPlain)
		}
		fmt.Fprintf(b, "| %s | %s | %d | %.1f | %s | %.1f | %s |\n", run.Target, run.Mode, run.Clients, rc.MainCPUUS, ratio, rc.Commands, topCommands(rc, 6))
	}
}

// writeReleased writes what a released lock name keeps in Redis.
func writeReleased(b *strings.Builder, c *Comparison) {
	if len(c.Released) == 0 {
		return
	}
	b.WriteString("\n### What a released lock name keeps in Redis\n\n")
	b.WriteString("Names acquired and released once each through the gateway. Kept: the growth of used_memory per name once " +
		"the keys that expire within two minutes (the grant's and the calls' records) are deleted, keyspace overhead " +
		"included; what stays through --fence-retention. By kind: MEMORY USAGE per name, and the longest time to live.\n\n")
	b.WriteString("| target | names | used_memory per name, records included | kept per name | keys left, by kind: keys per name, MEMORY USAGE per name, longest TTL |\n")
	b.WriteString("| --- | ---: | ---: | ---: | --- |\n")
	for _, m := range c.Released {
		kinds := make([]string, len(m.Kinds))
		for i, k := range m.Kinds {
			name := k.Kind
			if name == "" {
				name = "(the lock's key)"
			}
			kinds[i] = fmt.Sprintf("`%s` %.2f, %.0f B, %.0f s", name, k.KeysPerName, k.BytesPerName, k.TTLS)
		}
		fmt.Fprintf(b, "| %s | %d | %.0f B | %.0f B | %s |\n", m.Target, m.Names, m.UsedMemoryPerName, m.KeptPerName, strings.Join(kinds, "; "))
	}
}
