package main

import (
	"testing"
	"time"
)

func TestParseRedisSample(t *testing.T) {
	info := "# CPU\r\nused_cpu_sys:9.5\r\nused_cpu_sys_main_thread:1.250000\r\nused_cpu_user_main_thread:0.750000\r\n" +
		"# Commandstats\r\ncmdstat_evalsha:calls=12,usec=340,usec_per_call=28.33,rejected_calls=0,failed_calls=0\r\n" +
		"cmdstat_info:calls=3,usec=30,usec_per_call=10.00,rejected_calls=0,failed_calls=0\r\n"
	s := parseRedisSample(info)
	if s.mainCPU != 2*time.Second {
		t.Errorf("main-thread CPU: got %v, want 2s", s.mainCPU)
	}
	before := redisSample{calls: map[string]int64{"evalsha": 2, "info": 1}, usec: map[string]int64{"evalsha": 40}}
	c := costPerCycle(before, s, 5)
	if c.Commands != 2 || c.ByCommand["evalsha"] != 2 || c.USecByCommand["evalsha"] != 60 {
		t.Errorf("per cycle: got %+v, want 2 evalsha of 60 µs and nothing else", c)
	}
	if c.MainCPUUS != 400000 {
		t.Errorf("main-thread µs per cycle: got %v, want 400000", c.MainCPUUS)
	}
}

func TestKeyKind(t *testing.T) {
	for key, want := range map[string]string{
		"lockgate:{ns/a}":            "",
		"lockgate:{ns/a}:fence":      ":fence",
		"lockgate:{ns/a}:c:abc123":   ":c:*",
		"lockgate:{ns/a}:t:deadbeef": ":t:*",
	} {
		if got := keyKind(key); got != want {
			t.Errorf("keyKind(%q): got %q, want %q", key, got, want)
		}
	}
}
