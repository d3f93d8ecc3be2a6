package main

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockgate/lockgate/cmd/lockbench/loadgen"
)

// HeldLockMemory is what held locks cost Redis.
type HeldLockMemory struct {
	Locks int `json:"locks"`
	// KeysPerLock is how many keys the locks' hash tags cover while held,
	// the calls' records aside (CallRecordBytesPerLock).
	KeysPerLock float64 `json:"keys_per_lock"`
	// BytesPerLock sums MEMORY USAGE of those keys, per lock.
	BytesPerLock float64 `json:"bytes_per_lock"`
	// CallRecordBytesPerLock sums MEMORY USAGE of the replies the acquires
	// left (lua/once.lua), per lock: they go within seconds.
	CallRecordBytesPerLock float64 `json:"call_record_bytes_per_lock"`
	// UsedMemoryPerLock is the growth of INFO used_memory, per lock:
	// MEMORY USAGE plus the keyspace's own overhead. The call records of
	// earlier runs expiring meanwhile can make it small, even negative.
	UsedMemoryPerLock float64 `json:"used_memory_per_lock"`
	// ReleasedKeysPerLock and BytesPerReleasedLock are what stays behind
	// once every lock is released (the fencing counter, until it expires).
	ReleasedKeysPerLock  float64 `json:"released_keys_per_lock"`
	BytesPerReleasedLock float64 `json:"bytes_per_released_lock"`
}

// measureHeldLocks acquires n locks through the gateway in a namespace of
// their own, measures the keys under their hash tags, releases them and
// measures what is left. prefix is the gateway's Redis key prefix.
func measureHeldLocks(ctx context.Context, gw *loadgen.HTTPTarget, rdb *redis.Client, prefix string, n int) (HeldLockMemory, error) {
	m := HeldLockMemory{Locks: n}
	before, err := usedMemory(ctx, rdb)
	if err != nil {
		return m, err
	}
	sessions := make([]loadgen.Session, n)
	tokens := make([]string, n)
	if err := forEach(n, 16, func(i int) error {
		sessions[i] = gw.NewSession(ctx, fmt.Sprintf("held-%d", i))
		var err error
		tokens[i], _, err = sessions[i].Acquire(0)
		return err
	}); err != nil {
		return m, fmt.Errorf("acquire the locks to measure: %w", err)
	}
	after, err := usedMemory(ctx, rdb)
	if err != nil {
		return m, err
	}
	pattern := globEscape(prefix+"{"+gw.Namespace()+"/") + "*"
	keys, bytes, callBytes, err := keyUsage(ctx, rdb, pattern)
	if err != nil {
		return m, err
	}
	m.KeysPerLock = float64(keys) / float64(n)
	m.BytesPerLock = float64(bytes) / float64(n)
	m.CallRecordBytesPerLock = float64(callBytes) / float64(n)
	m.UsedMemoryPerLock = float64(after-before) / float64(n)

	if err := forEach(n, 16, func(i int) error { return sessions[i].Release(tokens[i]) }); err != nil {
		return m, fmt.Errorf("release the measured locks: %w", err)
	}
	keys, bytes, _, err = keyUsage(ctx, rdb, pattern)
	if err != nil {
		return m, err
	}
	m.ReleasedKeysPerLock = float64(keys) / float64(n)
	m.BytesPerReleasedLock = float64(bytes) / float64(n)
	return m, nil
}

// forEach runs f(0) ... f(n-1) on up to par goroutines and returns the
// first error.
func forEach(n, par int, f func(i int) error) error {
	next := make(chan int)
	errs := make(chan error, par)
	var wg sync.WaitGroup
	for range par {
		wg.Go(func() {
			var first error
			for i := range next {
				if err := f(i); err != nil && first == nil {
					first = err
				}
			}
			errs <- first
		})
	}
	for i := range n {
		next <- i
	}
	close(next)
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

func usedMemory(ctx context.Context, rdb *redis.Client) (int64, error) {
	v, err := loadgen.InfoField(ctx, rdb, "memory", "used_memory")
	if err != nil {
		return 0, err
	}
	return strconv.ParseInt(v, 10, 64)
}

// notNamesMemory is the memory that is none of the names' own, which
// measureReleasedNames leaves out: the keyspace's hash tables (MEMORY STATS
// db.0 overhead.hashtable.main and .expires): their buckets, which grow
// in steps (the table doubles) with every key there is, records included,
// and shrink only when a tenth of them are in use.
//
// It also counts the clients' buffers (INFO memory mem_clients_normal),
// which come and go with the calls in flight and the rate of the last
// second, and are no name's.
func notNamesMemory(ctx context.Context, rdb *redis.Client) (int64, error) {
	v, err := loadgen.InfoField(ctx, rdb, "memory", "mem_clients_normal")
	if err != nil {
		return 0, err
	}
	clients, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		return 0, err
	}
	tables, err := hashTables(ctx, rdb)
	return clients + tables, err
}

// hashTables is the memory of the keyspace's hash tables (see
// notNamesMemory).
func hashTables(ctx context.Context, rdb *redis.Client) (int64, error) {
	v, err := rdb.Do(ctx, "MEMORY", "STATS").Result()
	if err != nil {
		return 0, err
	}
	db, ok := statsField(v, "db.0")
	if !ok {
		return 0, nil // an empty keyspace
	}
	var sum int64
	for _, f := range []string{"overhead.hashtable.main", "overhead.hashtable.expires"} {
		n, _ := statsField(db, f)
		i, _ := n.(int64)
		sum += i
	}
	return sum, nil
}

// statsField is the value of name in a reply of MEMORY STATS: a list of
// names and values (RESP2), or a map (RESP3).
func statsField(v any, name string) (any, bool) {
	switch v := v.(type) {
	case []any:
		for i := 0; i+1 < len(v); i += 2 {
			if v[i] == name {
				return v[i+1], true
			}
		}
	case map[any]any:
		f, ok := v[name]
		return f, ok
	}
	return nil, false
}

// bucketBytes is what a key adds to the keyspace's hash tables at a load
// factor of 1: a bucket (a pointer) in the table of keys and one in that of
// expiries, for a key that expires.
const bucketBytes = 2 * 8

// keyUsage counts the keys matching pattern and sums their MEMORY USAGE,
// the calls' records (KEYS[1]:c:<call id>, see lua/once.lua) apart.
func keyUsage(ctx context.Context, rdb *redis.Client, pattern string) (keys, bytes, callBytes int64, err error) {
	iter := rdb.Scan(ctx, 0, pattern, 1000).Iterator()
	for iter.Next(ctx) {
		n, err := rdb.MemoryUsage(ctx, iter.Val(), 0).Result()
		if err != nil && !errors.Is(err, redis.Nil) {
			return 0, 0, 0, fmt.Errorf("MEMORY USAGE: %w", err)
		}
		if strings.Contains(iter.Val(), "}:c:") {
			callBytes += n
			continue
		}
		keys++
		bytes += n
	}
	if err := iter.Err(); err != nil {
		return 0, 0, 0, fmt.Errorf("SCAN: %w", err)
	}
	return keys, bytes, callBytes, nil
}

// globEscape quotes the characters SCAN MATCH treats as patterns.
func globEscape(s string) string {
	var b strings.Builder
	for _, r := range s {
		if strings.ContainsRune(`*?[]\`, r) {
			b.WriteByte('\\')
		}
		b.WriteRune(r)
	}
	return b.String()
}

// ReleasedNameMemory is what a lock name keeps in Redis once it was
// acquired and released: through --fence-retention, the fencing counter
// and the history; for a minute or less, the records of the grant and of
// the calls.
type ReleasedNameMemory struct {
	Target string `json:"target"`
	Names  int    `json:"names"`
	// UsedMemoryPerName is the growth of INFO used_memory per name just
	// after the releases, the short-lived records included.
	UsedMemoryPerName float64 `json:"used_memory_per_name"`
	// KeptPerName is the growth of used_memory per name once the keys that
	// expire within two minutes are deleted: what a name keeps through its
	// retention, the keyspace's overhead included (its entries in the dict
	// of keys and in that of expiries). Of the hash tables, which grew for
	// the records too and do not shrink with them, it counts a bucket in
	// each table per key kept (bucketBytes, as at a load factor of 1; up
	// to twice that just after a table doubled) instead of their growth,
	// which depends on where in its doubling the keyspace was.
	KeptPerName float64 `json:"kept_per_name"`
	// Kinds are the keys left behind, by kind.
	Kinds []KeyKind `json:"kinds"`
}

// KeyKind is the keys of one kind that the released names left.
type KeyKind struct {
	// Kind is the key's part after the hash tag, with ids as *: "" is the
	// lock's own key, ":fence", ":c:*" a call's record.
	Kind         string  `json:"kind"`
	KeysPerName  float64 `json:"keys_per_name"`
	BytesPerName float64 `json:"bytes_per_name"` // MEMORY USAGE
	// TTLS is the longest time to live of the kind's keys, s.
	TTLS float64 `json:"ttl_s"`
	Kept bool    `json:"kept"` // lives longer than two minutes
}

// keptAfter: a key that lives longer than this outlives the records.
const keptAfter = 2 * time.Minute

// measureReleasedNames acquires and releases n names through the gateway,
// each once, and measures what they leave in Redis (see
// ReleasedNameMemory). prefix is the gateway's Redis key prefix; tag makes
// the names the run's own.
func measureReleasedNames(ctx context.Context, target string, gw *loadgen.HTTPTarget, rdb *redis.Client, prefix, tag string, n int) (ReleasedNameMemory, error) {
	m := ReleasedNameMemory{Target: target, Names: n}
	before, err := usedMemory(ctx, rdb)
	if err != nil {
		return m, err
	}
	tablesBefore, err := notNamesMemory(ctx, rdb)
	if err != nil {
		return m, err
	}
	if err := forEach(n, 16, func(i int) error {
		s := gw.NewSession(ctx, fmt.Sprintf("released-%s-%d", tag, i))
		token, _, err := s.Acquire(0)
		if err != nil {
			return err
		}
		return s.Release(token)
	}); err != nil {
		return m, fmt.Errorf("acquire and release the names to measure: %w", err)
	}
	after, err := usedMemory(ctx, rdb)
	if err != nil {
		return m, err
	}
	m.UsedMemoryPerName = float64(after-before) / float64(n)

	kinds := map[string]*KeyKind{}
	var short []string
	var kept int64
	pattern := globEscape(prefix+"{"+gw.Namespace()+"/released-"+tag+"-") + "*"
	iter := rdb.Scan(ctx, 0, pattern, 1000).Iterator()
	for iter.Next(ctx) {
		key := iter.Val()
		size, err := rdb.MemoryUsage(ctx, key, 0).Result()
		if err != nil && !errors.Is(err, redis.Nil) {
			return m, fmt.Errorf("MEMORY USAGE: %w", err)
		}
		ttl, err := rdb.PTTL(ctx, key).Result()
		if err != nil {
			return m, fmt.Errorf("PTTL: %w", err)
		}
		kind := keyKind(key)
		k := kinds[kind]
		if k == nil {
			k = &KeyKind{Kind: kind}
			kinds[kind] = k
		}
		k.KeysPerName++
		k.BytesPerName += float64(size)
		k.TTLS = max(k.TTLS, ttl.Seconds())
		if ttl > 0 && ttl <= keptAfter {
			short = append(short, key)
		} else {
			kept++
		}
	}
	if err := iter.Err(); err != nil {
		return m, fmt.Errorf("SCAN: %w", err)
	}
	for _, kind := range slices.Sorted(maps.Keys(kinds)) {
		k := kinds[kind]
		k.Kept = k.TTLS < 0 || k.TTLS > keptAfter.Seconds()
		k.KeysPerName /= float64(n)
		k.BytesPerName /= float64(n)
		m.Kinds = append(m.Kinds, *k)
	}
	for batch := range slices.Chunk(short, 500) {
		if err := rdb.Del(ctx, batch...).Err(); err != nil {
			return m, fmt.Errorf("DEL: %w", err)
		}
	}
	after, err = usedMemory(ctx, rdb)
	if err != nil {
		return m, err
	}
	tablesAfter, err := notNamesMemory(ctx, rdb)
	if err != nil {
		return m, err
	}
	m.KeptPerName = float64(after-before-(tablesAfter-tablesBefore)+kept*bucketBytes) / float64(n)
	return m, nil
}

// keyKind is key's part after its hash tag, with the ids of records and
// calls as *.
func keyKind(key string) string {
	_, rest, ok := strings.Cut(key, "}")
	if !ok {
		return key
	}
	for _, sep := range []string{":c:", ":t:", ":idem:"} {
		if i := strings.Index(rest, sep); i >= 0 {
			return rest[:i+len(sep)] + "*"
		}
	}
	return rest
}
