package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"strconv"
	"time"

	"github.com/redis/rueidis"
)

// runSuite is `make bench`: the standard comparisons of sluice against the
// direct path on one cluster, each run alternated A B A B so that the
// ratios hold on a noisy machine, then the memory figures.
func runSuite(cfg config, out io.Writer) error {
	if len(cfg.cluster) == 0 {
		return fmt.Errorf("-suite needs -cluster (and a sluice at -addr serving that cluster)")
	}
	type row struct {
		name  string
		c     comparison
		extra string
	}
	var rows []row
	// make bench also prints redis-benchmark's rows (-neutral): say which
	// generator made these.
	fmt.Fprintf(out, "Go load generator rows (bench -suite: rueidis clients in this process, on the same cores as sluice; direct = sluice's own script by EVALSHA)\n")
	compare := func(name string, c config) (comparison, []result, error) {
		var rs []result
		ts := []target{newSluiceTarget("sluice", []string{c.addr}, c.lim, c.cluster)}
		d, err := newDirectTarget(c.cluster, c.lim, c.periodUS)
		if err != nil {
			return comparison{}, nil, err
		}
		ts = append(ts, d)
		for round := 1; round <= c.rounds; round++ {
			for _, t := range ts {
				r, err := runOnce(c, t, c.keys.names(), round)
				if err != nil {
					return comparison{}, nil, fmt.Errorf("%s: %w", name, err)
				}
				if err := r.failed(); err != nil {
					return comparison{}, nil, fmt.Errorf("%s: %w", name, err)
				}
				rs = append(rs, r)
			}
		}
		cmp := compareRuns(rs, "sluice", "direct")
		fmt.Fprintf(out, "%-44s sluice %8.0f/s  direct %8.0f/s  ratio %.2fx\n", name, cmp.OpsA, cmp.OpsB, cmp.OpsRatio)
		return cmp, rs, nil
	}

	base := cfg
	base.pipeline, base.rate, base.requests = 1, 0, 0
	c1, _, err := compare("uniform keys, 50 clients, no pipelining", base)
	if err != nil {
		return err
	}
	rows = append(rows, row{name: "50 clients, no pipelining", c: c1})

	p16 := base
	p16.pipeline = 16
	c16, _, err := compare("uniform keys, 50 clients, -pipeline 16", p16)
	if err != nil {
		return err
	}
	rows = append(rows, row{name: "50 clients, -pipeline 16", c: c16})

	open := base
	open.rate = c1.OpsB / 2
	cOpen, _, err := compare(fmt.Sprintf("open loop at half of direct's %.0f/s", c1.OpsB), open)
	if err != nil {
		return err
	}
	rows = append(rows, row{name: fmt.Sprintf("open loop, %.0f/s", open.rate), c: cOpen,
		extra: fmt.Sprintf("p99 sluice %.0f µs, direct %.0f µs: sluice adds %+.0f µs", cOpen.P99A, cOpen.P99B, cOpen.P99A-cOpen.P99B)})

	hot := base
	hot.keys = keySpec{kind: "hot", n: 1}
	hot.lim = limits{capacity: 100, refill: 1000, period: "1s", cost: 1}
	hot.periodUS = 1e6
	hot.rounds = 1
	cHot, hotRuns, err := compare("one hot key (capacity 100, 1000/s)", hot)
	if err != nil {
		return err
	}
	acc := map[string]float64{}
	for _, r := range hotRuns {
		acc[r.Target] = r.Accuracy
	}
	rows = append(rows, row{name: "one hot key", c: cHot,
		extra: fmt.Sprintf("accuracy (admitted/ideal) sluice %.3f, direct %.3f", acc["sluice"], acc["direct"])})

	emb, err := newEmbeddedTarget(base.lim)
	if err != nil {
		return err
	}
	embRun, err := runOnce(base, emb, base.keys.names(), 1)
	emb.close()
	if err != nil {
		return err
	}

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	mem, idle, err := bucketMemory(ctx, cfg)
	if err != nil {
		return err
	}
	rss0, rss1, err := idleConnectionsRSS(ctx, cfg.addr, 10000)
	if err != nil {
		return err
	}

	fmt.Fprintf(out, "\nGo load generator: sluice vs direct (medians of %d rounds of %v; load generator, sluice and the cluster share this machine's cores)\n\n", cfg.rounds, cfg.duration)
	fmt.Fprintf(out, "%-30s %10s %10s %7s %12s %12s %14s %14s\n", "run", "sluice/s", "direct/s", "ratio", "sluice p99", "direct p99", "sluice cpu/op", "direct cpu/op")
	for _, r := range rows {
		fmt.Fprintf(out, "%-30s %10.0f %10.0f %6.2fx %10.0fµs %10.0fµs %8.1f+%-5.1f %14.1f\n", r.name, r.c.OpsA, r.c.OpsB, r.c.OpsRatio,
			r.c.P99A, r.c.P99B, r.c.ProxyCPUA, r.c.PrimariesCPUA, r.c.PrimariesCPUB)
		if r.extra != "" {
			fmt.Fprintf(out, "%-30s %s\n", "", r.extra)
		}
	}
	fmt.Fprintf(out, "\ncpu/op is CPU µs per decision from INFO cpu: sluice's own + the primaries' in the sluice run; the primaries' in the direct run.\n")
	fmt.Fprintf(out, "CPU per decision, 50 clients unpipelined: sluice %.1f µs vs the primaries' %.1f µs when called directly (aim: sluice <= primaries)\n",
		c1.ProxyCPUA, c1.PrimariesCPUB)
	fmt.Fprintf(out, "embedded backend, 50 clients, no pipelining: %.0f decisions/s, p99 %d µs\n", embRun.OpsPerSec, embRun.P99)
	fmt.Fprintf(out, "Redis memory per bucket (MEMORY USAGE, key %q): %d bytes; after it refills: %s\n", "sluice:mem:1", mem, idle)
	fmt.Fprintf(out, "sluice RSS: %.1f MB before, %.1f MB with 10,000 idle client connections (%.1f KB each)\n",
		float64(rss0)/1e6, float64(rss1)/1e6, float64(rss1-rss0)/10000/1e3)
	return nil
}

// bucketMemory makes one bucket through sluice and reads its size from the
// shard, then checks that a bucket that has refilled is gone.
func bucketMemory(ctx context.Context, cfg config) (int64, string, error) {
	sl, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{cfg.addr}, ForceSingleClient: true, DisableCache: true})
	if err != nil {
		return 0, "", err
	}
	defer sl.Close()
	cl, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: cfg.cluster, DisableCache: true})
	if err != nil {
		return 0, "", err
	}
	defer cl.Close()
	for _, args := range [][]string{{"mem:1", "100", "10", "1s"}, {"bench:idle", "1", "1", "100ms"}} {
		if err := sl.Do(ctx, sl.B().Arbitrary("THROTTLE").Keys(args[0]).Args(args[1:]...).Build()).Error(); err != nil {
			return 0, "", err
		}
	}
	n, err := cl.Do(ctx, cl.B().MemoryUsage().Key("sluice:mem:1").Build()).AsInt64()
	if err != nil {
		return 0, "", err
	}
	deadline := time.Now().Add(2 * time.Second)
	for time.Now().Before(deadline) {
		if left, err := cl.Do(ctx, cl.B().Exists().Key("sluice:bench:idle").Build()).AsInt64(); err == nil && left == 0 {
			return n, "0 bytes (the key expired)", nil
		}
		time.Sleep(20 * time.Millisecond)
	}
	return n, "STILL THERE after 2s", nil
}

// idleConnectionsRSS opens n connections to sluice, each proven live with a
// PING, and reads sluice's RSS before and after.
func idleConnectionsRSS(ctx context.Context, addr string, n int) (before, after int64, err error) {
	before, err = infoInt(ctx, addr, "memory", "used_memory_rss")
	if err != nil {
		return 0, 0, err
	}
	conns := make([]net.Conn, 0, n)
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	buf := make([]byte, 7)
	for range n {
		c, err := net.DialTimeout("tcp", addr, 2*time.Second)
		if err != nil {
			return 0, 0, fmt.Errorf("idle connection %d: %w", len(conns), err)
		}
		conns = append(conns, c)
		c.SetDeadline(time.Now().Add(5 * time.Second))
		if _, err := c.Write([]byte("PING\r\n")); err != nil {
			return 0, 0, err
		}
		if _, err := io.ReadFull(c, buf); err != nil || string(buf) != "+PONG\r\n" {
			return 0, 0, fmt.Errorf("idle connection %d: PING: %q, %v", len(conns), buf, err)
		}
	}
	after, err = infoInt(ctx, addr, "memory", "used_memory_rss")
	return before, after, err
}

func infoInt(ctx context.Context, addr, section, field string) (int64, error) {
	f, err := infoFields(ctx, addr, section)
	if err != nil {
		return 0, err
	}
	v, ok := f[field]
	if !ok {
		return 0, fmt.Errorf("%s: INFO %s has no %s", addr, section, field)
	}
	return strconv.ParseInt(v, 10, 64)
}

// failed is an error when more than one call in 1,000 of r failed: a
// failing call is answered at once, so the rate of such a run is of its
// errors, not of decisions.
func (r result) failed() error {
	if decided := r.Allowed + r.Limited; r.Errors*1000 > decided {
		return fmt.Errorf("%s: %d calls failed, %d decided: no figure", r.Target, r.Errors, decided)
	}
	return nil
}
