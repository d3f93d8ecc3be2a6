package redisbackend

import (
	"slices"
	"testing"

	"github.com/lockgate/lockgate/locks"
)

// TestLockKeys pins the names of a lock's keys, which lockKeys cuts out of
// one string: the scripts (lua/lib_keys.lua names the same ones from the
// lock's key), the Cluster hash tag and every gateway already running
// depend on them. A script gets the lock's key and the record.
func TestLockKeys(t *testing.T) {
	t.Parallel()
	r := &Backend{opts: Options{Prefix: "lockgate:"}}
	k := r.lockKeys(locks.Key{Namespace: "ns", Name: "a:b"}).withToken("H")
	got := []string{k.lock, k.fence, k.queue, k.alive, k.waiters, k.readers, k.delay, k.record}
	want := []string{"lockgate:{ns/a:b}", "lockgate:{ns/a:b}:fence", "lockgate:{ns/a:b}:queue",
		"lockgate:{ns/a:b}:alive", "lockgate:{ns/a:b}:waiters", "lockgate:{ns/a:b}:readers",
		"lockgate:{ns/a:b}:delay",
		"lockgate:{ns/a:b}:t:H"}
	if !slices.Equal(got, want) {
		t.Errorf("keys\n got %q\nwant %q", got, want)
	}
	if got, want := k.all(), []string{"lockgate:{ns/a:b}", "lockgate:{ns/a:b}:t:H"}; !slices.Equal(got, want) {
		t.Errorf("a script's KEYS: got %q, want %q", got, want)
	}
}

// TestSemaphoreKeys pins the names of a semaphore's keys, as TestLockKeys
// does a lock's.
func TestSemaphoreKeys(t *testing.T) {
	t.Parallel()
	r := &Backend{opts: Options{Prefix: "lockgate:"}}
	k := r.semKeys(locks.Key{Namespace: "ns", Name: "a:b"}).withToken("H")
	got := []string{k.holders, k.leases, k.fence, k.queue, k.alive, k.waiters, k.record}
	// The names lua/semlib.lua sem_keys_of makes from the holders key.
	want := []string{"lockgate:sem:{ns/a:b}", "lockgate:sem:{ns/a:b}:leases", "lockgate:sem:{ns/a:b}:fence",
		"lockgate:sem:{ns/a:b}:queue", "lockgate:sem:{ns/a:b}:alive", "lockgate:sem:{ns/a:b}:waiters",
		"lockgate:sem:{ns/a:b}:t:H"}
	if !slices.Equal(got, want) {
		t.Errorf("keys\n got %q\nwant %q", got, want)
	}
	if got, want := k.all(), []string{"lockgate:sem:{ns/a:b}", "lockgate:sem:{ns/a:b}:t:H"}; !slices.Equal(got, want) {
		t.Errorf("a script's KEYS: got %q, want %q", got, want)
	}
}
