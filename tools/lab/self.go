package main

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/lockgate/lockgate/cmd/lockbench/loadgen"
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
	b, err := loadgen.NewBench(cfg.benchOptions(), gw.URL, token, rp.url(), progress)
	if err != nil {
		return nil, err
	}
	defer b.Close()
	rep = &Report{Report: *b.NewReport(ctx, "self")}

	matrix := presetMatrix(cfg)
	for i, sc := range matrix {
		sr, err := b.Scenario(ctx, sc, i)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", sc, err)
		}
		rep.Scenarios = append(rep.Scenarios, sr)
	}

	if cfg.heldLocks > 0 {
		t, err := loadgen.NewHTTPTarget(gw.URL, token, cfg.namespace+"-mem-"+b.RunID(), 10*time.Minute, 16)
		if err != nil {
			return nil, err
		}
		fmt.Fprintf(progress, "Redis memory of %d held locks ... ", cfg.heldLocks)
		m, err := measureHeldLocks(ctx, t, b.Redis(), "lockgate:", cfg.heldLocks)
		t.Close()
		if err != nil {
			return nil, err
		}
		fmt.Fprintf(progress, "%.0f bytes per lock\n", m.BytesPerLock)
		rep.HeldLocks = &m
	}
	if cfg.parked > 0 {
		t, err := loadgen.NewHTTPTarget(gw.URL, token, cfg.namespace+"-park-"+b.RunID(), cfg.ttl, 1)
		if err != nil {
			return nil, err
		}
		fmt.Fprintf(progress, "gateway memory of %d parked waiters ... ", cfg.parked)
		p, err := measureParked(ctx, t, token, cfg.parked)
		t.Close()
		if err != nil {
			return nil, err
		}
		fmt.Fprintf(progress, "%.0f heap bytes per waiter\n", p.HeapLivePerWaiter)
		rep.Parked = &p
	}
	rep.Machine.LoadEnd = loadgen.LoadAvg()
	return rep, nil
}

// presetMatrix is the scenarios of --self and --processes, in the order
// they run: uncontended, contended, then a semaphore and a shared lock when
// asked for.
func presetMatrix(cfg config) []loadgen.Scenario {
	var matrix []loadgen.Scenario
	for _, n := range cfg.uncontendedClients {
		matrix = append(matrix, loadgen.Scenario{Mode: loadgen.ModeUncontended, Clients: n, Duration: cfg.duration, Wait: cfg.wait})
	}
	for _, n := range cfg.contendedClients {
		matrix = append(matrix, loadgen.Scenario{Mode: loadgen.ModeContended, Clients: n, Duration: cfg.duration, Hold: cfg.hold, Wait: cfg.wait})
	}
	if cfg.semaphoreClients > 0 {
		matrix = append(matrix, loadgen.Scenario{Mode: loadgen.ModeSemaphore, Clients: cfg.semaphoreClients, Limit: cfg.semaphoreLimit,
			Duration: cfg.duration, Hold: cfg.hold, Wait: cfg.wait})
	}
	if cfg.mixedClients > 0 {
		matrix = append(matrix, loadgen.Scenario{Mode: loadgen.ModeMixed, Clients: cfg.mixedClients, SharedRatio: cfg.sharedRatio,
			Duration: cfg.duration, Hold: cfg.hold, Wait: cfg.wait})
	}
	return matrix
}
