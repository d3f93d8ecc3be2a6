package loadgen

import (
	"testing"
	"time"
)

func TestPercentile(t *testing.T) {
	hundred := make([]int64, 100)
	for i := range hundred {
		hundred[i] = int64(i + 1) // 1 ... 100
	}
	tests := map[string]struct {
		sorted []int64
		p      float64
		want   int64
	}{
		"empty":                   {nil, 0.5, 0},
		"one sample is every p":   {[]int64{7}, 0.99, 7},
		"median of odd count":     {[]int64{1, 2, 3, 4, 5}, 0.5, 3},
		"median of even count":    {[]int64{1, 2, 3, 4}, 0.5, 2}, // nearest rank: no interpolation
		"p90 of 1..100":           {hundred, 0.90, 90},
		"p99 of 1..100":           {hundred, 0.99, 99},
		"p100 is the max":         {hundred, 1, 100},
		"tiny p is the min":       {hundred, 0.001, 1},
		"p99 of ten is the max":   {[]int64{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}, 0.99, 10},
		"p90 of ten is the ninth": {[]int64{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}, 0.90, 9},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			if got := percentile(tt.sorted, tt.p); got != tt.want {
				t.Errorf("percentile(%v, %v) = %d, want %d", tt.sorted, tt.p, got, tt.want)
			}
		})
	}
}

func TestSummarizeSortsAndConvertsToMilliseconds(t *testing.T) {
	var samples []int64
	for i := 200; i >= 1; i-- { // 200 ms down to 1 ms, unsorted on purpose
		samples = append(samples, int64(time.Duration(i)*time.Millisecond))
	}
	got := summarize(samples)
	want := Latency{N: 200, P50: 100, P90: 180, P99: 198, Max: 200}
	if got != want {
		t.Errorf("summarize = %+v, want %+v", got, want)
	}
	if (summarize(nil) != Latency{}) {
		t.Errorf("summarize(nil) = %+v, want the zero Latency", summarize(nil))
	}
}
