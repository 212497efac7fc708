package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/redis/rueidis"
)

// shardStat is what one primary has spent so far: CPU seconds and bucket
// steps (EVALSHA calls).
type shardStat struct {
	cpu   float64
	steps int64
}

// primaryStats reads every primary's CPU and EVALSHA count.
func primaryStats(ctx context.Context, seeds []string) (map[string]shardStat, error) {
	out := map[string]shardStat{}
	err := eachPrimary(ctx, seeds, func(addr string) error {
		cpu, err := infoCPU(ctx, addr)
		if err != nil {
			return err
		}
		f, err := infoFields(ctx, addr, "commandstats")
		if err != nil {
			return err
		}
		out[addr] = shardStat{cpu: cpu, steps: commandCalls(f["cmdstat_evalsha"])}
		return nil
	})
	return out, err
}

// commandCalls reads calls=N from an INFO commandstats value.
func commandCalls(v string) int64 {
	for _, kv := range strings.Split(v, ",") {
		if n, ok := strings.CutPrefix(kv, "calls="); ok {
			calls, _ := strconv.ParseInt(n, 10, 64)
			return calls
		}
	}
	return 0
}

// commandFailed reads failed_calls=N plus rejected_calls=M from an INFO
// commandstats value: calls that errored while running, and calls refused
// before they ran (a wrong argument count, MOVED).
func commandFailed(v string) int64 {
	var n int64
	for _, kv := range strings.Split(v, ",") {
		k, val, _ := strings.Cut(kv, "=")
		if k == "failed_calls" || k == "rejected_calls" {
			c, _ := strconv.ParseInt(val, 10, 64)
			n += c
		}
	}
	return n
}

// spread is how one run's bucket steps and CPU fell on the primaries.
type spread struct {
	// Busiest is the busiest primary's share of the steps: what bounds a
	// hot key wherever Redis's one thread is the bottleneck.
	Busiest float64
	Steps   []int64 // per primary, the busiest first
	// Ceiling is the decisions/s at which the primary with the most CPU
	// per decision would spend a whole core.
	Ceiling float64
}

func spreadOf(before, after map[string]shardStat, decisions int64) spread {
	var sp spread
	var total int64
	var worst float64
	for addr, a := range after {
		b := before[addr]
		sp.Steps = append(sp.Steps, a.steps-b.steps)
		total += a.steps - b.steps
		worst = max(worst, a.cpu-b.cpu)
	}
	slices.SortFunc(sp.Steps, func(x, y int64) int { return cmp.Compare(y, x) })
	if total > 0 {
		sp.Busiest = float64(sp.Steps[0]) / float64(total)
	}
	if worst > 0 && decisions > 0 {
		sp.Ceiling = float64(decisions) / worst
	}
	return sp
}

// hotRun is one measured run on one hot key.
type hotRun struct {
	result
	spread spread
}

// runHot runs t on one fresh key: a warm-up of a second (in which sluice
// finds the key hot and splits it), then the measured run on the same key,
// with the primaries' counters read around it.
func runHot(ctx context.Context, cfg config, t target, round int) (hotRun, error) {
	names := cfg.keys.names()
	warm := cfg
	warm.duration = time.Second
	if _, err := runOnce(warm, t, names, round); err != nil {
		return hotRun{}, err
	}
	before, err := primaryStats(ctx, cfg.cluster)
	if err != nil {
		return hotRun{}, err
	}
	r, err := runOnce(cfg, t, names, round)
	if err != nil {
		return hotRun{}, err
	}
	after, err := primaryStats(ctx, cfg.cluster)
	if err != nil {
		return hotRun{}, err
	}
	return hotRun{result: r, spread: spreadOf(before, after, r.Ops)}, nil
}

// runHotSuite is `make bench-hot`: one key hammered by 50 clients. It
// compares sluice splitting the key, sluice keeping it whole (-unsplit-addr)
// and the direct EVALSHA path, then measures how many the key admits under
// a sustained 10x overload through one and through three instances, and
// how soon it is split.
func runHotSuite(cfg config, out io.Writer) error {
	if len(cfg.cluster) == 0 {
		return errors.New("-hotsuite needs -cluster and sluice instances at -addr")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	base := cfg
	base.pipeline, base.rate, base.requests = 1, 0, 0
	base.keys = keySpec{kind: "hot", n: 1}
	base.lim = limits{capacity: 100, refill: 1000, period: "1s", cost: 1}
	base.periodUS = 1e6

	ts := []target{newSluiceTarget("split", base.addrs[:1], base.lim, base.cluster)}
	if cfg.unsplit != "" {
		ts = append(ts, newSluiceTarget("unsplit", []string{cfg.unsplit}, base.lim, base.cluster))
	}
	d, err := newDirectTarget(base.cluster, base.lim, base.periodUS)
	if err != nil {
		return err
	}
	ts = append(ts, d)
	runs := map[string][]hotRun{}
	for round := 1; round <= base.rounds; round++ {
		for _, t := range ts {
			r, err := runHot(ctx, base, t, round)
			if err != nil {
				return fmt.Errorf("%s: %w", t.name(), err)
			}
			runs[t.name()] = append(runs[t.name()], r)
			fmt.Fprintf(out, "round %d %-8s %8.0f decisions/s  busiest primary ran %.3f of the steps %v  ceiling %.0f/s\n",
				round, t.name(), r.OpsPerSec, r.spread.Busiest, r.spread.Steps, r.spread.Ceiling)
		}
	}
	med := func(name string, f func(hotRun) float64) float64 {
		var v []float64
		for _, r := range runs[name] {
			v = append(v, f(r))
		}
		return median(v)
	}
	ops := func(r hotRun) float64 { return r.OpsPerSec }
	busiest := func(r hotRun) float64 { return r.spread.Busiest }
	ceiling := func(r hotRun) float64 { return r.spread.Ceiling }
	primaries := 0
	if st, err := primaryStats(ctx, base.cluster); err == nil {
		primaries = len(st)
	}

	// A sustained overload of 10x the key's refill or more, also through
	// three instances sharing the cores.
	acc := base
	acc.duration = 10 * time.Second
	acc.lim.refill = max(100, int64(med("split", ops)/25/100)*100)
	acc.lim.capacity = acc.lim.refill / 5
	type accRun struct {
		instances int
		r         result
		splitIn   time.Duration
	}
	var accs []accRun
	for _, n := range []int{1, 3} {
		if n > len(base.addrs) {
			break
		}
		t := newSluiceTarget(fmt.Sprintf("%d instances", n), base.addrs[:n], acc.lim, acc.cluster)
		names := acc.keys.names()
		found := watchSplit(ctx, acc.cluster, names[0])
		start := time.Now()
		r, err := runOnce(acc, t, names, 1)
		if err != nil {
			return err
		}
		var in time.Duration
		if at := <-found; !at.IsZero() {
			in = at.Sub(start)
		}
		accs = append(accs, accRun{instances: n, r: r, splitIn: in})
	}

	fmt.Fprintf(out, "\none hot key, 50 clients, no pipelining, capacity 100 and 1000/s; medians of %d rounds of %v after a 1s warm-up.\n", base.rounds, base.duration)
	fmt.Fprintf(out, "The load generator, every sluice and the cluster share this machine's cores.\n\n")
	fmt.Fprintf(out, "%-10s %14s %16s %22s\n", "target", "decisions/s", "busiest primary", "busiest-shard ceiling")
	for _, t := range ts {
		fmt.Fprintf(out, "%-10s %14.0f %15.3f %20.0f/s\n", t.name(), med(t.name(), ops), med(t.name(), busiest), med(t.name(), ceiling))
	}
	fmt.Fprintf(out, "\nsplit / direct: %.2fx", med("split", ops)/med("direct", ops))
	if cfg.unsplit != "" {
		fmt.Fprintf(out, "; split / unsplit: %.2fx; busiest-shard ceiling split / unsplit: %.2fx",
			med("split", ops)/med("unsplit", ops), med("split", ceiling)/med("unsplit", ceiling))
	}
	fmt.Fprintf(out, "\naim: the busiest primary runs at most 1/N + 0.1 = %.3f of the steps (N = %d primaries)\n\n", 1/float64(max(primaries, 1))+0.1, primaries)
	sub := float64(acc.lim.capacity) / float64(max(primaries, 1))
	for _, a := range accs {
		ideal := float64(a.r.Allowed) / a.r.Accuracy
		fmt.Fprintf(out, "accuracy, %d sluice instance(s), 50 clients, %v, capacity %d, %d/s (%.0fx overload): admitted %d of ideal %.0f = %.3f (aim [0.95, %.3f]); split %v after the load began\n",
			a.instances, acc.duration, acc.lim.capacity, acc.lim.refill, a.r.OpsPerSec/float64(acc.lim.refill),
			a.r.Allowed, ideal, a.r.Accuracy, 1+sub/ideal, a.splitIn.Round(time.Millisecond))
	}
	return nil
}

// watchSplit polls the cluster for key's split marker and sends when it
// appeared (zero if it did not within 15s).
func watchSplit(ctx context.Context, seeds []string, key string) <-chan time.Time {
	found := make(chan time.Time, 1)
	go func() {
		c, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: seeds, DisableCache: true})
		if err != nil {
			found <- time.Time{}
			return
		}
		defer c.Close()
		for deadline := time.Now().Add(15 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
			v, err := c.Do(ctx, c.B().Get().Key("sluice:"+key).Build()).ToString()
			if err == nil && strings.HasPrefix(v, "~") {
				found <- time.Now()
				return
			}
		}
		found <- time.Time{}
	}()
	return found
}
