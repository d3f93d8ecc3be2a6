package main

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
)

// TestPriority: acquire --priority 9 goes before a waiter that queued
// first at the default priority, status shows the queue's priorities, and
// a permit takes one; a priority out of 0 to 9, or one for a lock set, is a
// usage error.
func TestPriority(t *testing.T) {
	gw := startGateway(t)
	holder := strings.TrimSpace(lockctl(t, gw, nil, "acquire", "prio/x", "--ttl", "1m").want(t, exitOK).stdout)
	low := lockctlAsync(t, gw, nil, "acquire", "prio/x", "--ttl", "1m", "--wait", "30s", "--owner", "low")
	waitForWaiters(t, gw, 1)
	high := lockctlAsync(t, gw, nil, "acquire", "prio/x", "--ttl", "1m", "--wait", "30s", "--owner", "high", "--priority", "9")
	waitForWaiters(t, gw, 2)
	var info struct {
		Owner           string `json:"owner"`
		QueuePriorities []int  `json:"queue_priorities"`
	}
	if err := json.Unmarshal([]byte(lockctl(t, gw, nil, "status", "prio/x", "--json").want(t, exitOK).stdout), &info); err != nil {
		t.Fatal(err)
	}
	if want := []int{9, 0}; !slices.Equal(info.QueuePriorities, want) {
		t.Fatalf("status: got queue_priorities %v, want %v", info.QueuePriorities, want)
	}
	lockctl(t, gw, nil, "release", "prio/x", "--token", holder).want(t, exitOK)
	r := waitRun(t, high).want(t, exitOK)
	if err := json.Unmarshal([]byte(lockctl(t, gw, nil, "status", "prio/x", "--json").want(t, exitOK).stdout), &info); err != nil || info.Owner != "high" {
		t.Fatalf("status after the release: got %+v, %v; want held by the priority-9 waiter", info, err)
	}
	lockctl(t, gw, nil, "release", "prio/x", "--token", strings.TrimSpace(r.stdout)).want(t, exitOK)
	r = waitRun(t, low).want(t, exitOK)
	lockctl(t, gw, nil, "release", "prio/x", "--token", strings.TrimSpace(r.stdout)).want(t, exitOK)

	lockctl(t, gw, nil, "run", "prio/run", "--priority", "3", "--", "true").want(t, exitOK)
	lockctl(t, gw, nil, "run", "prio/sem", "--limit", "2", "--priority", "3", "--", "true").want(t, exitOK)
	for _, args := range [][]string{
		{"acquire", "prio/bad", "--priority", "10"},
		{"acquire", "prio/bad", "--priority", "-1"},
		{"run", "prio/a", "prio/b", "--set", "--priority", "1", "--", "true"},
	} {
		lockctl(t, gw, nil, args...).want(t, exitUsage)
	}
}
