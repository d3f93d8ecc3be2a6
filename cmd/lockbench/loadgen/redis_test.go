package loadgen

import (
	"maps"
	"testing"
)

func TestCommandStatsDiff(t *testing.T) {
	before := parseCommandStats("# Commandstats\r\n" +
		"cmdstat_evalsha:calls=10,usec=300,usec_per_call=30.00,rejected_calls=0,failed_calls=0\r\n" +
		"cmdstat_hget:calls=10,usec=20,usec_per_call=2.00,rejected_calls=0,failed_calls=0\r\n" +
		"cmdstat_info:calls=3,usec=90,usec_per_call=30.00,rejected_calls=0,failed_calls=0\r\n")
	after := parseCommandStats("# Commandstats\r\n" +
		"cmdstat_evalsha:calls=14,usec=420,usec_per_call=30.00,rejected_calls=0,failed_calls=0\r\n" +
		"cmdstat_hget:calls=14,usec=28,usec_per_call=2.00,rejected_calls=0,failed_calls=0\r\n" +
		"cmdstat_publish:calls=2,usec=8,usec_per_call=4.00,rejected_calls=0,failed_calls=0\r\n" +
		"cmdstat_info:calls=5,usec=150,usec_per_call=30.00,rejected_calls=0,failed_calls=0\r\n")
	got := diffCalls(before, after)
	want := map[string]int64{"evalsha": 4, "hget": 4, "publish": 2} // lockbench's own INFO left out
	if !maps.Equal(got.ByCommand, want) {
		t.Errorf("by command = %v, want %v", got.ByCommand, want)
	}
	if got.Total != 10 {
		t.Errorf("total = %d, want 10", got.Total)
	}
}
