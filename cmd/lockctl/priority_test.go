package main

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestPriority: acquire --priority 9 goes before a waiter that queued
// first at the default priority, status shows the queue's priorities, a
// permit takes one, and so does a lock set (lockset acquire, run --set),
// served before a waiter that came first; a priority out of 0 to 9 is a
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

	// A lock set waits at its priority in each lock's queue too.
	holder = strings.TrimSpace(lockctl(t, gw, nil, "acquire", "prio/s1", "--ttl", "1m").want(t, exitOK).stdout)
	low = lockctlAsync(t, gw, nil, "acquire", "prio/s1", "--ttl", "1m", "--wait", "30s", "--owner", "low")
	waitForWaiters(t, gw, 1)
	set := lockctlAsync(t, gw, nil, "lockset", "acquire", "prio/s1", "prio/s0", "--ttl", "1m", "--wait", "30s", "--owner", "set", "--priority", "9")
	deadline := time.Now().Add(20 * time.Second)
	for {
		if err := json.Unmarshal([]byte(lockctl(t, gw, nil, "status", "prio/s1", "--json").want(t, exitOK).stdout), &info); err != nil {
			t.Fatal(err)
		}
		if len(info.QueuePriorities) == 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the set never queued on prio/s1: queue_priorities %v", info.QueuePriorities)
		}
		time.Sleep(5 * time.Millisecond) // poll interval, not synchronisation
	}
	if want := []int{9, 0}; !slices.Equal(info.QueuePriorities, want) {
		t.Fatalf("status of the set's lock: got queue_priorities %v, want %v", info.QueuePriorities, want)
	}
	lockctl(t, gw, nil, "release", "prio/s1", "--token", holder).want(t, exitOK)
	r = waitRun(t, set).want(t, exitOK)
	if err := json.Unmarshal([]byte(lockctl(t, gw, nil, "status", "prio/s1", "--json").want(t, exitOK).stdout), &info); err != nil || info.Owner != "set" {
		t.Fatalf("status after the release: got %+v, %v; want held by the priority-9 set", info, err)
	}
	lockctl(t, gw, nil, "lockset", "release", "prio/s0", "prio/s1", "--token", strings.TrimSpace(r.stdout)).want(t, exitOK)
	r = waitRun(t, low).want(t, exitOK)
	lockctl(t, gw, nil, "release", "prio/s1", "--token", strings.TrimSpace(r.stdout)).want(t, exitOK)

	lockctl(t, gw, nil, "run", "prio/run", "--priority", "3", "--", "true").want(t, exitOK)
	lockctl(t, gw, nil, "run", "prio/sem", "--limit", "2", "--priority", "3", "--", "true").want(t, exitOK)
	lockctl(t, gw, nil, "run", "prio/a", "prio/b", "--set", "--priority", "1", "--", "true").want(t, exitOK)
	for _, args := range [][]string{
		{"acquire", "prio/bad", "--priority", "10"},
		{"acquire", "prio/bad", "--priority", "-1"},
		{"lockset", "acquire", "prio/a", "prio/b", "--priority", "10"},
	} {
		lockctl(t, gw, nil, args...).want(t, exitUsage)
	}
}
