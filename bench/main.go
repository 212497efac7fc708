// Command bench is sluice's load generator. It speaks RESP to a target and
// measures decisions per second, latency percentiles, CPU per decision and,
// for a single key, how close the admitted count is to the ideal.
//
//	go run ./bench -target sluice -addr 127.0.0.1:6380 -clients 50
//	go run ./bench -target direct -cluster 127.0.0.1:7000 -pipeline 16
//	go run ./bench -compare sluice,direct -addr 127.0.0.1:6380 -cluster 127.0.0.1:7000
//	go run ./bench -neutral -addr 127.0.0.1:6380 -cluster 127.0.0.1:7000 -duration 3s
//
// Closed loop by default (each client waits for its replies); -rate makes
// it open loop at a fixed arrival rate, with latency counted from when a
// request was due, not when it was sent, so a stall is not hidden
// (coordinated omission).
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"text/tabwriter"
	"time"
)

type config struct {
	target   string
	compare  []string
	addr     string   // the first of addrs
	addrs    []string // sluice instances; clients spread over them
	unsplit  string   // a sluice that never splits hot keys (-hotsuite)
	cluster  []string
	clients  int
	pipeline int
	duration time.Duration
	requests int64
	rate     float64
	rounds   int
	keys     keySpec
	lim      limits
	periodUS int64
	json     bool
	report   string
	suite    bool
	hotSuite bool
	neutral  bool
	// sluicePID is read for sluice's CPU by -neutral, whose load comes
	// from redis-benchmark and so cannot count it in-process.
	sluicePID int
	soak      bool
	kill      string // -soak: the primary to kill midway, host:port
	// -neutral's TLS rows: sluice's --tls-listen, and the directory of
	// the certificates (-certs writes them there).
	tlsAddr, tlsDir string
	certs           string
}

func main() {
	cfg, err := parseFlags(os.Args[1:], os.Stderr)
	if errors.Is(err, flag.ErrHelp) {
		return
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(2)
	}
	runner := run
	switch {
	case cfg.suite:
		runner = runSuite
	case cfg.hotSuite:
		runner = runHotSuite
	case cfg.neutral:
		runner = runNeutral
	case cfg.soak:
		runner = runSoak
	case cfg.certs != "":
		runner = writeCerts
	}
	if err := runner(cfg, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

func parseFlags(args []string, stderr io.Writer) (config, error) {
	var c config
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&c.target, "target", "sluice", "`target`: sluice, direct or embedded")
	compare := fs.String("compare", "", "two `targets` to run in alternation, e.g. sluice,direct")
	addrs := fs.String("addr", "127.0.0.1:6380", "sluice's `addresses` (target sluice), comma-separated: clients are spread over them")
	fs.StringVar(&c.unsplit, "unsplit-addr", "", "a sluice run with --hot-threshold 0, for -hotsuite's unsplit comparison")
	cluster := fs.String("cluster", "", "cluster seed `nodes` (target direct; for sluice, to read the primaries' CPU)")
	fs.IntVar(&c.clients, "clients", 50, "concurrent clients, one connection each")
	fs.IntVar(&c.pipeline, "pipeline", 1, "requests in flight per client")
	fs.DurationVar(&c.duration, "duration", 5*time.Second, "length of a run (of each round with -compare)")
	fs.Int64Var(&c.requests, "requests", 0, "stop after this many requests instead of -duration")
	fs.Float64Var(&c.rate, "rate", 0, "open loop: total arrivals per second (0: closed loop)")
	fs.IntVar(&c.rounds, "rounds", 3, "rounds per target with -compare")
	keys := fs.String("keys", "uniform:100000", "key `distribution`: uniform:N, zipf:S:N or hot:1")
	fs.Int64Var(&c.lim.capacity, "capacity", 100, "bucket capacity")
	fs.Int64Var(&c.lim.refill, "refill", 10, "tokens per period")
	fs.StringVar(&c.lim.period, "period", "1s", "refill period, as THROTTLE takes it")
	fs.Int64Var(&c.lim.cost, "cost", 1, "tokens per request")
	fs.BoolVar(&c.json, "json", false, "print JSON instead of a table")
	fs.BoolVar(&c.suite, "suite", false, "run the standard comparison set (make bench) against -addr and -cluster")
	fs.BoolVar(&c.hotSuite, "hotsuite", false, "run the hot-key set (make bench-hot): accuracy with 1 and 3 instances at -addr, spread, throughput split vs -unsplit-addr vs direct")
	fs.BoolVar(&c.neutral, "neutral", false, "run the standard comparisons with redis-benchmark as the client (make bench) against -addr and -cluster, with -clients, -keys uniform:N and the limit flags; a row's two runs take about 2x -duration")
	fs.BoolVar(&c.soak, "soak", false, "steady mixed load against -addr for -duration, killing the primary at -kill midway; prints and checks sluice's RSS, descriptors, goroutines and fallback buckets (make soak)")
	fs.StringVar(&c.kill, "kill", "", "-soak: the primary (`host:port`) to kill with SIGKILL midway")
	fs.IntVar(&c.sluicePID, "sluice-pid", 0, "`pid` of the sluice at -addr, for -neutral's CPU figures (default: the process_id in its INFO)")
	fs.StringVar(&c.tlsAddr, "tls-addr", "", "sluice's --tls-listen `address`: -neutral adds rows of TLS against plain (needs -tls-dir)")
	fs.StringVar(&c.tlsDir, "tls-dir", "", "`directory` of the certificates -certs wrote: ca.crt, client.crt, client.key")
	fs.StringVar(&c.certs, "certs", "", "write a CA and certificates (node.crt for sluice, client.crt for clients) in this `directory` and exit")
	fs.StringVar(&c.report, "report", "", "write an HTML `file` with latency and throughput plots")
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	if *cluster != "" {
		c.cluster = strings.Split(*cluster, ",")
	}
	c.addrs = strings.Split(*addrs, ",")
	c.addr = c.addrs[0]
	if *compare != "" {
		c.compare = strings.Split(*compare, ",")
		if len(c.compare) != 2 {
			return c, errors.New("-compare takes two targets, e.g. sluice,direct")
		}
	}
	var err error
	if c.keys, err = parseKeys(*keys); err != nil {
		return c, err
	}
	if c.periodUS, err = parsePeriod(c.lim.period); err != nil {
		return c, err
	}
	if (c.tlsAddr == "") != (c.tlsDir == "") {
		return c, errors.New("-tls-addr and -tls-dir go together")
	}
	if c.clients < 1 || c.pipeline < 1 || c.rounds < 1 {
		return c, errors.New("-clients, -pipeline and -rounds must be at least 1")
	}
	return c, nil
}

// parsePeriod reads the bench's -period for the targets that need it in
// µs: a Go duration, or a plain number of seconds.
func parsePeriod(s string) (int64, error) {
	if n, err := strconv.ParseInt(s, 10, 64); err == nil {
		return n * 1e6, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil || d < time.Millisecond {
		return 0, fmt.Errorf("-period %q: want a duration of at least 1ms", s)
	}
	return d.Microseconds(), nil
}

// keySpec draws keys from a distribution; keys are made up front so that
// drawing one costs no allocation.
type keySpec struct {
	kind string
	n    int
	s    float64 // zipf exponent
}

func parseKeys(s string) (keySpec, error) {
	parts := strings.Split(s, ":")
	bad := fmt.Errorf("-keys %q: want uniform:N, zipf:S:N (S > 1) or hot:1", s)
	switch {
	case len(parts) == 2 && (parts[0] == "uniform" || parts[0] == "hot"):
		n, err := strconv.Atoi(parts[1])
		if err != nil || n < 1 {
			return keySpec{}, bad
		}
		return keySpec{kind: parts[0], n: n}, nil
	case len(parts) == 3 && parts[0] == "zipf":
		sv, err1 := strconv.ParseFloat(parts[1], 64)
		n, err2 := strconv.Atoi(parts[2])
		if err1 != nil || err2 != nil || sv <= 1 || n < 2 {
			return keySpec{}, bad
		}
		return keySpec{kind: "zipf", n: n, s: sv}, nil
	}
	return keySpec{}, bad
}

type keySource struct {
	names []string
	r     *rand.Rand
	zipf  *rand.Zipf
}

func (k keySpec) source(names []string, seed uint64) *keySource {
	r := rand.New(rand.NewPCG(seed, 0x5eed))
	ks := &keySource{names: names, r: r}
	if k.kind == "zipf" {
		ks.zipf = rand.NewZipf(r, k.s, 1, uint64(k.n-1))
	}
	return ks
}

func (k keySpec) names() []string {
	names := make([]string, k.n)
	prefix := "bench:" + strconv.FormatInt(time.Now().UnixNano(), 36) + ":"
	for i := range names {
		names[i] = prefix + strconv.Itoa(i)
	}
	return names
}

func (ks *keySource) next() string {
	if ks.zipf != nil {
		return ks.names[ks.zipf.Uint64()]
	}
	return ks.names[ks.r.IntN(len(ks.names))]
}

// result is one run against one target.
type result struct {
	Target    string  `json:"target"`
	Round     int     `json:"round"`
	Clients   int     `json:"clients"`
	Pipeline  int     `json:"pipeline"`
	Rate      float64 `json:"rate,omitempty"`
	Seconds   float64 `json:"seconds"`
	Ops       int64   `json:"ops"`
	OpsPerSec float64 `json:"ops_per_sec"`
	P50       uint64  `json:"p50_us"`
	P90       uint64  `json:"p90_us"`
	P99       uint64  `json:"p99_us"`
	P999      uint64  `json:"p999_us"`
	Max       uint64  `json:"max_us"`
	Allowed   int64   `json:"allowed"`
	Limited   int64   `json:"limited"`
	Errors    int64   `json:"errors"`
	// Accuracy is admitted / ideal for a single key (hot:1): the ideal is
	// capacity + refill x elapsed / period.
	Accuracy float64 `json:"accuracy,omitempty"`
	// CPU µs per decision of the proxy (sluice) and of the primaries.
	ProxyCPU     float64 `json:"proxy_cpu_us_per_op"`
	PrimariesCPU float64 `json:"primaries_cpu_us_per_op"`

	hist *hist
}

func run(cfg config, out io.Writer) error {
	names := cfg.keys.names()
	var results []result
	if cfg.compare == nil {
		t, err := newTarget(cfg.target, cfg)
		if err != nil {
			return err
		}
		defer t.close()
		r, err := runOnce(cfg, t, names, 1)
		if err != nil {
			return err
		}
		results = append(results, r)
	} else {
		ts := make([]target, 2)
		for i, name := range cfg.compare {
			t, err := newTarget(name, cfg)
			if err != nil {
				return err
			}
			defer t.close()
			ts[i] = t
		}
		for round := 1; round <= cfg.rounds; round++ {
			for _, t := range ts {
				// Fresh keys each run, so no run starts on buckets another
				// emptied.
				r, err := runOnce(cfg, t, cfg.keys.names(), round)
				if err != nil {
					return err
				}
				results = append(results, r)
			}
		}
	}
	if cfg.report != "" {
		if err := writeReport(cfg.report, results); err != nil {
			return err
		}
	}
	if cfg.json {
		enc := json.NewEncoder(out)
		enc.SetIndent("", "  ")
		doc := map[string]any{"results": results}
		if cfg.compare != nil {
			doc["comparison"] = compareRuns(results, cfg.compare[0], cfg.compare[1])
		}
		return enc.Encode(doc)
	}
	printTable(out, results)
	if cfg.compare != nil {
		printComparison(out, compareRuns(results, cfg.compare[0], cfg.compare[1]))
	}
	return nil
}

func newTarget(name string, cfg config) (target, error) {
	switch name {
	case "sluice":
		return newSluiceTarget("sluice", cfg.addrs, cfg.lim, cfg.cluster), nil
	case "embedded":
		return newEmbeddedTarget(cfg.lim)
	case "direct":
		if len(cfg.cluster) == 0 {
			return nil, errors.New("target direct needs -cluster")
		}
		return newDirectTarget(cfg.cluster, cfg.lim, cfg.periodUS)
	}
	return nil, fmt.Errorf("unknown target %q: want sluice, direct or embedded", name)
}

func runOnce(cfg config, t target, names []string, round int) (result, error) {
	ctx := context.Background()
	conns := make([]conn, cfg.clients)
	for i := range conns {
		c, err := t.dial()
		if err != nil {
			for _, c := range conns[:i] {
				c.close()
			}
			return result{}, fmt.Errorf("%s: %w", t.name(), err)
		}
		conns[i] = c
	}
	defer func() {
		for _, c := range conns {
			c.close()
		}
	}()
	proxyCPU0, primCPU0, err := t.cpu(ctx)
	if err != nil {
		return result{}, fmt.Errorf("%s: reading CPU: %w", t.name(), err)
	}

	type tally struct {
		h                        hist
		allowed, limited, errors int64
	}
	tallies := make([]tally, cfg.clients)
	var budget budgetCounter
	budget.left = cfg.requests
	start := time.Now()
	deadline := start.Add(cfg.duration)
	var wg sync.WaitGroup
	for i := range conns {
		ks := cfg.keys.source(names, uint64(i)+1)
		tl := &tallies[i]
		c := conns[i]
		wg.Go(func() {
			keys := make([]string, cfg.pipeline)
			var interval time.Duration
			if cfg.rate > 0 {
				interval = time.Duration(float64(time.Second) * float64(cfg.clients*cfg.pipeline) / cfg.rate)
			}
			due := start.Add(time.Duration(rand.Int64N(int64(max(interval, 1)))))
			for {
				now := time.Now()
				// Open loop, a run ends with the last call due before the
				// deadline, however late it goes: calls left unsent when a
				// stall outlasts the deadline would hide it.
				end := now
				if interval > 0 {
					end = due
				}
				if end.After(deadline) && cfg.requests == 0 {
					return
				}
				if cfg.requests > 0 && !budget.take(int64(cfg.pipeline)) {
					return
				}
				sent := now
				if interval > 0 {
					if wait := time.Until(due); wait > 0 {
						time.Sleep(wait)
					}
					sent = due
					due = due.Add(interval)
				}
				for j := range keys {
					keys[j] = ks.next()
				}
				a, l, err := c.decide(ctx, keys)
				lat := uint64(time.Since(sent).Microseconds())
				for range a + l {
					tl.h.record(lat)
				}
				tl.allowed += int64(a)
				tl.limited += int64(l)
				if err != nil {
					tl.errors += int64(len(keys) - a - l)
				}
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	proxyCPU1, primCPU1, err := t.cpu(ctx)
	if err != nil {
		return result{}, fmt.Errorf("%s: reading CPU: %w", t.name(), err)
	}

	r := result{Target: t.name(), Round: round, Clients: cfg.clients, Pipeline: cfg.pipeline, Rate: cfg.rate,
		Seconds: elapsed.Seconds(), hist: &hist{}}
	for i := range tallies {
		r.hist.merge(&tallies[i].h)
		r.Allowed += tallies[i].allowed
		r.Limited += tallies[i].limited
		r.Errors += tallies[i].errors
	}
	r.Ops = r.Allowed + r.Limited
	r.OpsPerSec = float64(r.Ops) / elapsed.Seconds()
	r.P50, r.P90, r.P99, r.P999, r.Max = r.hist.quantile(0.5), r.hist.quantile(0.9), r.hist.quantile(0.99), r.hist.quantile(0.999), r.hist.max
	if r.Ops > 0 {
		r.ProxyCPU = (proxyCPU1 - proxyCPU0) * 1e6 / float64(r.Ops)
		r.PrimariesCPU = (primCPU1 - primCPU0) * 1e6 / float64(r.Ops)
	}
	if cfg.keys.kind == "hot" {
		ideal := float64(cfg.lim.capacity)/float64(cfg.lim.cost) +
			float64(cfg.lim.refill)*elapsed.Seconds()*1e6/float64(cfg.periodUS)/float64(cfg.lim.cost)
		r.Accuracy = float64(r.Allowed) / ideal
	}
	return r, nil
}

// budgetCounter hands out -requests among the clients.
type budgetCounter struct {
	mu   sync.Mutex // guards left
	left int64
}

func (b *budgetCounter) take(n int64) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.left < n {
		return false
	}
	b.left -= n
	return true
}

// comparison sets two targets' runs side by side by their medians, which a
// noisy machine moves less than it moves any single run.
type comparison struct {
	A, B            string
	OpsA, OpsB      float64 // median decisions/s
	OpsRatio        float64 // OpsA / OpsB
	P99A, P99B      float64 // median p99, µs
	ProxyCPUA       float64 // median proxy CPU µs per decision
	ProxyCPUB       float64
	PrimariesCPUA   float64
	PrimariesCPUB   float64
	DecideCPURatioA float64 // A's total CPU per decision (proxy + primaries) / B's
}

func compareRuns(rs []result, a, b string) comparison {
	pick := func(name string, f func(result) float64) float64 {
		var v []float64
		for _, r := range rs {
			if r.Target == name {
				v = append(v, f(r))
			}
		}
		return median(v)
	}
	c := comparison{A: a, B: b}
	c.OpsA, c.OpsB = pick(a, func(r result) float64 { return r.OpsPerSec }), pick(b, func(r result) float64 { return r.OpsPerSec })
	c.OpsRatio = ratio(c.OpsA, c.OpsB)
	c.P99A, c.P99B = pick(a, func(r result) float64 { return float64(r.P99) }), pick(b, func(r result) float64 { return float64(r.P99) })
	c.ProxyCPUA, c.ProxyCPUB = pick(a, func(r result) float64 { return r.ProxyCPU }), pick(b, func(r result) float64 { return r.ProxyCPU })
	c.PrimariesCPUA, c.PrimariesCPUB = pick(a, func(r result) float64 { return r.PrimariesCPU }), pick(b, func(r result) float64 { return r.PrimariesCPU })
	c.DecideCPURatioA = ratio(c.ProxyCPUA+c.PrimariesCPUA, c.ProxyCPUB+c.PrimariesCPUB)
	return c
}

func median(v []float64) float64 {
	if len(v) == 0 {
		return math.NaN()
	}
	v = slices.Clone(v)
	slices.Sort(v)
	if len(v)%2 == 1 {
		return v[len(v)/2]
	}
	return (v[len(v)/2-1] + v[len(v)/2]) / 2
}

func ratio(a, b float64) float64 {
	if b == 0 {
		return math.NaN()
	}
	return a / b
}

func printTable(out io.Writer, rs []result) {
	w := tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(w, "target\tround\tclients\tpipeline\tops/s\tp50 µs\tp90 µs\tp99 µs\tp99.9 µs\tmax µs\tallowed\tlimited\terrors\taccuracy\tproxy cpu µs/op\tprimaries cpu µs/op\t")
	for _, r := range rs {
		acc := "-"
		if r.Accuracy > 0 {
			acc = fmt.Sprintf("%.3f", r.Accuracy)
		}
		fmt.Fprintf(w, "%s\t%d\t%d\t%d\t%.0f\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%s\t%.1f\t%.1f\t\n",
			r.Target, r.Round, r.Clients, r.Pipeline, r.OpsPerSec, r.P50, r.P90, r.P99, r.P999, r.Max,
			r.Allowed, r.Limited, r.Errors, acc, r.ProxyCPU, r.PrimariesCPU)
	}
	w.Flush()
}

func printComparison(out io.Writer, c comparison) {
	fmt.Fprintf(out, "\nmedians: %s %.0f ops/s, %s %.0f ops/s: %s/%s = %.2fx\n", c.A, c.OpsA, c.B, c.OpsB, c.A, c.B, c.OpsRatio)
	fmt.Fprintf(out, "p99: %s %.0f µs, %s %.0f µs (%+.0f µs)\n", c.A, c.P99A, c.B, c.P99B, c.P99A-c.P99B)
	fmt.Fprintf(out, "cpu µs per decision: %s proxy %.1f + primaries %.1f; %s proxy %.1f + primaries %.1f\n",
		c.A, c.ProxyCPUA, c.PrimariesCPUA, c.B, c.ProxyCPUB, c.PrimariesCPUB)
}
