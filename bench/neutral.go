package main

import (
	"bytes"
	"context"
	_ "embed"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"net"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/redis/rueidis"
	"golang.org/x/sys/unix"
)

// articleScript is the token bucket a user writes without sluice, as blog
// articles give it: the client passes its own clock. It is the neutral
// rows' direct path, so that sluice is measured against what it replaces
// rather than against its own script.
//
//go:embed article.lua
var articleScript string

// The hot-key row's limit, far above any load this machine can make, so
// that every call is allowed on both paths and they do the same work.
const hotLimit = 1_000_000_000

// benchCSV is what the table takes from redis-benchmark's --csv result
// line; latencies in ms.
type benchCSV struct {
	rps, p50, p99 float64
}

// parseBenchCSV reads redis-benchmark 7's --csv output of one test. Lines
// before the header are skipped: in --cluster mode it first lists the
// primaries.
func parseBenchCSV(out string) (benchCSV, error) {
	const header = `"test","rps",`
	i := strings.Index(out, header)
	if i < 0 {
		return benchCSV{}, errors.New("redis-benchmark printed no CSV header")
	}
	recs, err := csv.NewReader(strings.NewReader(out[i:])).ReadAll()
	if err != nil {
		return benchCSV{}, fmt.Errorf("redis-benchmark CSV: %w", err)
	}
	want := []string{"test", "rps", "avg_latency_ms", "min_latency_ms", "p50_latency_ms", "p95_latency_ms", "p99_latency_ms", "max_latency_ms"}
	if !slices.Equal(recs[0], want) {
		return benchCSV{}, fmt.Errorf("redis-benchmark CSV columns %v, want %v", recs[0], want)
	}
	if len(recs) != 2 {
		return benchCSV{}, fmt.Errorf("redis-benchmark CSV has %d results, want 1", len(recs)-1)
	}
	var v [7]float64
	for j := range v {
		if v[j], err = strconv.ParseFloat(recs[1][j+1], 64); err != nil {
			return benchCSV{}, fmt.Errorf("redis-benchmark CSV %s: %w", want[j+1], err)
		}
	}
	return benchCSV{rps: v[0], p50: v[3], p99: v[5]}, nil
}

// processCPU is the CPU time process pid has used: its scheduler clock
// (Linux's CPU clock of another process, MAKE_PROCESS_CPUCLOCK(pid,
// CPUCLOCK_SCHED)), in ns. /proc/<pid>/stat gives utime and stime in
// whole 10 ms ticks, each rounded down, which knew a 2 s row's 0.45 s of
// sluice's CPU at -P 16 to about ±4%: enough to move an aim's verdict.
func processCPU(pid int) (time.Duration, error) {
	var ts unix.Timespec
	if err := unix.ClockGettime(int32((^pid)<<3|2), &ts); err != nil {
		return 0, fmt.Errorf("the CPU clock of process %d: %w", pid, err)
	}
	return time.Duration(ts.Nano()), nil
}

// clusterNode is one line of CLUSTER NODES.
type clusterNode struct {
	addr    string
	primary bool
	slots   [][2]int // inclusive ranges
}

// parseClusterNodes reads CLUSTER NODES: every node, replicas included,
// since a script's writes cost its primary's replicas CPU too.
func parseClusterNodes(text string) ([]clusterNode, error) {
	var nodes []clusterNode
	for _, line := range strings.Split(strings.TrimSpace(text), "\n") {
		f := strings.Fields(line)
		if len(f) < 8 {
			return nil, fmt.Errorf("CLUSTER NODES line %q", line)
		}
		// ip:port@cport[,hostname]
		addr, _, _ := strings.Cut(f[1], "@")
		n := clusterNode{addr: addr, primary: slices.Contains(strings.Split(f[2], ","), "master")}
		for _, r := range f[8:] {
			if strings.HasPrefix(r, "[") {
				continue // a slot being migrated or imported
			}
			lo, hi, isRange := strings.Cut(r, "-")
			if !isRange {
				hi = lo
			}
			a, err1 := strconv.Atoi(lo)
			b, err2 := strconv.Atoi(hi)
			if err1 != nil || err2 != nil {
				return nil, fmt.Errorf("CLUSTER NODES slots %q", r)
			}
			n.slots = append(n.slots, [2]int{a, b})
		}
		nodes = append(nodes, n)
	}
	return nodes, nil
}

// serving is a primary with slots: one that runs scripts. A new node is a
// primary without slots until it is made a replica.
func (n clusterNode) serving() bool { return n.primary && len(n.slots) > 0 }

// slotOwner is the address of the primary serving slot.
func slotOwner(nodes []clusterNode, slot int) (string, error) {
	for _, n := range nodes {
		for _, r := range n.slots {
			if n.serving() && r[0] <= slot && slot <= r[1] {
				return n.addr, nil
			}
		}
	}
	return "", fmt.Errorf("no primary serves slot %d", slot)
}

// usage is what the processes under test have spent and served so far.
type usage struct {
	sluiceCPU  time.Duration      // sluice's CPU time
	nodeCPU    map[string]float64 // each redis-server's used_cpu_user+used_cpu_sys, s
	scripts    int64              // EVALSHA calls, all nodes
	failed     int64              // EVALSHA, GET and SET calls that failed or were refused, all nodes
	gets, sets int64              // GET and SET calls, all nodes
	pings      map[string]int64   // PING calls by node
	decisions  int64              // sluice's THROTTLE decisions
	limited    int64              // of which limited
	clustered  int64              // of which the cluster made
}

// runCost is a run's CPU per request, µs: sluice's, that of all the
// redis-servers together, and each server's.
type runCost struct {
	sluice, servers float64
	node            map[string]float64
}

func costPerRequest(before, after usage, requests int64) runCost {
	n := float64(requests)
	c := runCost{
		sluice: float64(after.sluiceCPU-before.sluiceCPU) / 1e3 / n,
		node:   map[string]float64{},
	}
	for addr, cpu := range after.nodeCPU {
		d := (cpu - before.nodeCPU[addr]) * 1e6 / n
		c.node[addr] = d
		c.servers += d
	}
	return c
}

// servedNote checks the count the servers under test keep of what a run
// did (scripts, PINGs or sluice's decisions) against the requests
// redis-benchmark sent: fewer means requests that did no work; more means
// other clients were using the servers (sluice itself runs a heartbeat
// script a second), and the CPU figures include their work.
func servedNote(served, requests int64) string {
	switch {
	case served < requests:
		return fmt.Sprintf("the servers counted %d calls for %d requests", served, requests)
	case float64(served-requests) > 0.01*float64(requests)+10:
		return fmt.Sprintf("the servers counted %d calls for %d requests: others were using them", served, requests)
	}
	return ""
}

// sizeRequests is the -n that takes about d at rate, never below floor.
func sizeRequests(rate float64, d time.Duration, floor int64) int64 {
	return max(floor, int64(math.Ceil(rate*d.Seconds())))
}

// pairRate is the rate at which n requests take as long as n at a and
// then n at b, halved (the harmonic mean): sized by it, two runs together
// take 2d whatever their ratio, so a slow path does not stretch the wall
// time and the faster run stays long enough to measure.
func pairRate(a, b float64) float64 {
	return 2 / (1/a + 1/b)
}

// neutralRun is one invocation of redis-benchmark and what it cost.
type neutralRun struct {
	requests int64
	res      benchCSV
	cost     runCost
	limited  int64 // calls sluice limited
	// offCluster counts the decisions sluice made without the cluster: a
	// shard that misses --backend-timeout is marked unhealthy and its keys
	// go to the fallback, which costs the shards nothing.
	offCluster int64
	note       string // a count that does not add up, or ""
}

type nodeClient struct {
	clusterNode
	c rueidis.Client
}

// neutral holds the connections the neutral rows read the servers through.
type neutral struct {
	cfg       config
	bin       string // redis-benchmark
	sluice    rueidis.Client
	sluicePID int
	nodes     []nodeClient // every redis-server of the cluster
	primaries int
	id        string // in this invocation's key names
}

func (nt *neutral) close() {
	nt.sluice.Close()
	for _, n := range nt.nodes {
		n.c.Close()
	}
}

func singleClient(addr string) (rueidis.Client, error) {
	return rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{addr}, ForceSingleClient: true, DisableCache: true})
}

func newNeutral(ctx context.Context, cfg config) (_ *neutral, err error) {
	bin, err := exec.LookPath("redis-benchmark")
	if err != nil {
		return nil, fmt.Errorf("-neutral needs redis-benchmark (make deps installs it): %w", err)
	}
	nt := &neutral{cfg: cfg, bin: bin, sluicePID: cfg.sluicePID}
	if nt.sluice, err = singleClient(cfg.addr); err != nil {
		return nil, fmt.Errorf("sluice at %s: %w", cfg.addr, err)
	}
	defer func() {
		if err != nil {
			nt.close()
		}
	}()
	if nt.sluicePID == 0 {
		text, err := nt.sluice.Do(ctx, nt.sluice.B().Info().Section("server").Build()).ToString()
		if err != nil {
			return nil, err
		}
		if nt.sluicePID, err = strconv.Atoi(parseInfo(text)["process_id"]); err != nil {
			return nil, errors.New("sluice's INFO has no process_id: pass -sluice-pid")
		}
	}
	if err := nt.connectNodes(ctx, cfg.cluster[0]); err != nil {
		return nil, err
	}
	return nt, nil
}

// connectNodes opens a connection to every node of the cluster seed is in.
func (nt *neutral) connectNodes(ctx context.Context, seed string) error {
	sc, err := singleClient(seed)
	if err != nil {
		return err
	}
	text, err := sc.Do(ctx, sc.B().ClusterNodes().Build()).ToString()
	sc.Close()
	if err != nil {
		return err
	}
	nodes, err := parseClusterNodes(text)
	if err != nil {
		return err
	}
	for _, n := range nodes {
		c, err := singleClient(n.addr)
		if err != nil {
			return fmt.Errorf("%s: %w", n.addr, err)
		}
		nt.nodes = append(nt.nodes, nodeClient{clusterNode: n, c: c})
		if n.serving() {
			nt.primaries++
		}
	}
	return nil
}

// directKeys is the SCAN pattern of the article script's keys of one
// invocation: rate:{tag}:<id>:<row>:<n> and the hot key rate:hot:<id>.
// sluice's own keys (sluice:...) do not match it.
func directKeys(id string) string { return "rate:*" + id + "*" }

// benchmarkKeys are the SCAN patterns of the keys redis-benchmark's -t
// get and -t set name: key:<12 digits>, and key:{<tag>}:<12 digits> with
// --cluster. Nothing else is of that shape.
var benchmarkKeys = []string{"key:" + strings.Repeat("[0-9]", 12), "key:{*}:" + strings.Repeat("[0-9]", 12)}

// sluiceKeys is the SCAN pattern of the buckets sluice keeps for this
// invocation's THROTTLE calls (sluice:<id>:<row>:<n>, the hot key's
// sub-buckets and marker), and nothing of the article script's.
func sluiceKeys(id string) string { return "sluice:*" + id + "*" }

// dropKeys deletes the keys matching pattern from every primary, and
// returns once every replica has applied the deletes. The article script
// keeps a key ceil(capacity/rate)+1 s after its last call (11 s at the
// default limits), and sluice a bucket until it is full again (0.1 s
// here), so a run's keys, and a calibration's, would otherwise expire,
// and their DELs replicate, inside a later run's window, whose CPU per
// decision would then carry work it did not cause: sluice's calibration
// keys in the direct run that follows it, the direct run's in sluice's.
// Under a steady load at these rates a key is called again before it
// expires, so this expiry is an artefact of a run's end, and is charged
// to no run.
func (nt *neutral) dropKeys(ctx context.Context, pattern string) error {
	for _, n := range nt.nodes {
		if !n.serving() {
			continue
		}
		for cursor := uint64(0); ; {
			e, err := n.c.Do(ctx, n.c.B().Scan().Cursor(cursor).Match(pattern).Count(1000).Build()).AsScanEntry()
			if err != nil {
				return fmt.Errorf("%s: SCAN: %w", n.addr, err)
			}
			cmds := make(rueidis.Commands, 0, len(e.Elements))
			for _, k := range e.Elements {
				cmds = append(cmds, n.c.B().Unlink().Key(k).Build())
			}
			for _, r := range n.c.DoMulti(ctx, cmds...) {
				if err := r.Error(); err != nil {
					return fmt.Errorf("%s: UNLINK: %w", n.addr, err)
				}
			}
			if cursor = e.Cursor; cursor == 0 {
				break
			}
		}
		text, err := n.c.Do(ctx, n.c.B().Info().Section("replication").Build()).ToString()
		if err != nil {
			return fmt.Errorf("%s: INFO replication: %w", n.addr, err)
		}
		replicas, err := strconv.ParseInt(parseInfo(text)["connected_slaves"], 10, 64)
		if err != nil {
			return fmt.Errorf("%s: INFO replication has no connected_slaves", n.addr)
		}
		acked, err := n.c.Do(ctx, n.c.B().Wait().Numreplicas(replicas).Timeout(5000).Build()).AsInt64()
		if err != nil || acked < replicas {
			return fmt.Errorf("%s: %d of %d replicas applied the deletes: %v", n.addr, acked, replicas, err)
		}
	}
	return nil
}

// loadArticle loads the article's script on every primary, as its user
// would before calling EVALSHA.
func (nt *neutral) loadArticle(ctx context.Context) (string, error) {
	var sha string
	for _, n := range nt.nodes {
		if !n.serving() {
			continue
		}
		s, err := n.c.Do(ctx, n.c.B().ScriptLoad().Script(articleScript).Build()).ToString()
		if err != nil {
			return "", fmt.Errorf("%s: SCRIPT LOAD: %w", n.addr, err)
		}
		sha = s
	}
	return sha, nil
}

// keyOwner is the primary serving key, as host and port.
func (nt *neutral) keyOwner(ctx context.Context, key string) (string, string, error) {
	slot, err := nt.nodes[0].c.Do(ctx, nt.nodes[0].c.B().ClusterKeyslot().Key(key).Build()).AsInt64()
	if err != nil {
		return "", "", err
	}
	var nodes []clusterNode
	for _, n := range nt.nodes {
		nodes = append(nodes, n.clusterNode)
	}
	addr, err := slotOwner(nodes, int(slot))
	if err != nil {
		return "", "", err
	}
	return net.SplitHostPort(addr)
}

func (nt *neutral) read(ctx context.Context) (usage, error) {
	// A server that does not answer INFO in this long is stuck.
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	u := usage{nodeCPU: map[string]float64{}, pings: map[string]int64{}}
	var err error
	if u.sluiceCPU, err = processCPU(nt.sluicePID); err != nil {
		return u, fmt.Errorf("sluice's CPU: %w", err)
	}
	text, err := nt.sluice.Do(ctx, nt.sluice.B().Info().Section("stats", "backend").Build()).ToString()
	if err != nil {
		return u, fmt.Errorf("sluice INFO: %w", err)
	}
	f := parseInfo(text)
	allowed, err1 := strconv.ParseInt(f["throttle_allowed"], 10, 64)
	limited, err2 := strconv.ParseInt(f["throttle_limited"], 10, 64)
	clustered, err3 := strconv.ParseInt(f["decisions_cluster"], 10, 64)
	if err1 != nil || err2 != nil || err3 != nil {
		return u, errors.New("sluice's INFO has no throttle_allowed, throttle_limited or decisions_cluster: is it serving -cluster?")
	}
	u.decisions, u.limited, u.clustered = allowed+limited, limited, clustered
	for _, n := range nt.nodes {
		text, err := n.c.Do(ctx, n.c.B().Info().Section("cpu", "commandstats").Build()).ToString()
		if err != nil {
			return u, fmt.Errorf("%s: INFO: %w", n.addr, err)
		}
		f := parseInfo(text)
		user, err1 := strconv.ParseFloat(f["used_cpu_user"], 64)
		sys, err2 := strconv.ParseFloat(f["used_cpu_sys"], 64)
		if err1 != nil || err2 != nil {
			return u, fmt.Errorf("%s: INFO cpu has no used_cpu_user/used_cpu_sys", n.addr)
		}
		u.nodeCPU[n.addr] = user + sys
		u.scripts += commandCalls(f["cmdstat_evalsha"])
		for _, cmd := range []string{"evalsha", "get", "set"} {
			u.failed += commandFailed(f["cmdstat_"+cmd])
		}
		if n.serving() { // a replica counts the SETs it copies too
			u.gets += commandCalls(f["cmdstat_get"])
			u.sets += commandCalls(f["cmdstat_set"])
		}
		u.pings[n.addr] = commandCalls(f["cmdstat_ping"])
	}
	return u, nil
}

// exec runs redis-benchmark for requests with args. It gives up on a run
// that takes far longer than the runs are sized for: a server that
// stopped answering.
func (nt *neutral) exec(ctx context.Context, args []string, requests int64) (benchCSV, error) {
	limit := 10*nt.cfg.duration + 10*time.Second
	ctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	// Options go before the command, which runs to the end of the line.
	// One thread on both paths: --cluster would otherwise run one per
	// primary where against sluice it runs one, and a thread is also the
	// client's smallest footprint on shared cores.
	args = append([]string{"--threads", "1", "-n", strconv.FormatInt(requests, 10), "--csv"}, args...)
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, nt.bin, args...)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	if ctx.Err() != nil {
		return benchCSV{}, fmt.Errorf("redis-benchmark %s: no result after %v (a server stopped answering?)", strings.Join(args, " "), limit)
	}
	if err != nil {
		// redis-benchmark 7 exits at the first error reply.
		return benchCSV{}, fmt.Errorf("redis-benchmark %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return parseBenchCSV(stdout.String())
}

// measure runs redis-benchmark for requests and reads the servers around
// it; served picks, from the usage before and after, what the servers
// counted of the run's work.
func (nt *neutral) measure(ctx context.Context, args []string, requests int64, served func(before, after usage) int64) (neutralRun, error) {
	before, err := nt.read(ctx)
	if err != nil {
		return neutralRun{}, err
	}
	res, err := nt.exec(ctx, args, requests)
	if err != nil {
		return neutralRun{}, err
	}
	after, err := nt.read(ctx)
	if err != nil {
		return neutralRun{}, err
	}
	if err := clusterFailures(args, before, after); err != nil {
		return neutralRun{}, err
	}
	return neutralRun{requests: requests, res: res, cost: costPerRequest(before, after, requests),
		limited:    after.limited - before.limited,
		offCluster: (after.decisions - before.decisions) - (after.clustered - before.clustered),
		note:       servedNote(served(before, after), requests)}, nil
}

// clusterFailures fails a redis-benchmark --cluster run in which the
// servers failed calls: in cluster mode redis-benchmark counts an error
// reply as a request served and exits 0, so a run whose every script
// failed would give a figure, and one without any note (the servers count
// a failed call among their calls). Without --cluster it exits at the
// first error itself. A few are sluice's: its heartbeat meets NOSCRIPT
// once on a node that lost its scripts, and loads them.
func clusterFailures(args []string, before, after usage) error {
	if n := after.failed - before.failed; n > 10 && slices.Contains(args, "--cluster") {
		return fmt.Errorf("redis-benchmark %s: the servers failed %d calls (INFO errorstats says why), which redis-benchmark --cluster counts as requests served",
			strings.Join(args, " "), n)
	}
	return nil
}

// clusterKeys is the -r with which redis-benchmark --cluster spreads its
// calls over keys keys in all, as -r keys does through sluice: it gives
// each primary its clients are spread over (round robin) a hash tag of its
// own, so -r N makes N keys on each of them.
func clusterKeys(keys, clients, primaries int) int {
	n := max(1, min(clients, primaries))
	return (keys + n - 1) / n
}

// calibrate measures the rate of a short run, to size the real one by;
// the short run also warms the path up (connections, sluice's view of a
// hot key).
func (nt *neutral) calibrate(ctx context.Context, args []string, floor int64) (float64, error) {
	res, err := nt.exec(ctx, args, floor)
	return res.rps, err
}

func scriptsServed(before, after usage) int64   { return after.scripts - before.scripts }
func decisionsServed(before, after usage) int64 { return after.decisions - before.decisions }
func getsServed(before, after usage) int64      { return after.gets - before.gets }
func setsServed(before, after usage) int64      { return after.sets - before.sets }

// neutralRow is one comparison: the same redis-benchmark load against the
// direct path, then against sluice.
type neutralRow struct {
	name           string
	clients, pipe  int
	direct, sluice []string // redis-benchmark's arguments but -n, --csv and direct's `now`
	d, s           neutralRun
	// served, for a passthrough row (an ordinary command, on both paths
	// answered by the servers): what the servers count of it. nil for a
	// THROTTLE row, whose direct script takes a `now`.
	served func(before, after usage) int64
}

func (r *neutralRow) ratio() float64 { return ratio(r.s.res.rps, r.d.res.rps) }

// runNeutral is the neutral half of `make bench`: the comparisons measured
// with redis-benchmark, a C client whose own cost is small, where the Go
// load generator competes with sluice for the same two cores.
func runNeutral(cfg config, out io.Writer) error {
	if len(cfg.cluster) == 0 {
		return errors.New("-neutral needs -cluster (and a sluice at -addr serving that cluster)")
	}
	if cfg.keys.kind != "uniform" {
		return errors.New("-neutral takes -keys uniform:N (redis-benchmark draws keys uniformly)")
	}
	start := time.Now()
	ctx := context.Background()
	nt, err := newNeutral(ctx, cfg)
	if err != nil {
		return err
	}
	defer nt.close()
	sha, err := nt.loadArticle(ctx)
	if err != nil {
		return err
	}
	sluiceHost, sluicePort, err := net.SplitHostPort(cfg.addr)
	if err != nil {
		return err
	}
	seedHost, seedPort, err := net.SplitHostPort(cfg.cluster[0])
	if err != nil {
		return err
	}
	// Fresh keys for every invocation, so no run starts on buckets an
	// earlier one emptied.
	id := strconv.FormatInt(time.Now().UnixNano(), 36)
	nt.id = id
	clients := strconv.Itoa(cfg.clients)
	keys := strconv.Itoa(cfg.keys.n)
	capacity, refill := strconv.FormatInt(cfg.lim.capacity, 10), strconv.FormatInt(cfg.lim.refill, 10)
	fill := strconv.FormatFloat(float64(cfg.lim.refill)*1e6/float64(cfg.periodUS), 'g', -1, 64)
	cost := strconv.FormatInt(cfg.lim.cost, 10)
	hotKey := "rate:hot:" + id
	hotHost, hotPort, err := nt.keyOwner(ctx, hotKey)
	if err != nil {
		return err
	}

	uniformDirect := func(c, p int, row string) []string {
		return []string{"--cluster", "-h", seedHost, "-p", seedPort, "-c", strconv.Itoa(c), "-P", strconv.Itoa(p),
			"-r", strconv.Itoa(clusterKeys(cfg.keys.n, c, nt.primaries)),
			"EVALSHA", sha, "1", "rate:{tag}:" + id + ":" + row + ":__rand_int__", capacity, fill, cost}
	}
	uniformSluice := func(c, p int, row string) []string {
		return []string{"-h", sluiceHost, "-p", sluicePort, "-c", strconv.Itoa(c), "-P", strconv.Itoa(p), "-r", keys,
			"THROTTLE", id + ":" + row + ":__rand_int__", capacity, refill, cfg.lim.period, cost}
	}
	hot := strconv.Itoa(hotLimit)
	rows := []*neutralRow{
		{name: fmt.Sprintf("%d clients, %s keys", cfg.clients, keys), clients: cfg.clients, pipe: 1,
			direct: uniformDirect(cfg.clients, 1, "u"), sluice: uniformSluice(cfg.clients, 1, "u")},
		{name: fmt.Sprintf("%d clients, %s keys, -P 16", cfg.clients, keys), clients: cfg.clients, pipe: 16,
			direct: uniformDirect(cfg.clients, 16, "p"), sluice: uniformSluice(cfg.clients, 16, "p")},
		{name: fmt.Sprintf("%d clients, one hot key", cfg.clients), clients: cfg.clients, pipe: 1,
			// Not --cluster, which would give every node a key of its own.
			direct: []string{"-h", hotHost, "-p", hotPort, "-c", clients, "EVALSHA", sha, "1", hotKey, hot, hot, "1"},
			sluice: []string{"-h", sluiceHost, "-p", sluicePort, "-c", clients, "THROTTLE", "hot:" + id, hot, hot, "1s"}},
		{name: "1 client, " + keys + " keys", clients: 1, pipe: 1,
			direct: uniformDirect(1, 1, "o"), sluice: uniformSluice(1, 1, "o")},
	}
	fmt.Fprintf(out, "redis-benchmark rows (the neutral client, C): %d redis-servers (%d primaries) and sluice share this machine's cores\n", len(nt.nodes), nt.primaries)
	fmt.Fprintf(out, "direct: bench/article.lua by EVALSHA straight to the cluster (redis-benchmark --cluster; the hot key to its primary %s:%s)\n", hotHost, hotPort)
	fmt.Fprintf(out, "sluice: THROTTLE at %s; limit %s/%s per %s (hot key: %s/%s per 1s)\n", cfg.addr, capacity, refill, cfg.lim.period, hot, hot)
	fmt.Fprintf(out, "the direct script's `now` is fixed for each run (redis-benchmark cannot vary it), so its buckets do not refill within a run; at these limits every call is allowed on both paths\n")
	fmt.Fprintf(out, "each row: direct then sluice back to back, the same -n for both, sized from short calibration runs so that the two take about %v together; one redis-benchmark thread; the direct run's keys deleted after it, and sluice's before it (its calibration's), outside any run, so that their expiry falls in no later run\n\n", 2*cfg.duration)

	// Passthrough: ordinary commands, which sluice forwards to the slot's
	// primary, against redis-benchmark --cluster sending them there itself.
	var passRows []*neutralRow
	for _, t := range []struct {
		name   string
		served func(before, after usage) int64
	}{{"get", getsServed}, {"set", setsServed}} {
		for _, p := range []int{1, 16} {
			name := fmt.Sprintf("%s, %d clients, %s keys", strings.ToUpper(t.name), cfg.clients, keys)
			if p > 1 {
				name += fmt.Sprintf(", -P %d", p)
			}
			common := []string{"-c", clients, "-P", strconv.Itoa(p), "-t", t.name}
			passRows = append(passRows, &neutralRow{name: name, clients: cfg.clients, pipe: p, served: t.served,
				direct: append([]string{"--cluster", "-h", seedHost, "-p", seedPort, "-r", strconv.Itoa(clusterKeys(cfg.keys.n, cfg.clients, nt.primaries))}, common...),
				sluice: append([]string{"-h", sluiceHost, "-p", sluicePort, "-r", keys}, common...)})
		}
	}
	// The GET rows read whatever the cluster holds under redis-benchmark's
	// keys: big values left there (by hand, say) weighed on one path and
	// not the other, whose keys differ. Dropped, both read missing keys.
	for _, pattern := range benchmarkKeys {
		if err := nt.dropKeys(ctx, pattern); err != nil {
			return err
		}
	}
	for _, row := range append(slices.Clone(rows), passRows...) {
		if err := nt.runRow(ctx, row); err != nil {
			return fmt.Errorf("%s: %w", row.name, err)
		}
	}
	var tlsOut bytes.Buffer // printed after the tables above
	if cfg.tlsAddr != "" {
		if err := nt.runTLS(ctx, id, &tlsOut); err != nil {
			return err
		}
	}

	// The floor any RESP server pays per request on this machine: what
	// one redis-server spends answering PINGs, pipelined as the rows it
	// is held against are (a PING at -P 16 costs the server a tenth of
	// one sent alone).
	pingAddr := nt.firstPrimary()
	pingHost, pingPort, err := net.SplitHostPort(pingAddr)
	if err != nil {
		return err
	}
	pings := map[int]neutralRun{}
	for _, p := range []int{1, 16} {
		pingArgs := []string{"-h", pingHost, "-p", pingPort, "-c", clients, "-P", strconv.Itoa(p), "-t", "ping_mbulk"}
		floor := int64(10000 * p)
		rate, err := nt.calibrate(ctx, pingArgs, floor)
		if err != nil {
			return fmt.Errorf("PING -P %d: %w", p, err)
		}
		pings[p], err = nt.measure(ctx, pingArgs, sizeRequests(rate, cfg.duration, floor), func(before, after usage) int64 {
			return after.pings[pingAddr] - before.pings[pingAddr]
		})
		if err != nil {
			return fmt.Errorf("PING -P %d: %w", p, err)
		}
	}

	printNeutral(out, rows, pings, pingAddr, len(nt.nodes))
	printPassthrough(out, passRows)
	out.Write(tlsOut.Bytes())
	fmt.Fprintf(out, "\nredis-benchmark rows took %.0f s\n", time.Since(start).Seconds())
	return nil
}

// firstPrimary is the primary with the lowest address, so that runs on
// one cluster read the same node.
func (nt *neutral) firstPrimary() string {
	var addrs []string
	for _, n := range nt.nodes {
		if n.serving() {
			addrs = append(addrs, n.addr)
		}
	}
	slices.Sort(addrs)
	return addrs[0]
}

func (nt *neutral) runRow(ctx context.Context, row *neutralRow) error {
	// Enough requests that the calibration run outlasts its own start.
	floor := min(max(int64(200*row.clients*row.pipe), 2000), 50000)
	// The direct script's last argument, `now`, is read as each run
	// starts: redis-benchmark sends the same arguments all run long.
	withNow := func(args []string) []string {
		return append(slices.Clone(args), strconv.FormatFloat(float64(time.Now().UnixMilli())/1e3, 'f', 3, 64))
	}
	directServed, sluiceServed := scriptsServed, decisionsServed
	if row.served != nil {
		withNow = slices.Clone[[]string]
		directServed, sluiceServed = row.served, row.served
	}
	rd, err := nt.calibrate(ctx, withNow(row.direct), floor)
	if err != nil {
		return err
	}
	rs, err := nt.calibrate(ctx, row.sluice, floor)
	if err != nil {
		return err
	}
	n := sizeRequests(pairRate(rd, rs), nt.cfg.duration, floor)
	if err := nt.dropKeys(ctx, sluiceKeys(nt.id)); err != nil {
		return fmt.Errorf("sluice's calibration: %w", err)
	}
	if row.d, err = nt.measure(ctx, withNow(row.direct), n, directServed); err != nil {
		return fmt.Errorf("direct: %w", err)
	}
	if row.served == nil {
		if err := nt.dropKeys(ctx, directKeys(nt.id)); err != nil {
			return fmt.Errorf("direct: %w", err)
		}
	}
	// Warmed again right before its run, as direct's run follows its own
	// calibration's keys: sluice's was seconds ago, longer than a hot
	// key's split lasts (2 s), so the hot row began unsplit.
	if _, err := nt.calibrate(ctx, row.sluice, floor); err != nil {
		return fmt.Errorf("sluice: %w", err)
	}
	if row.s, err = nt.measure(ctx, row.sluice, n, sluiceServed); err != nil {
		return fmt.Errorf("sluice: %w", err)
	}
	return nil
}

func printNeutral(out io.Writer, rows []*neutralRow, pings map[int]neutralRun, pingAddr string, servers int) {
	notes := printRows(out, rows)
	fmt.Fprintf(out, "cpu/op: CPU µs per decision, sluice's from its process CPU clock, the servers' summed over all %d redis-servers (INFO cpu, replicas included); fallback: sluice's decisions not made by the cluster; ratio: sluice/direct req/s\n", servers)
	one := rows[3]
	fmt.Fprintf(out, "%s: p50 sluice − direct %+.0f µs, p99 %+.0f µs\n", one.name, (one.s.res.p50-one.d.res.p50)*1e3, (one.s.res.p99-one.d.res.p99)*1e3)
	for _, p := range slices.Sorted(maps.Keys(pings)) {
		ping := pings[p]
		fmt.Fprintf(out, "redis-server floor: PING_MBULK -P %d, %d requests from %d clients to %s: %.0f/s, %.2f µs CPU per PING\n",
			p, ping.requests, rows[0].clients, pingAddr, ping.res.rps, ping.cost.node[pingAddr])
		if ping.note != "" {
			notes = append(notes, fmt.Sprintf("PING -P %d: %s", p, ping.note))
		}
	}
	for _, n := range notes {
		fmt.Fprintln(out, "note:", n)
	}

	fmt.Fprintf(out, "\naims, from the redis-benchmark rows (printed, not enforced)\n")
	w := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	// Three places: at two, a ratio just under its bound prints as the
	// bound itself beside "NOT met".
	times := func(v float64) string { return fmt.Sprintf("%.3fx", v) }
	for i, least := range []float64{0.8, 0.8, 1.0} {
		v := rows[i].ratio()
		aim(w, "throughput sluice/direct", rows[i], times(v), fmt.Sprintf(">= %.2fx", least), v >= least)
	}
	dp50 := (one.s.res.p50 - one.d.res.p50) * 1e3
	aim(w, "p50 sluice − direct", one, fmt.Sprintf("%+.0f µs", dp50), "<= +30 µs", dp50 <= 30)
	for _, r := range rows[:3] {
		v := ratio(r.s.cost.sluice, pings[r.pipe].cost.node[pingAddr])
		aim(w, fmt.Sprintf("sluice CPU per decision / redis-server CPU per PING at -P %d", r.pipe), r, times(v), "<= 1.60x", v <= 1.6)
	}
	for _, r := range rows[:3] {
		v := ratio(r.s.cost.servers, r.d.cost.servers)
		aim(w, "all redis-servers' CPU per decision, sluice / direct", r, times(v), "<= 0.75x", v <= 0.75)
	}
	w.Flush()
}

// printPassthrough prints the passthrough rows and their aim.
func printPassthrough(out io.Writer, rows []*neutralRow) {
	fmt.Fprintf(out, "\npassthrough: ordinary commands forwarded by sluice to the slot's primary; direct: redis-benchmark --cluster; cpu/op per command\n")
	for _, n := range printRows(out, rows) {
		fmt.Fprintln(out, "note:", n)
	}
	w := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	for _, r := range rows {
		v := r.ratio()
		aim(w, "throughput sluice/direct", r, fmt.Sprintf("%.3fx", v), ">= 0.80x", v >= 0.8)
	}
	w.Flush()
}

// aim prints whether one aim of the issues is met.
func aim(w io.Writer, what string, r *neutralRow, value, target string, met bool) {
	verdict := "met"
	if !met {
		verdict = "NOT met"
	}
	if r.s.offCluster > 0 {
		verdict += " (with fallback decisions)"
	}
	fmt.Fprintf(w, "%s, %s\t%s\taim %s\t%s\n", what, r.name, value, target, verdict)
}

// printRows prints a table of rows, direct then sluice, and returns the
// notes on them.
func printRows(out io.Writer, rows []*neutralRow) []string {
	us := func(ms float64) string { return strconv.FormatFloat(ms*1e3, 'f', 0, 64) }
	width := len("redis-benchmark row")
	for _, r := range rows {
		width = max(width, len(r.name))
	}
	line := func(cells ...any) {
		fmt.Fprintf(out, "%-*s  %-6s  %9s  %8s  %7s  %7s  %13s  %14s  %8s  %6s\n", append([]any{width}, cells...)...)
	}
	line("redis-benchmark row", "path", "requests", "req/s", "p50 µs", "p99 µs", "sluice cpu/op", "servers cpu/op", "fallback", "ratio")
	var notes []string
	for _, r := range rows {
		line(r.name, "direct", strconv.FormatInt(r.d.requests, 10), fmt.Sprintf("%.0f", r.d.res.rps), us(r.d.res.p50), us(r.d.res.p99),
			"-", fmt.Sprintf("%.1f", r.d.cost.servers), "-", "")
		line("", "sluice", strconv.FormatInt(r.s.requests, 10), fmt.Sprintf("%.0f", r.s.res.rps), us(r.s.res.p50), us(r.s.res.p99),
			fmt.Sprintf("%.1f", r.s.cost.sluice), fmt.Sprintf("%.1f", r.s.cost.servers), strconv.FormatInt(r.s.offCluster, 10), fmt.Sprintf("%.2fx", r.ratio()))
		if r.s.offCluster > 0 {
			notes = append(notes, fmt.Sprintf("%s, sluice: %d of %d decisions made without the cluster (a shard missed --backend-timeout and its keys went to the fallback): not like for like",
				r.name, r.s.offCluster, r.s.requests))
		}
		if r.d.note != "" {
			notes = append(notes, fmt.Sprintf("%s, direct: %s", r.name, r.d.note))
		}
		if r.s.note != "" {
			notes = append(notes, fmt.Sprintf("%s, sluice: %s", r.name, r.s.note))
		}
		if r.s.limited > 0 {
			notes = append(notes, fmt.Sprintf("%s, sluice: limited %d of %d calls", r.name, r.s.limited, r.s.requests))
		}
	}
	return notes
}
