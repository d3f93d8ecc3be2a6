package main

import (
	"context"
	"fmt"
	"io"
	"time"
)

// runSelf starts a redis-server and a gateway, runs the preset matrix and
// the memory measurements, and stops both.
func runSelf(ctx context.Context, cfg config, progress io.Writer) (rep *Report, err error) {
	rp, err := startRedis(ctx, cfg.redisServer)
	if err != nil {
		return nil, err
	}
	defer rp.stop()
	secret := randomSecret()
	gw, err := startGateway(ctx, rp.url(), secret)
	if err != nil {
		return nil, err
	}
	defer func() {
		if stopErr := gw.stop(); stopErr != nil && err == nil {
			err = stopErr
		}
	}()
	fmt.Fprintf(progress, "redis-server on %s, gateway on %s\n", rp.addr, gw.URL)
	token, err := mintToken(secret, 24*time.Hour)
	if err != nil {
		return nil, err
	}
	b, err := newBench(cfg, gw.URL, token, rp.url(), progress)
	if err != nil {
		return nil, err
	}
	defer b.close()
	rep = b.newReport(ctx, "self")

	matrix := presetMatrix(cfg)
	for i, sc := range matrix {
		sr, err := b.scenario(ctx, sc, i)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", sc, err)
		}
		rep.Scenarios = append(rep.Scenarios, sr)
	}

	if cfg.heldLocks > 0 {
		t, err := newHTTPTarget(gw.URL, token, cfg.namespace+"-mem-"+b.runID, 10*time.Minute, 16)
		if err != nil {
			return nil, err
		}
		fmt.Fprintf(progress, "Redis memory of %d held locks ... ", cfg.heldLocks)
		m, err := measureHeldLocks(ctx, t, b.rdb, "lockgate:", cfg.heldLocks)
		t.close()
		if err != nil {
			return nil, err
		}
		fmt.Fprintf(progress, "%.0f bytes per lock\n", m.BytesPerLock)
		rep.HeldLocks = &m
	}
	if cfg.parked > 0 {
		t, err := newHTTPTarget(gw.URL, token, cfg.namespace+"-park-"+b.runID, cfg.ttl, 1)
		if err != nil {
			return nil, err
		}
		fmt.Fprintf(progress, "gateway memory of %d parked waiters ... ", cfg.parked)
		p, err := measureParked(ctx, t, token, cfg.parked)
		t.close()
		if err != nil {
			return nil, err
		}
		fmt.Fprintf(progress, "%.0f heap bytes per waiter\n", p.HeapLivePerWaiter)
		rep.Parked = &p
	}
	rep.Machine.LoadEnd = loadAvg()
	return rep, nil
}

// presetMatrix is the scenarios of --self and --processes, in the order
// they run: uncontended, contended, then a semaphore and a shared lock when
// asked for.
func presetMatrix(cfg config) []Scenario {
	var matrix []Scenario
	for _, n := range cfg.uncontendedClients {
		matrix = append(matrix, Scenario{Mode: uncontended, Clients: n, Duration: cfg.duration, Wait: cfg.wait})
	}
	for _, n := range cfg.contendedClients {
		matrix = append(matrix, Scenario{Mode: contended, Clients: n, Duration: cfg.duration, Hold: cfg.hold, Wait: cfg.wait})
	}
	if cfg.semaphoreClients > 0 {
		matrix = append(matrix, Scenario{Mode: semaphoreMode, Clients: cfg.semaphoreClients, Limit: cfg.semaphoreLimit,
			Duration: cfg.duration, Hold: cfg.hold, Wait: cfg.wait})
	}
	if cfg.mixedClients > 0 {
		matrix = append(matrix, Scenario{Mode: mixedMode, Clients: cfg.mixedClients, SharedRatio: cfg.sharedRatio,
			Duration: cfg.duration, Hold: cfg.hold, Wait: cfg.wait})
	}
	return matrix
}
