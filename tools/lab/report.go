package main

import (
	"fmt"
	"io"
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
