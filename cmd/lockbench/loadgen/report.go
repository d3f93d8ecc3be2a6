package loadgen

import (
	"fmt"
	"io"
	"os"
	"runtime"
	"slices"
	"strings"
	"time"
)

// Report is everything one lockbench run measured.
type Report struct {
	// Target is the gateway's URL, or what else was measured ("self").
	Target       string           `json:"target"`
	Started      time.Time        `json:"started"`
	Machine      Machine          `json:"machine"`
	RedisVersion string           `json:"redis_version,omitempty"`
	Settings     Settings         `json:"settings"`
	Scenarios    []ScenarioReport `json:"scenarios"`
}

// Machine is where the load generator ran.
type Machine struct {
	OS         string `json:"os"`
	Arch       string `json:"arch"`
	CPUs       int    `json:"cpus"`
	GOMAXPROCS int    `json:"gomaxprocs"`
	Go         string `json:"go"`
	// LoadStart and LoadEnd are /proc/loadavg's 1, 5 and 15 minute load
	// averages when lockbench started and finished (Linux only): on a
	// shared machine they say how much else was running.
	LoadStart string `json:"load_start,omitempty"`
	LoadEnd   string `json:"load_end,omitempty"`
}

// LoadAvg returns the 1, 5 and 15 minute load averages, or "" where
// /proc/loadavg does not exist.
func LoadAvg() string {
	data, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return ""
	}
	f := strings.Fields(string(data))
	if len(f) < 3 {
		return ""
	}
	return strings.Join(f[:3], " ")
}

// Settings are the knobs every scenario shared.
type Settings struct {
	DurationS float64 `json:"duration_s"`
	WaitMS    int64   `json:"wait_ms"`
	TTLMS     int64   `json:"ttl_ms"`
}

// ScenarioReport is one scenario against the gateway and the floor.
type ScenarioReport struct {
	Name    string  `json:"name"`
	Mode    string  `json:"mode"`
	Clients int     `json:"clients"`
	HoldMS  float64 `json:"hold_ms"`
	Gateway Result  `json:"gateway"`
	Floor   *Result `json:"floor,omitempty"`
	// GatewayOverFloor is the gateway's cycles/s over the floor's.
	GatewayOverFloor float64 `json:"gateway_over_floor,omitempty"`
}

// NewReport starts the report of a run against target: when, where, and
// the settings of opts. The caller adds the Redis version it knows.
func NewReport(target string, opts Options) *Report {
	return &Report{
		Target:  target,
		Started: time.Now().UTC().Truncate(time.Second),
		Machine: Machine{
			OS: runtime.GOOS, Arch: runtime.GOARCH, CPUs: runtime.NumCPU(),
			GOMAXPROCS: runtime.GOMAXPROCS(0), Go: runtime.Version(),
			LoadStart: LoadAvg(),
		},
		Settings: Settings{
			DurationS: opts.Duration.Seconds(),
			WaitMS:    opts.Wait.Milliseconds(),
			TTLMS:     opts.TTL.Milliseconds(),
		},
	}
}

// WriteMarkdown renders the report as markdown tables. target says what
// was measured, in the report's first line.
func WriteMarkdown(w io.Writer, r *Report, target string) error {
	var b strings.Builder
	m := r.Machine
	fmt.Fprintf(&b, "## lockbench, %s\n\n", r.Started.Format("2006-01-02 15:04 MST"))
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
		b.WriteString("- floor: the same calls to the lock engine in-process (`redisbackend.New`) against the same Redis, no HTTP\n\n")
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
			latency4(s.Gateway.Acquire), latency4(s.Gateway.Release), FormatErrors(s.Gateway.Errors))
		if f := s.Floor; f != nil {
			fmt.Fprintf(&b, "| | floor | %.0f | | %s | %s | %s |\n", f.CyclesPerSec,
				latency4(f.Acquire), latency4(f.Release), FormatErrors(f.Errors))
		}
	}

	if slices.ContainsFunc(r.Scenarios, func(s ScenarioReport) bool { return s.Mode == ModeContended }) {
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
			if s.Mode != ModeContended {
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
		calls = fmt.Sprintf("%s / %s", Num(r.Redis.PerHandoff), Num(r.Redis.ScriptsPerHandoff))
	}
	return fmt.Sprintf("| %s | %s | %s / %s | %s | %s / %s | %s | %.2f, %.2f | %d – %d | %s |\n",
		name, r.Path, Num(h.P50), Num(h.P99), SelfRegrantCell(f),
		Num(f.P99WaitMS), Num(f.LongestWaitMS), Num(f.FIFOBoundMS), f.P99OverFIFO, f.LongestOverFIFO,
		f.MinGrants, f.MaxGrants, calls)
}

func latency4(l Latency) string {
	if l.N == 0 {
		return "–"
	}
	return fmt.Sprintf("%s / %s / %s / %s", Num(l.P50), Num(l.P90), Num(l.P99), Num(l.Max))
}

// Num prints a number with about three significant digits.
func Num(v float64) string {
	switch {
	case v >= 100:
		return fmt.Sprintf("%.0f", v)
	case v >= 10:
		return fmt.Sprintf("%.1f", v)
	default:
		return fmt.Sprintf("%.2f", v)
	}
}
