package loadgen

import (
	"math"
	"slices"
	"time"
)

// Latency summarises a set of durations, in milliseconds for the report.
type Latency struct {
	N   int     `json:"n"`
	P50 float64 `json:"p50_ms"`
	P90 float64 `json:"p90_ms"`
	P99 float64 `json:"p99_ms"`
	Max float64 `json:"max_ms"`
}

// summarize sorts samples (nanoseconds) in place and returns their
// percentiles. No samples give the zero Latency.
func summarize(samples []int64) Latency {
	if len(samples) == 0 {
		return Latency{}
	}
	slices.Sort(samples)
	return Latency{
		N:   len(samples),
		P50: ms(percentile(samples, 0.50)),
		P90: ms(percentile(samples, 0.90)),
		P99: ms(percentile(samples, 0.99)),
		Max: ms(samples[len(samples)-1]),
	}
}

// percentile returns the nearest-rank p-quantile (0 < p <= 1) of sorted: the
// smallest sample such that at least p of all samples are no larger. It
// never interpolates, so every percentile it reports was really observed.
func percentile(sorted []int64, p float64) int64 {
	if len(sorted) == 0 {
		return 0
	}
	rank := int(math.Ceil(p * float64(len(sorted)))) // 1-based
	rank = min(max(rank, 1), len(sorted))
	return sorted[rank-1]
}

// ms converts nanoseconds to milliseconds.
func ms(ns int64) float64 { return float64(ns) / float64(time.Millisecond) }
