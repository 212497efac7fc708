package proxy_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"
	"github.com/redis/rueidis"

	"github.com/sluice-rl/sluice/proxy"
	"github.com/sluice-rl/sluice/router"
	"github.com/sluice-rl/sluice/router/clustertest"
	"github.com/sluice-rl/sluice/router/slot"
)

// TestCompat runs one script on real Redis clients, each straight to a
// Redis Cluster and through sluice, and fails on any difference in what
// the client reports. The script (the drivers in testdata/compat and the
// Go ones below) writes strings, hashes, lists, sets, sorted sets,
// streams and expiries; MGET, MSET and DEL across slots; a pipeline; a
// transaction in one slot and one across two slots; a BLPOP that another
// connection satisfies once the harness has seen it block; pub/sub (a
// second connection subscribes to a channel and a pattern, a message is
// published once both are confirmed, both deliveries are awaited, then
// both unsubscribed, each as the library reports it); SCAN over the
// whole key space; EVAL, SCRIPT LOAD and EVALSHA; the article's
// client-side token bucket (bench/article.lua) by EVAL, as the article's
// ioredis code calls it; and, through sluice only, THROTTLE and GCRA,
// checked against the README's answers.
//
// Each client runs in up to four ways, each on keys of its own prefix
// (the same length for all four, replaced by "<p>" before comparing):
//   - direct: its cluster mode on the cluster, the reference;
//   - sluice -c: its cluster mode through sluice, which answers as a
//     one-node cluster; compared with direct step by step;
//   - sluice: its standalone mode through sluice; compared with direct,
//     except the two transactions (below);
//   - node: its standalone mode straight to the primary that owns both
//     transactions' slots, running only the transactions: the reference
//     for sluice's. Cluster-mode libraries treat transactions their own
//     way (redis-py 4.3's RedisCluster has none; go-redis's ClusterClient
//     and rueidis refuse one across slots themselves; ioredis and
//     node-redis send it to one node), so a standalone client is compared
//     with the same client talking to one Redis node.
//
// Every library subscribes in cluster mode too, each its own way:
// go-redis's ClusterClient and redis-py's RedisCluster (ClusterPubSub) on
// the primary of the channel's slot, ioredis's Redis.Cluster,
// node-redis's createCluster and a rueidis dedicated client on a node of
// their choosing, redis-cli -c on its seed; through sluice, a one-node
// cluster, all of them on sluice. A cluster delivers a message on every
// node, but PUBLISH counts the receiving node's subscribers only, so the
// count while a subscriber listens compares by kind (compatCounted); once
// it has unsubscribed, the count is 0 everywhere and compares exactly.
func TestCompat(t *testing.T) {
	for _, tag := range append([]string{compatTags.Node, compatTags.Other}, compatTags.Spread...) {
		if strings.ContainsAny(tag, "{}") {
			t.Fatalf("tag %q: a tag cannot hold braces", tag)
		}
	}
	script, err := os.ReadFile(filepath.Join("..", "bench", "article.lua"))
	if err != nil {
		t.Fatal(err)
	}
	c := clustertest.New(t, clustertest.Config{Replicas: -1})
	r := newForwarding(t, c)
	e := &compatEnv{cluster: c, sluice: serveConfig(t, proxy.Config{Decider: r, Forwarder: r}), article: string(script)}
	e.checkTags(t)

	for _, cl := range compatClients() {
		t.Run(cl.name, func(t *testing.T) {
			cl.require(t)
			ctx, cancel := context.WithTimeout(context.Background(), compatTimeout)
			defer cancel()
			e.compare(ctx, t, cl)
		})
	}
}

// compatTimeout bounds one client's four runs.
const compatTimeout = 30 * time.Second

// compatProtocols are the RESP versions the go-redis and rueidis cases
// run in.
var compatProtocols = []int{2, 3}

// compatTags are the hash tags of the script's keys. Node and Other are
// two slots of one primary, so that a standalone client on that primary
// can run both transactions (the direct redis-cli run, whose --pipe
// follows no redirect, is seeded with it too); Spread are three slots of
// three primaries, for the multi-key commands. checkTags verifies it.
var compatTags = compatPlanTags{Node: "b", Other: "f", Spread: []string{"b", "c", "a"}}

type compatPlanTags struct {
	Node   string   `json:"node"`
	Other  string   `json:"other"`
	Spread []string `json:"spread"`
}

// compatPlan is one run of the script, given to a driver as JSON.
type compatPlan struct {
	Addr     string         `json:"addr"`     // host:port; a seed in cluster mode
	Cluster  bool           `json:"cluster"`  // the client's cluster mode
	Sluice   bool           `json:"sluice"`   // add the steps of sluice's own commands
	Prefix   string         `json:"prefix"`   // of every key the run writes
	Protocol int            `json:"protocol"` // RESP version, where the client can choose
	Only     []string       `json:"only,omitempty"`
	Tags     compatPlanTags `json:"tags"`
	Article  compatArticle  `json:"article"`
}

// compatArticle is the article step: its script, bench/article.lua (the
// article's tokenBucketScript), and the arguments of its EVALs, each
// capacity, fill rate, cost and now. now is given, not read from a
// clock, so that every run's answers are the same.
type compatArticle struct {
	Script string     `json:"script"`
	Calls  [][]string `json:"calls"`
}

// compatArticleCalls and compatArticleWant are the article step's calls
// on one bucket and its answers ({allowed, tokens left}): two taken, one
// refused, one taken after 3 s of refill. The direct run must answer
// them, so that the step cannot pass on two runs failing alike.
var (
	compatArticleCalls = [][]string{{"10", "1", "4", "1000"}, {"10", "1", "4", "1000"}, {"10", "1", "4", "1000"}, {"10", "1", "4", "1003"}}
	compatArticleWant  = `[[1,6],[1,2],[0,2],[1,1]]`
)

// compatScript is the script's steps, in the order every client's
// direct run reports them: a step that a driver leaves out would
// otherwise be compared with nothing and pass. The article's comes after
// the scan: its bucket expires (in 11 s), and a slow run would scan it or
// not.
var compatScript = []string{
	"strings", "hashes", "lists", "sets", "zsets", "streams", "expiry", "multikey", "pipeline",
	"tx", "tx_cross", "blpop", "pubsub", "scripts", "scan", "article",
}

func (p compatPlan) wants(step string) bool {
	return len(p.Only) == 0 || slices.Contains(p.Only, step)
}

// The steps compared with the node run for standalone clients.
var compatTxSteps = []string{"tx", "tx_cross"}

// compatClient is one client library, in its two modes.
type compatClient struct {
	name    string
	require func(t *testing.T)
	run     func(ctx context.Context, e *compatEnv, p compatPlan) (*compatOutput, error)
}

// compatEnv is the cluster and the sluice in front of it.
type compatEnv struct {
	cluster *clustertest.Cluster
	sluice  string
	node    string // the primary of compatTags.Node and compatTags.Other
	article string // bench/article.lua
}

// checkTags finds the primary of the transactions' slots and checks that
// the tags are placed as compatTags says.
func (e *compatEnv) checkTags(t *testing.T) {
	ctx := context.Background()
	owner := func(tag string) string {
		n, err := e.cluster.Primary(ctx, slot.Of("{"+tag+"}"))
		if err != nil {
			t.Fatal(err)
		}
		return n.Addr
	}
	e.node = owner(compatTags.Node)
	if slot.Of("{"+compatTags.Node+"}") == slot.Of("{"+compatTags.Other+"}") || owner(compatTags.Other) != e.node {
		t.Fatalf("tags %q and %q must be two slots of one primary", compatTags.Node, compatTags.Other)
	}
	seen := map[string]bool{}
	for _, tag := range compatTags.Spread {
		seen[owner(tag)] = true
	}
	if len(seen) != len(compatTags.Spread) {
		t.Fatalf("tags %q must be on %d primaries, are on %d", compatTags.Spread, len(compatTags.Spread), len(seen))
	}
}

// waitBlocked returns once a client is blocked on a primary: the BLPOP
// the driver sent waits there, whether it came straight or through sluice
// (which waits on a connection of its own to the node).
func (e *compatEnv) waitBlocked(ctx context.Context) error {
	for {
		n, err := e.blocked(ctx)
		if err != nil {
			return err
		}
		if n > 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("no client blocked on any primary: %w", ctx.Err())
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// waitUnblocked returns once no client is blocked on any primary, so that
// a run's waitBlocked sees its own BLPOP and not one left over.
func (e *compatEnv) waitUnblocked(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	for {
		n, err := e.blocked(ctx)
		if err != nil {
			return err
		}
		if n == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%d clients still blocked on the primaries", n)
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// waitNoSubscribers returns once no node counts a subscriber to a
// channel or pattern: a killed redis-cli's subscriptions end when its
// node, or sluice and then its node, sees the connection close.
func (e *compatEnv) waitNoSubscribers(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	for {
		total := 0
		for _, n := range e.cluster.Nodes {
			chans, err := n.Do(ctx, "PUBSUB", "CHANNELS").AsStrSlice()
			if err != nil {
				return fmt.Errorf("PUBSUB CHANNELS on %s: %w", n.Addr, err)
			}
			pats, err := n.Do(ctx, "PUBSUB", "NUMPAT").AsInt64()
			if err != nil {
				return fmt.Errorf("PUBSUB NUMPAT on %s: %w", n.Addr, err)
			}
			total += len(chans) + int(pats)
		}
		if total == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%d channels and patterns still subscribed on the nodes", total)
		case <-time.After(5 * time.Millisecond):
		}
	}
}

func (e *compatEnv) blocked(ctx context.Context) (int, error) {
	total := 0
	for _, n := range e.cluster.Nodes {
		info, err := n.Do(ctx, "INFO", "clients").ToString()
		if err != nil {
			return 0, fmt.Errorf("INFO clients on %s: %w", n.Addr, err)
		}
		for _, line := range strings.Split(info, "\r\n") {
			if v, ok := strings.CutPrefix(line, "blocked_clients:"); ok {
				k, err := strconv.Atoi(v)
				if err != nil {
					return 0, fmt.Errorf("INFO clients on %s: %q", n.Addr, line)
				}
				total += k
			}
		}
	}
	return total, nil
}

// compare runs cl's four runs and compares them.
func (e *compatEnv) compare(ctx context.Context, t *testing.T, cl compatClient) {
	plan := func(run string, addr string, cluster, sluice bool, only ...string) compatPlan {
		return compatPlan{
			Addr: addr, Cluster: cluster, Sluice: sluice, Only: only, Tags: compatTags, Protocol: 2,
			Prefix:  "cmp:" + cl.name + ":" + run + ":",
			Article: compatArticle{Script: e.article, Calls: compatArticleCalls},
		}
	}
	runs := []struct {
		name string
		plan compatPlan
	}{
		{"direct", plan("d", e.node, true, false)},
		{"node", plan("n", e.node, false, false, compatTxSteps...)},
		{"sluice", plan("s", e.sluice, false, true)},
		{"sluice -c", plan("c", e.sluice, true, true)},
	}
	out := make(map[string]*compatOutput, len(runs))
	for _, run := range runs {
		if err := e.waitUnblocked(ctx); err != nil {
			t.Fatalf("before %s: %v", run.name, err)
		}
		start := time.Now()
		o, err := cl.run(ctx, e, run.plan)
		if err != nil {
			t.Errorf("%s run: %v", run.name, err)
		}
		if o == nil {
			o = &compatOutput{}
		}
		if o.fatal != "" {
			t.Errorf("%s run stopped: %s", run.name, compatLastLines(o.fatal, 3))
		}
		o.normalise(run.plan.Prefix)
		out[run.name] = o
		t.Logf("%s run: %d steps in %v", run.name, len(o.order), time.Since(start).Round(time.Millisecond))
	}
	direct, node := out["direct"], out["node"]
	if len(direct.order) == 0 {
		t.Fatal("the direct run reported nothing to compare with")
	}
	if !slices.Equal(direct.order, compatScript) {
		t.Errorf("the direct run reported steps %v, want %v", direct.order, compatScript)
	}
	if got, ok := direct.steps["article"]; ok && got != compatArticleWant {
		t.Errorf("direct: step article: got %s, want %s", got, compatArticleWant)
	}
	compatSame(t, "sluice -c", direct, out["sluice -c"], direct.order)
	var rest []string
	for _, s := range direct.order {
		if !slices.Contains(compatTxSteps, s) {
			rest = append(rest, s)
		}
	}
	compatSame(t, "sluice", direct, out["sluice"], rest)
	compatSame(t, "sluice (transactions, against the node run)", node, out["sluice"], compatTxSteps)
	for _, name := range []string{"sluice", "sluice -c"} {
		compatCheckOwn(t, name, out[name])
	}
}

// compatOutput is what one run printed: one JSON result per step.
type compatOutput struct {
	order []string
	steps map[string]string // canonical JSON
	fatal string            // why the driver stopped, if it did
}

func (o *compatOutput) add(step string, result any) error {
	b, err := json.Marshal(result)
	if err != nil {
		return fmt.Errorf("step %s: %w", step, err)
	}
	return o.addJSON(step, b)
}

// addJSON records a step's result, re-encoded so that the drivers'
// spacing does not matter.
func (o *compatOutput) addJSON(step string, raw []byte) error {
	var v any
	d := json.NewDecoder(bytes.NewReader(raw))
	d.UseNumber()
	if err := d.Decode(&v); err != nil {
		return fmt.Errorf("step %s: %w", step, err)
	}
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("step %s: %w", step, err)
	}
	if o.steps == nil {
		o.steps = map[string]string{}
	}
	if _, dup := o.steps[step]; dup {
		return fmt.Errorf("step %s printed twice", step)
	}
	o.order = append(o.order, step)
	o.steps[step] = string(b)
	return nil
}

// normalise replaces the run's key prefix: the runs write keys of
// different prefixes of one length, so only the name differs.
func (o *compatOutput) normalise(prefix string) {
	for s, v := range o.steps {
		o.steps[s] = strings.ReplaceAll(v, prefix, "<p>")
	}
}

// compatSame fails t for every step of steps whose result in got differs
// from want's.
func compatSame(t *testing.T, run string, want, got *compatOutput, steps []string) {
	t.Helper()
	for _, s := range steps {
		w, ok := want.steps[s]
		if !ok {
			t.Errorf("%s: step %s: the reference run has no result", run, s)
			continue
		}
		g, ok := got.steps[s]
		if !ok {
			if got.fatal == "" { // else the run's failure is reported
				t.Errorf("%s: step %s: no result", run, s)
			}
			continue
		}
		if g != w {
			t.Errorf("%s: step %s differs\n  through sluice: %s\n  reference:      %s", run, s, g, w)
		}
	}
}

// compatOwn are the answers of sluice's own commands in the script's
// throttle and gcra steps, from the README: a field of slack holds the
// lowest value accepted where time passes between two calls (10 s of
// the hour bucket's ms; a second of GCRA's whole seconds).
var compatOwn = map[string][]compatWant{
	"throttle": {
		{ints: []int64{0, 5, 4, -1, 1000}},    // THROTTLE t1 5 1 1s: a fresh key
		{ints: []int64{0, 5, 5, -1, 0}},       // THROTTLE t2 5 1 1s 0: a peek
		{ints: []int64{1, 5, 5, -1, 0}},       // THROTTLE t3 5 1 1s 6: above the capacity
		{ints: []int64{0, 1, 0, -1, 3600000}}, // THROTTLE t4 1 1 1h
		{ints: []int64{1, 1, 0, 3600000, 3600000}, slack: []int64{1, 1, 0, 3590000, 3590000}}, // denied
		{ints: []int64{1}},                           // THROTTLE.RESET t4
		{ints: []int64{0}},                           // THROTTLE.RESET t4, again
		{err: "capacity must be a positive integer"}, // THROTTLE t5 0 1 1s
		{ints: []int64{0, 16, 15, -1, 2}},            // CL.THROTTLE t6 15 30 60: redis-cell's README
	},
	"gcra": {
		{ints: []int64{0, 6, 5, -1, 6}},                                   // GCRA g1 5 10 60: the README's
		{ints: []int64{0, 6, 4, -1, 12}},                                  // again
		{ints: []int64{0, 1, 0, -1, 60}},                                  // GCRA g2 0 1 60
		{ints: []int64{1, 1, 0, 60, 60}, slack: []int64{1, 1, 0, 59, 59}}, // denied
		{ints: []int64{1, 6, 6, -1, 0}},                                   // GCRA g3 5 10 60 TOKENS 7
		{err: "period must be > 0 and < 1e12"},                            // GCRA g4 5 10 0
	},
}

type compatWant struct {
	ints  []int64 // one integer, or an array of them
	slack []int64 // if set, the lowest accepted value of each field
	err   string  // else a substring of the error the client reports
}

func (w compatWant) String() string {
	if w.err != "" {
		return "an error with " + strconv.Quote(w.err)
	}
	if w.slack != nil {
		return fmt.Sprintf("%v down to %v", w.ints, w.slack)
	}
	return fmt.Sprint(w.ints)
}

// matches says whether a client's result, as JSON, is w.
func (w compatWant) matches(raw json.RawMessage) bool {
	if w.err != "" {
		var e struct{ Error string }
		return json.Unmarshal(raw, &e) == nil && strings.Contains(e.Error, w.err)
	}
	var got []int64
	if len(w.ints) == 1 {
		var n int64
		if json.Unmarshal(raw, &n) != nil {
			return false
		}
		got = []int64{n}
	} else if json.Unmarshal(raw, &got) != nil || len(got) != len(w.ints) {
		return false
	}
	for i, n := range got {
		lo := w.ints[i]
		if w.slack != nil {
			lo = w.slack[i]
		}
		if n < lo || n > w.ints[i] {
			return false
		}
	}
	return true
}

// compatCheckOwn checks a sluice run's throttle and gcra steps.
func compatCheckOwn(t *testing.T, run string, o *compatOutput) {
	t.Helper()
	for _, step := range []string{"throttle", "gcra"} {
		raw, ok := o.steps[step]
		if !ok {
			if o.fatal == "" { // else the run's failure is reported
				t.Errorf("%s: step %s: no result", run, step)
			}
			continue
		}
		var got []json.RawMessage
		if err := json.Unmarshal([]byte(raw), &got); err != nil || len(got) != len(compatOwn[step]) {
			t.Errorf("%s: step %s: got %s, want %d results", run, step, raw, len(compatOwn[step]))
			continue
		}
		for i, w := range compatOwn[step] {
			if !w.matches(got[i]) {
				t.Errorf("%s: step %s, command %d: got %s, want %v", run, step, i+1, got[i], w)
			}
		}
	}
}

func compatClients() []compatClient {
	cls := []compatClient{
		{name: "ioredis", require: compatRequireNode, run: compatNodeDriver("ioredis.js")},
		{name: "node-redis", require: compatRequireNode, run: compatNodeDriver("node-redis.js")},
		{name: "redis-py", require: compatRequirePython, run: compatPythonDriver},
		{name: "redis-cli", require: compatRequireRedisCLI, run: compatRedisCLI},
	}
	for _, proto := range compatProtocols {
		cls = append(cls,
			compatClient{name: fmt.Sprintf("go-redis-resp%d", proto), require: func(*testing.T) {}, run: compatGoRedis(proto)},
			compatClient{name: fmt.Sprintf("rueidis-resp%d", proto), require: func(*testing.T) {}, run: compatRueidis(proto)},
		)
	}
	return cls
}

// compatMissing fails t when SLUICE_REQUIRE_REDIS is set (make test sets
// it) and skips it otherwise.
func compatMissing(t *testing.T, format string, args ...any) {
	t.Helper()
	msg := fmt.Sprintf(format, args...)
	if os.Getenv("SLUICE_REQUIRE_REDIS") != "" {
		t.Fatalf("%s (SLUICE_REQUIRE_REDIS is set; make deps installs it)", msg)
	}
	t.Skip(msg)
}

const compatDir = "testdata/compat"

// compatPython is Debian's python, which python3-redis installs into;
// a pyenv python3 may come first on PATH.
const compatPython = "/usr/bin/python3"

// compatNodeModules guards the one npm ci a test binary may run.
var compatNodeModules struct {
	sync.Mutex
	err error
	ran bool
}

// compatRequireNode needs node and npm, and installs the drivers' packages from
// the lock file when node_modules is missing (a fresh clone).
func compatRequireNode(t *testing.T) {
	for _, tool := range []string{"node", "npm"} {
		if _, err := exec.LookPath(tool); err != nil {
			compatMissing(t, "%s is not on PATH: install Node.js 20 or later (apt-get install nodejs npm)", tool)
		}
	}
	compatNodeModules.Lock()
	defer compatNodeModules.Unlock()
	if !compatNodeModules.ran {
		compatNodeModules.ran = true
		if _, err := os.Stat(filepath.Join(compatDir, "node_modules")); errors.Is(err, os.ErrNotExist) {
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
			defer cancel()
			cmd := exec.CommandContext(ctx, "npm", "ci", "--no-audit", "--no-fund")
			cmd.Dir = compatDir
			if out, err := cmd.CombinedOutput(); err != nil {
				compatNodeModules.err = fmt.Errorf("npm ci in proxy/%s: %v\n%s", compatDir, err, compatLastLines(string(out), 15))
			}
		}
	}
	if compatNodeModules.err != nil {
		compatMissing(t, "%v", compatNodeModules.err)
	}
}

func compatRequirePython(t *testing.T) {
	out, err := exec.Command(compatPython, "-c", "import redis.cluster").CombinedOutput()
	if err != nil {
		compatMissing(t, "%s cannot import redis.cluster: install python3-redis (apt-get install python3-redis): %v %s",
			compatPython, err, bytes.TrimSpace(out))
	}
}

func compatRequireRedisCLI(t *testing.T) {
	if _, err := exec.LookPath("redis-cli"); err != nil {
		compatMissing(t, "redis-cli is not on PATH: install redis-tools")
	}
}

func compatLastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

func compatNodeDriver(script string) func(context.Context, *compatEnv, compatPlan) (*compatOutput, error) {
	return func(ctx context.Context, e *compatEnv, p compatPlan) (*compatOutput, error) {
		return e.subprocess(ctx, p, "node", script)
	}
}

func compatPythonDriver(ctx context.Context, e *compatEnv, p compatPlan) (*compatOutput, error) {
	return e.subprocess(ctx, p, compatPython, "redis-py.py")
}

// subprocess runs a driver in testdata/compat with the plan as its last
// argument. It prints one JSON line per step: {"step", "result"}, or
// {"await": "blocked"} after sending its BLPOP, to which the harness
// answers "go" on stdin once the BLPOP blocks, or {"fatal"}.
func (e *compatEnv) subprocess(ctx context.Context, p compatPlan, name string, args ...string) (*compatOutput, error) {
	plan, err := json.Marshal(p)
	if err != nil {
		return nil, err
	}
	cmd := exec.CommandContext(ctx, name, append(args, string(plan))...)
	cmd.Dir = compatDir
	cmd.WaitDelay = time.Second
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	o := &compatOutput{}
	var errs []error
	sc := bufio.NewScanner(stdout)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var line struct {
			Step   string
			Result json.RawMessage
			Await  string
			Fatal  string
		}
		if err := json.Unmarshal(sc.Bytes(), &line); err != nil {
			errs = append(errs, fmt.Errorf("driver printed %q: %w", sc.Bytes(), err))
			continue
		}
		switch {
		case line.Await == "blocked":
			if err := e.waitBlocked(ctx); err != nil {
				errs = append(errs, err)
			}
			io.WriteString(stdin, "go\n")
		case line.Fatal != "":
			o.fatal = line.Fatal
		case line.Step != "":
			if err := o.addJSON(line.Step, line.Result); err != nil {
				errs = append(errs, err)
			}
		}
	}
	stdin.Close()
	if err := cmd.Wait(); err != nil {
		if o.fatal != "" {
			errs = append(errs, fmt.Errorf("%s %s: %w", name, args[0], err))
		} else {
			errs = append(errs, fmt.Errorf("%s %s: %w\n%s", name, args[0], err, compatLastLines(stderr.String(), 20)))
		}
	}
	return o, errors.Join(errs...)
}

// compatRecorder collects an in-process driver's steps.
type compatRecorder struct {
	o    compatOutput
	errs []error
}

func (r *compatRecorder) step(p compatPlan, name string, f func() any) {
	if !p.wants(name) {
		return
	}
	if err := r.o.add(name, f()); err != nil {
		r.errs = append(r.errs, err)
	}
}

func compatErr(err error) map[string]string {
	return map[string]string{"error": err.Error()}
}

// compatTTL rounds a positive TTL of the script's 100000 s expiries to
// 100 s, so that a slow run (a second passing between EXPIRE and TTL)
// reads the same; -1 and -2 stay exact. The drivers do the same.
func compatTTL(secs int64) int64 {
	if secs <= 0 {
		return secs
	}
	return int64(math.Round(float64(secs)/100)) * 100
}

// compatCounted stands for PUBLISH's count of receivers while a
// subscriber listens: a cluster node counts only its own subscribers, and
// neither a cluster client nor sluice puts the publisher on the
// subscriber's node every time, so only the reply's kind (a count, not an
// error) compares. The drivers do the same.
func compatCounted(v any) any {
	if n, ok := v.(int64); ok && n >= 0 {
		return "count"
	}
	return v
}

// compatPanic runs f and reports a panic as its result: rueidis refuses
// some commands in cluster mode by panicking.
func compatPanic(f func() any) (v any) {
	defer func() {
		if p := recover(); p != nil {
			v = map[string]string{"panic": fmt.Sprint(p)}
		}
	}()
	return f()
}

// key names one of the run's keys; tag, if set, is its hash tag.
func (p compatPlan) key(tag, name string) string {
	if tag == "" {
		return p.Prefix + name
	}
	return p.Prefix + "{" + tag + "}" + name
}

const (
	compatIncrScript = "return {KEYS[1], ARGV[1], redis.call('INCR', KEYS[1])}"
	compatGetScript  = "return redis.call('GET', KEYS[1])"
	compatBadScript  = "return redis.call('INCR', KEYS[1])"
	compatNoSHA      = "0000000000000000000000000000000000000000"
)

// compatOwnCommands are the throttle and gcra steps' commands, with
// their keys' names at index 1.
var compatOwnCommands = map[string][][]string{
	"throttle": {
		{"THROTTLE", "t1", "5", "1", "1s"},
		{"THROTTLE", "t2", "5", "1", "1s", "0"},
		{"THROTTLE", "t3", "5", "1", "1s", "6"},
		{"THROTTLE", "t4", "1", "1", "1h"},
		{"THROTTLE", "t4", "1", "1", "1h"},
		{"THROTTLE.RESET", "t4"},
		{"THROTTLE.RESET", "t4"},
		{"THROTTLE", "t5", "0", "1", "1s"},
		{"CL.THROTTLE", "t6", "15", "30", "60"},
	},
	"gcra": {
		{"GCRA", "g1", "5", "10", "60"},
		{"GCRA", "g1", "5", "10", "60"},
		{"GCRA", "g2", "0", "1", "60"},
		{"GCRA", "g2", "0", "1", "60"},
		{"GCRA", "g3", "5", "10", "60", "TOKENS", "7"},
		{"GCRA", "g4", "5", "10", "0"},
	},
}

// ownCommand is command i of a sluice step, on p's keys.
func (p compatPlan) ownCommand(step string, i int) []string {
	args := slices.Clone(compatOwnCommands[step][i])
	args[1] = p.key("", args[1])
	return args
}

// compatGoRedis runs the script on go-redis: Client, or ClusterClient in
// cluster mode.
func compatGoRedis(proto int) func(context.Context, *compatEnv, compatPlan) (*compatOutput, error) {
	return func(ctx context.Context, e *compatEnv, p compatPlan) (*compatOutput, error) {
		p.Protocol = proto
		connect := func() goredis.UniversalClient {
			if p.Cluster {
				return goredis.NewClusterClient(&goredis.ClusterOptions{Addrs: []string{p.Addr}, Protocol: p.Protocol})
			}
			return goredis.NewClient(&goredis.Options{Addr: p.Addr, Protocol: p.Protocol})
		}
		c := connect()
		defer c.Close()
		// masters are the clients that see the whole key space: a
		// cluster client's primaries (one, sluice, through sluice).
		masters := func() []*goredis.Client {
			cc, ok := c.(*goredis.ClusterClient)
			if !ok {
				return []*goredis.Client{c.(*goredis.Client)}
			}
			var mu sync.Mutex
			var ms []*goredis.Client
			if err := cc.ForEachMaster(ctx, func(_ context.Context, m *goredis.Client) error {
				mu.Lock()
				defer mu.Unlock()
				ms = append(ms, m)
				return nil
			}); err != nil {
				panic(err)
			}
			return ms
		}
		res := compatGoRedisResult
		k := p.key
		rec := &compatRecorder{}
		rec.step(p, "strings", func() any {
			return []any{
				res(c.Set(ctx, k("", "s"), "hello", 0)),
				res(c.Get(ctx, k("", "s"))),
				res(c.Append(ctx, k("", "s"), " world")),
				res(c.Get(ctx, k("", "s"))),
				res(c.Set(ctx, k("", "n"), "10", 0)),
				res(c.Incr(ctx, k("", "n"))),
				res(c.IncrBy(ctx, k("", "n"), 5)),
				res(c.Incr(ctx, k("", "s"))),
				res(c.SetEx(ctx, k("", "sx"), "v", 100000*time.Second)),
				res(c.Get(ctx, k("", "sx"))),
				res(c.Get(ctx, k("", "missing"))),
			}
		})
		rec.step(p, "hashes", func() any {
			return []any{
				res(c.HSet(ctx, k("", "h"), "f1", "v1", "f2", "v2")),
				res(c.HGet(ctx, k("", "h"), "f1")),
				res(c.HGetAll(ctx, k("", "h"))),
				res(c.HIncrBy(ctx, k("", "h"), "n", 3)),
				res(c.HDel(ctx, k("", "h"), "f2")),
				res(c.HExists(ctx, k("", "h"), "f2")),
				res(c.HLen(ctx, k("", "h"))),
				res(c.HGetAll(ctx, k("", "h"))),
			}
		})
		rec.step(p, "lists", func() any {
			return []any{
				res(c.RPush(ctx, k("", "l"), "a", "b", "c")),
				res(c.LPush(ctx, k("", "l"), "z")),
				res(c.LRange(ctx, k("", "l"), 0, -1)),
				res(c.LPop(ctx, k("", "l"))),
				res(c.RPop(ctx, k("", "l"))),
				res(c.LLen(ctx, k("", "l"))),
				res(c.Get(ctx, k("", "l"))),
			}
		})
		rec.step(p, "sets", func() any {
			// A set's order is its node's hash table's: sorted.
			sorted := func(cmd *goredis.StringSliceCmd) any {
				v, err := cmd.Result()
				if err != nil {
					return compatErr(err)
				}
				sort.Strings(v)
				return v
			}
			return []any{
				res(c.SAdd(ctx, k("", "set"), "x", "y", "z")),
				res(c.SAdd(ctx, k("", "set"), "x")),
				res(c.SIsMember(ctx, k("", "set"), "y")),
				res(c.SCard(ctx, k("", "set"))),
				sorted(c.SMembers(ctx, k("", "set"))),
				res(c.SRem(ctx, k("", "set"), "y")),
				sorted(c.SMembers(ctx, k("", "set"))),
			}
		})
		rec.step(p, "zsets", func() any {
			return []any{
				res(c.ZAdd(ctx, k("", "z"), goredis.Z{Score: 1.5, Member: "one"}, goredis.Z{Score: 2, Member: "two"}, goredis.Z{Score: 3, Member: "three"})),
				res(c.ZRangeWithScores(ctx, k("", "z"), 0, -1)),
				res(c.ZScore(ctx, k("", "z"), "one")),
				res(c.ZIncrBy(ctx, k("", "z"), 2.5, "one")),
				res(c.ZRank(ctx, k("", "z"), "one")),
				res(c.ZRevRangeWithScores(ctx, k("", "z"), 0, 1)),
			}
		})
		rec.step(p, "streams", func() any {
			return []any{
				res(c.XAdd(ctx, &goredis.XAddArgs{Stream: k("", "x"), ID: "1-1", Values: []any{"f", "v"}})),
				res(c.XAdd(ctx, &goredis.XAddArgs{Stream: k("", "x"), ID: "2-1", Values: []any{"f", "w", "a", "b"}})),
				res(c.XAdd(ctx, &goredis.XAddArgs{Stream: k("", "x"), ID: "1-0", Values: []any{"f", "x"}})),
				res(c.XRange(ctx, k("", "x"), "-", "+")),
				res(c.XRangeN(ctx, k("", "x"), "-", "+", 1)),
				res(c.XLen(ctx, k("", "x"))),
			}
		})
		rec.step(p, "expiry", func() any {
			// go-redis reports TTL as a Duration, -1 and -2 as -1ns and -2ns.
			ttl := func(cmd *goredis.DurationCmd) any {
				d, err := cmd.Result()
				if err != nil {
					return compatErr(err)
				}
				if d < 0 {
					return int64(d)
				}
				return compatTTL(int64(d / time.Second))
			}
			return []any{
				res(c.Set(ctx, k("", "e"), "v", 0)),
				ttl(c.TTL(ctx, k("", "e"))),
				res(c.Expire(ctx, k("", "e"), 100000*time.Second)),
				ttl(c.TTL(ctx, k("", "e"))),
				res(c.Persist(ctx, k("", "e"))),
				ttl(c.TTL(ctx, k("", "e"))),
				ttl(c.TTL(ctx, k("", "missing"))),
				ttl(c.TTL(ctx, k("", "sx"))),
				res(c.Expire(ctx, k("", "missing"), 10*time.Second)),
			}
		})
		rec.step(p, "multikey", func() any {
			sp := compatTags.Spread
			k0, k1, k2, none := k(sp[0], "m"), k(sp[1], "m"), k(sp[2], "m"), k(sp[2], "none")
			if p.Cluster {
				// A cluster answers CROSSSLOT to these keys: a cluster
				// client sends one command per key and merges the replies
				// as one Redis would.
				mset := any("OK")
				for i, kk := range []string{k0, k1, k2} {
					if v := res(c.Set(ctx, kk, fmt.Sprint("v", i), 0)); v != "OK" {
						mset = v
					}
				}
				var mget, after []any
				for _, kk := range []string{k0, k1, none, k2} {
					mget = append(mget, res(c.Get(ctx, kk)))
				}
				var dels int64
				for _, kk := range []string{k0, k1, k2, none} {
					dels += c.Del(ctx, kk).Val()
				}
				for _, kk := range []string{k0, k1} {
					after = append(after, res(c.Get(ctx, kk)))
				}
				return []any{mset, mget, dels, after}
			}
			return []any{
				res(c.MSet(ctx, k0, "v0", k1, "v1", k2, "v2")),
				res(c.MGet(ctx, k0, k1, none, k2)),
				res(c.Del(ctx, k0, k1, k2, none)),
				res(c.MGet(ctx, k0, k1)),
			}
		})
		cmdsOf := func(cmds []goredis.Cmder, err error) any {
			out := map[string]any{"err": nil}
			if err != nil {
				out["err"] = err.Error()
			}
			var rs []any
			for _, cmd := range cmds {
				rs = append(rs, res(cmd))
			}
			out["cmds"] = rs
			return out
		}
		rec.step(p, "pipeline", func() any {
			kk := func(n string) string { return k(compatTags.Node, n) }
			return cmdsOf(c.Pipelined(ctx, func(pl goredis.Pipeliner) error {
				pl.Set(ctx, kk("pa"), "1", 0)
				pl.Incr(ctx, kk("pa"))
				pl.Get(ctx, kk("pa"))
				pl.RPush(ctx, kk("pl"), "x")
				pl.Incr(ctx, kk("pl"))
				pl.LRange(ctx, kk("pl"), 0, -1)
				return nil
			}))
		})
		// The transactions delete their keys, one by one, so that what
		// they wrote (client libraries differ there) does not reach the
		// scan.
		rec.step(p, "tx", func() any {
			kk := func(n string) string { return k(compatTags.Node, n) }
			return []any{
				cmdsOf(c.TxPipelined(ctx, func(pl goredis.Pipeliner) error {
					pl.Set(ctx, kk("t"), "1", 0)
					pl.Incr(ctx, kk("t"))
					pl.RPush(ctx, kk("tl"), "x")
					pl.Incr(ctx, kk("tl"))
					pl.Get(ctx, kk("t"))
					return nil
				})),
				res(c.Del(ctx, kk("t"))),
				res(c.Del(ctx, kk("tl"))),
			}
		})
		rec.step(p, "tx_cross", func() any {
			a, b := k(compatTags.Node, "x"), k(compatTags.Other, "x")
			return []any{
				cmdsOf(c.TxPipelined(ctx, func(pl goredis.Pipeliner) error {
					pl.Set(ctx, a, "1", 0)
					pl.Set(ctx, b, "2", 0)
					return nil
				})),
				res(c.Del(ctx, a)),
				res(c.Del(ctx, b)),
			}
		})
		rec.step(p, "blpop", func() any {
			// go-redis's BLPop sends its timeout in whole seconds, at
			// least 1: the pop that times out is sent as a command of
			// its own, with the other clients' 0.01 s.
			out := []any{res(c.Do(ctx, "BLPOP", k("bl", "empty"), "0.01"))}
			blocker := connect()
			defer blocker.Close()
			popped := make(chan any, 1)
			go func() { popped <- res(blocker.BLPop(ctx, 10*time.Second, k("bl", "q"))) }()
			if err := e.waitBlocked(ctx); err != nil {
				rec.errs = append(rec.errs, err)
			}
			out = append(out, res(c.RPush(ctx, k("bl", "q"), "item")))
			return append(out, <-popped)
		})
		// A second client subscribes: ClusterClient.Subscribe on the
		// primary of the channel's slot. Receive gives each confirmation
		// (a Subscription, with the connection's count) and message in
		// turn.
		rec.step(p, "pubsub", func() any {
			ch, pat := k("", "ps:ch"), k("", "ps:*")
			sub := connect()
			defer sub.Close()
			ps := sub.Subscribe(ctx, ch)
			defer ps.Close()
			next := func() any {
				m, err := ps.ReceiveTimeout(ctx, 5*time.Second)
				if err != nil {
					return compatErr(err)
				}
				return m
			}
			out := map[string]any{"subscribe": next()}
			if err := ps.PSubscribe(ctx, pat); err != nil {
				return compatErr(err)
			}
			out["psubscribe"] = next()
			out["publish"] = compatCounted(res(c.Publish(ctx, ch, "hello")))
			out["messages"] = []any{next(), next()}
			if err := ps.Unsubscribe(ctx, ch); err != nil {
				return compatErr(err)
			}
			out["unsubscribe"] = next()
			if err := ps.PUnsubscribe(ctx, pat); err != nil {
				return compatErr(err)
			}
			out["punsubscribe"] = next()
			out["publish_after"] = res(c.Publish(ctx, ch, "again")) // nobody listens: 0 on every node
			return out
		})
		rec.step(p, "scripts", func() any {
			out := []any{res(c.Eval(ctx, compatIncrScript, []string{k("sc", "n")}, "x"))}
			// A script is loaded on every primary a cluster client knows.
			var shas []any
			for _, m := range masters() {
				if sha := res(m.ScriptLoad(ctx, compatGetScript)); !slices.Contains(shas, sha) {
					shas = append(shas, sha)
				}
			}
			sha, _ := shas[0].(string)
			return append(out, shas,
				res(c.Set(ctx, k("sc", "g"), "val", 0)),
				res(c.EvalSha(ctx, sha, []string{k("sc", "g")})),
				res(c.EvalSha(ctx, compatNoSHA, []string{k("sc", "g")})),
				res(c.Eval(ctx, compatBadScript, []string{k("sc", "g")})),
			)
		})
		rec.step(p, "scan", func() any {
			var keys []string
			for _, m := range masters() {
				var cursor uint64
				for {
					batch, next, err := m.Scan(ctx, cursor, p.Prefix+"*", 20).Result()
					if err != nil {
						return compatErr(err)
					}
					keys = append(keys, batch...)
					if cursor = next; cursor == 0 {
						break
					}
				}
			}
			sort.Strings(keys)
			return keys
		})
		rec.step(p, "article", func() any {
			var out []any
			for _, call := range p.Article.Calls {
				args := make([]any, len(call))
				for i, a := range call {
					args[i] = a
				}
				out = append(out, res(c.Eval(ctx, p.Article.Script, []string{k("", "article")}, args...)))
			}
			return out
		})
		if p.Sluice {
			for _, step := range []string{"throttle", "gcra"} {
				rec.step(p, step, func() any {
					var out []any
					for i := range compatOwnCommands[step] {
						var args []any
						for _, a := range p.ownCommand(step, i) {
							args = append(args, a)
						}
						out = append(out, res(c.Do(ctx, args...)))
					}
					return out
				})
			}
		}
		return &rec.o, errors.Join(rec.errs...)
	}
}

// compatGoRedisResult is a go-redis command's value, or its error.
func compatGoRedisResult(cmd goredis.Cmder) any {
	if err := cmd.Err(); err != nil {
		if errors.Is(err, goredis.Nil) {
			return nil
		}
		return compatErr(err)
	}
	val := reflect.ValueOf(cmd).MethodByName("Val")
	if !val.IsValid() {
		return fmt.Sprintf("%T has no Val", cmd)
	}
	return val.Call(nil)[0].Interface()
}

// compatRueidis runs the script on rueidis: in cluster mode rueidis
// picks it itself from CLUSTER SLOTS; in standalone mode
// ForceSingleClient keeps it on one connection's node.
func compatRueidis(proto int) func(context.Context, *compatEnv, compatPlan) (*compatOutput, error) {
	return func(ctx context.Context, e *compatEnv, p compatPlan) (*compatOutput, error) {
		p.Protocol = proto
		connect := func() (rueidis.Client, error) {
			return rueidis.NewClient(rueidis.ClientOption{
				InitAddress:       []string{p.Addr},
				AlwaysRESP2:       p.Protocol == 2,
				DisableCache:      true,
				ForceSingleClient: !p.Cluster,
			})
		}
		c, err := connect()
		if err != nil {
			return nil, err
		}
		defer c.Close()
		b := c.B
		do := func(cmd rueidis.Completed) any {
			return compatPanic(func() any { return compatRueidisResult(c.Do(ctx, cmd)) })
		}
		// masters are the clients that see the whole key space: a
		// cluster client's primaries (one, sluice, through sluice).
		masters := func() []rueidis.Client {
			nodes := c.Nodes()
			addrs := make([]string, 0, len(nodes))
			for a := range nodes {
				addrs = append(addrs, a)
			}
			sort.Strings(addrs)
			var ms []rueidis.Client
			for _, a := range addrs {
				ms = append(ms, nodes[a])
			}
			return ms
		}
		k := p.key
		multi := func(cmds ...rueidis.Completed) any {
			return compatPanic(func() any {
				var out []any
				for _, r := range c.DoMulti(ctx, cmds...) {
					out = append(out, compatRueidisResult(r))
				}
				return out
			})
		}
		rec := &compatRecorder{}
		rec.step(p, "strings", func() any {
			return []any{
				do(b().Set().Key(k("", "s")).Value("hello").Build()),
				do(b().Get().Key(k("", "s")).Build()),
				do(b().Append().Key(k("", "s")).Value(" world").Build()),
				do(b().Get().Key(k("", "s")).Build()),
				do(b().Set().Key(k("", "n")).Value("10").Build()),
				do(b().Incr().Key(k("", "n")).Build()),
				do(b().Incrby().Key(k("", "n")).Increment(5).Build()),
				do(b().Incr().Key(k("", "s")).Build()),
				do(b().Setex().Key(k("", "sx")).Seconds(100000).Value("v").Build()),
				do(b().Get().Key(k("", "sx")).Build()),
				do(b().Get().Key(k("", "missing")).Build()),
			}
		})
		rec.step(p, "hashes", func() any {
			return []any{
				do(b().Hset().Key(k("", "h")).FieldValue().FieldValue("f1", "v1").FieldValue("f2", "v2").Build()),
				do(b().Hget().Key(k("", "h")).Field("f1").Build()),
				do(b().Hgetall().Key(k("", "h")).Build()),
				do(b().Hincrby().Key(k("", "h")).Field("n").Increment(3).Build()),
				do(b().Hdel().Key(k("", "h")).Field("f2").Build()),
				do(b().Hexists().Key(k("", "h")).Field("f2").Build()),
				do(b().Hlen().Key(k("", "h")).Build()),
				do(b().Hgetall().Key(k("", "h")).Build()),
			}
		})
		rec.step(p, "lists", func() any {
			return []any{
				do(b().Rpush().Key(k("", "l")).Element("a", "b", "c").Build()),
				do(b().Lpush().Key(k("", "l")).Element("z").Build()),
				do(b().Lrange().Key(k("", "l")).Start(0).Stop(-1).Build()),
				do(b().Lpop().Key(k("", "l")).Build()),
				do(b().Rpop().Key(k("", "l")).Build()),
				do(b().Llen().Key(k("", "l")).Build()),
				do(b().Get().Key(k("", "l")).Build()),
			}
		})
		rec.step(p, "sets", func() any {
			// A set's order is its node's hash table's: sorted.
			sorted := func(cmd rueidis.Completed) any {
				v, err := c.Do(ctx, cmd).AsStrSlice()
				if err != nil {
					return compatErr(err)
				}
				sort.Strings(v)
				return v
			}
			return []any{
				do(b().Sadd().Key(k("", "set")).Member("x", "y", "z").Build()),
				do(b().Sadd().Key(k("", "set")).Member("x").Build()),
				do(b().Sismember().Key(k("", "set")).Member("y").Build()),
				do(b().Scard().Key(k("", "set")).Build()),
				sorted(b().Smembers().Key(k("", "set")).Build()),
				do(b().Srem().Key(k("", "set")).Member("y").Build()),
				sorted(b().Smembers().Key(k("", "set")).Build()),
			}
		})
		rec.step(p, "zsets", func() any {
			return []any{
				do(b().Zadd().Key(k("", "z")).ScoreMember().ScoreMember(1.5, "one").ScoreMember(2, "two").ScoreMember(3, "three").Build()),
				do(b().Zrange().Key(k("", "z")).Min("0").Max("-1").Withscores().Build()),
				do(b().Zscore().Key(k("", "z")).Member("one").Build()),
				do(b().Zincrby().Key(k("", "z")).Increment(2.5).Member("one").Build()),
				do(b().Zrank().Key(k("", "z")).Member("one").Build()),
				do(b().Zrevrange().Key(k("", "z")).Start(0).Stop(1).Withscores().Build()),
			}
		})
		rec.step(p, "streams", func() any {
			return []any{
				do(b().Xadd().Key(k("", "x")).Id("1-1").FieldValue().FieldValue("f", "v").Build()),
				do(b().Xadd().Key(k("", "x")).Id("2-1").FieldValue().FieldValue("f", "w").FieldValue("a", "b").Build()),
				do(b().Xadd().Key(k("", "x")).Id("1-0").FieldValue().FieldValue("f", "x").Build()),
				do(b().Xrange().Key(k("", "x")).Start("-").End("+").Build()),
				do(b().Xrange().Key(k("", "x")).Start("-").End("+").Count(1).Build()),
				do(b().Xlen().Key(k("", "x")).Build()),
			}
		})
		rec.step(p, "expiry", func() any {
			ttl := func(key string) any {
				n, err := c.Do(ctx, b().Ttl().Key(key).Build()).AsInt64()
				if err != nil {
					return compatErr(err)
				}
				return compatTTL(n)
			}
			return []any{
				do(b().Set().Key(k("", "e")).Value("v").Build()),
				ttl(k("", "e")),
				do(b().Expire().Key(k("", "e")).Seconds(100000).Build()),
				ttl(k("", "e")),
				do(b().Persist().Key(k("", "e")).Build()),
				ttl(k("", "e")),
				ttl(k("", "missing")),
				ttl(k("", "sx")),
				do(b().Expire().Key(k("", "missing")).Seconds(10).Build()),
			}
		})
		rec.step(p, "multikey", func() any {
			sp := compatTags.Spread
			k0, k1, k2, none := k(sp[0], "m"), k(sp[1], "m"), k(sp[2], "m"), k(sp[2], "none")
			if p.Cluster {
				// A cluster answers CROSSSLOT to these keys (rueidis refuses
				// them itself): a cluster client sends one command per key
				// and merges the replies as one Redis would.
				mset := any("OK")
				for i, kk := range []string{k0, k1, k2} {
					if v := do(b().Set().Key(kk).Value(fmt.Sprint("v", i)).Build()); v != "OK" {
						mset = v
					}
				}
				var mget, after []any
				for _, kk := range []string{k0, k1, none, k2} {
					mget = append(mget, do(b().Get().Key(kk).Build()))
				}
				var dels int64
				for _, kk := range []string{k0, k1, k2, none} {
					n, _ := c.Do(ctx, b().Del().Key(kk).Build()).AsInt64()
					dels += n
				}
				for _, kk := range []string{k0, k1} {
					after = append(after, do(b().Get().Key(kk).Build()))
				}
				return []any{mset, mget, dels, after}
			}
			return []any{
				do(b().Mset().KeyValue().KeyValue(k0, "v0").KeyValue(k1, "v1").KeyValue(k2, "v2").Build()),
				do(b().Mget().Key(k0, k1, none, k2).Build()),
				do(b().Del().Key(k0, k1, k2, none).Build()),
				do(b().Mget().Key(k0, k1).Build()),
			}
		})
		rec.step(p, "pipeline", func() any {
			kk := func(n string) string { return k(compatTags.Node, n) }
			return multi(
				b().Set().Key(kk("pa")).Value("1").Build(),
				b().Incr().Key(kk("pa")).Build(),
				b().Get().Key(kk("pa")).Build(),
				b().Rpush().Key(kk("pl")).Element("x").Build(),
				b().Incr().Key(kk("pl")).Build(),
				b().Lrange().Key(kk("pl")).Start(0).Stop(-1).Build(),
			)
		})
		// The transactions delete their keys, one by one, so that what
		// they wrote (client libraries differ there) does not reach the
		// scan.
		rec.step(p, "tx", func() any {
			kk := func(n string) string { return k(compatTags.Node, n) }
			return []any{
				multi(
					b().Multi().Build(),
					b().Set().Key(kk("t")).Value("1").Build(),
					b().Incr().Key(kk("t")).Build(),
					b().Rpush().Key(kk("tl")).Element("x").Build(),
					b().Incr().Key(kk("tl")).Build(),
					b().Get().Key(kk("t")).Build(),
					b().Exec().Build(),
				),
				do(b().Del().Key(kk("t")).Build()),
				do(b().Del().Key(kk("tl")).Build()),
			}
		})
		rec.step(p, "tx_cross", func() any {
			a, bb := k(compatTags.Node, "x"), k(compatTags.Other, "x")
			return []any{
				multi(
					b().Multi().Build(),
					b().Set().Key(a).Value("1").Build(),
					b().Set().Key(bb).Value("2").Build(),
					b().Exec().Build(),
				),
				do(b().Del().Key(a).Build()),
				do(b().Del().Key(bb).Build()),
			}
		})
		rec.step(p, "blpop", func() any {
			out := []any{do(b().Blpop().Key(k("bl", "empty")).Timeout(0.01).Build())}
			blocker, err := connect()
			if err != nil {
				return append(out, compatErr(err))
			}
			defer blocker.Close()
			popped := make(chan any, 1)
			go func() {
				popped <- compatRueidisResult(blocker.Do(ctx, blocker.B().Blpop().Key(k("bl", "q")).Timeout(10).Build()))
			}()
			if err := e.waitBlocked(ctx); err != nil {
				rec.errs = append(rec.errs, err)
			}
			out = append(out, do(b().Rpush().Key(k("bl", "q")).Element("item").Build()))
			return append(out, <-popped)
		})
		// A dedicated client subscribes, in cluster mode on a node of
		// rueidis's choosing; its hooks report each confirmation (with the
		// connection's count) and message in turn.
		rec.step(p, "pubsub", func() any {
			ch, pat := k("", "ps:ch"), k("", "ps:*")
			dc, release := c.Dedicate()
			defer release()
			events := make(chan any, 8)
			dc.SetPubSubHooks(rueidis.PubSubHooks{
				OnMessage:      func(m rueidis.PubSubMessage) { events <- m },
				OnSubscription: func(s rueidis.PubSubSubscription) { events <- s },
			})
			next := func() any {
				select {
				case ev := <-events:
					return ev
				case <-time.After(5 * time.Second):
					return compatErr(errors.New("no pub/sub event within 5 s"))
				}
			}
			subscribe := func(cmd rueidis.Completed) any {
				if err := dc.Do(ctx, cmd).Error(); err != nil {
					return compatErr(err)
				}
				return next()
			}
			out := map[string]any{
				"subscribe":  subscribe(b().Subscribe().Channel(ch).Build()),
				"psubscribe": subscribe(b().Psubscribe().Pattern(pat).Build()),
				"publish":    compatCounted(do(b().Publish().Channel(ch).Message("hello").Build())),
				"messages":   []any{next(), next()},
			}
			out["unsubscribe"] = subscribe(b().Unsubscribe().Channel(ch).Build())
			out["punsubscribe"] = subscribe(b().Punsubscribe().Pattern(pat).Build())
			out["publish_after"] = do(b().Publish().Channel(ch).Message("again").Build()) // nobody listens: 0 on every node
			return out
		})
		rec.step(p, "scripts", func() any {
			out := []any{do(b().Eval().Script(compatIncrScript).Numkeys(1).Key(k("sc", "n")).Arg("x").Build())}
			// A script is loaded on every primary a cluster client knows.
			var shas []any
			for _, m := range masters() {
				if sha := compatRueidisResult(m.Do(ctx, m.B().ScriptLoad().Script(compatGetScript).Build())); !slices.Contains(shas, sha) {
					shas = append(shas, sha)
				}
			}
			sha, _ := shas[0].(string)
			return append(out, shas,
				do(b().Set().Key(k("sc", "g")).Value("val").Build()),
				do(b().Evalsha().Sha1(sha).Numkeys(1).Key(k("sc", "g")).Build()),
				do(b().Evalsha().Sha1(compatNoSHA).Numkeys(1).Key(k("sc", "g")).Build()),
				do(b().Eval().Script(compatBadScript).Numkeys(1).Key(k("sc", "g")).Build()),
			)
		})
		rec.step(p, "scan", func() any {
			var keys []string
			for _, m := range masters() {
				var cursor uint64
				for {
					e, err := m.Do(ctx, m.B().Scan().Cursor(cursor).Match(p.Prefix+"*").Count(20).Build()).AsScanEntry()
					if err != nil {
						return compatErr(err)
					}
					keys = append(keys, e.Elements...)
					if cursor = e.Cursor; cursor == 0 {
						break
					}
				}
			}
			sort.Strings(keys)
			return keys
		})
		rec.step(p, "article", func() any {
			var out []any
			for _, call := range p.Article.Calls {
				out = append(out, do(b().Eval().Script(p.Article.Script).Numkeys(1).Key(k("", "article")).Arg(call...).Build()))
			}
			return out
		})
		if p.Sluice {
			for _, step := range []string{"throttle", "gcra"} {
				rec.step(p, step, func() any {
					var out []any
					for i := range compatOwnCommands[step] {
						args := p.ownCommand(step, i)
						out = append(out, do(b().Arbitrary(args[0]).Keys(args[1]).Args(args[2:]...).Build()))
					}
					return out
				})
			}
		}
		return &rec.o, errors.Join(rec.errs...)
	}
}

// compatRueidisResult is a reply as JSON values, or its error.
func compatRueidisResult(r rueidis.RedisResult) any {
	m, err := r.ToMessage()
	if err != nil {
		if rueidis.IsRedisNil(err) {
			return nil
		}
		return compatErr(err)
	}
	return compatRueidisValue(m)
}

func compatRueidisValue(m rueidis.RedisMessage) any {
	if err := m.Error(); err != nil {
		if rueidis.IsRedisNil(err) {
			return nil
		}
		return compatErr(err)
	}
	switch {
	case m.IsArray():
		vs, _ := m.ToArray()
		out := make([]any, len(vs))
		for i, v := range vs {
			out[i] = compatRueidisValue(v)
		}
		return out
	case m.IsMap():
		vs, _ := m.ToMap()
		out := make(map[string]any, len(vs))
		for k, v := range vs {
			out[k] = compatRueidisValue(v)
		}
		return out
	case m.IsInt64():
		v, _ := m.ToInt64()
		return v
	case m.IsFloat64():
		v, _ := m.ToFloat64()
		return v
	case m.IsBool():
		v, _ := m.ToBool()
		return v
	}
	v, err := m.ToString()
	if err != nil {
		return compatErr(err)
	}
	return v
}

// compatRedisCLI runs the script on redis-cli, one process per command
// (one per transaction, and one per step of plain commands: batch), with
// -c in cluster mode. Its results are what it prints (--no-raw: with the
// reply's type).
func compatRedisCLI(ctx context.Context, e *compatEnv, p compatPlan) (*compatOutput, error) {
	host, port, err := net.SplitHostPort(p.Addr)
	if err != nil {
		return nil, err
	}
	base := func(host, port string) []string {
		args := []string{"-h", host, "-p", port, "--no-raw"}
		if p.Cluster {
			args = append(args, "-c")
		}
		return args
	}
	rec := &compatRecorder{}
	run := func(cmd *exec.Cmd) string {
		out, err := cmd.CombinedOutput()
		var exit *exec.ExitError
		if err != nil && !errors.As(err, &exit) {
			rec.errs = append(rec.errs, fmt.Errorf("redis-cli %q: %w", cmd.Args, err))
		}
		return strings.TrimRight(string(out), "\n")
	}
	on := func(host, port string, args ...string) string {
		return run(exec.CommandContext(ctx, "redis-cli", append(base(host, port), args...)...))
	}
	cli := func(args ...string) string { return on(host, port, args...) }
	// stdin sends lines to one redis-cli, over one connection. Reading
	// its commands from its input, redis-cli prints "(0.87s)" on a line
	// of its own after a reply that took half a second or more, as one
	// may on a loaded machine (seen under a CPU hog): no reply prints so
	// (--no-raw), and those lines are dropped.
	stdin := func(lines ...string) string {
		cmd := exec.CommandContext(ctx, "redis-cli", base(host, port)...)
		cmd.Stdin = strings.NewReader(strings.Join(lines, "\n") + "\n")
		var kept []string
		for _, line := range strings.Split(run(cmd), "\n") {
			if took, ok := strings.CutPrefix(line, "("); ok {
				if took, ok = strings.CutSuffix(took, "s)"); ok {
					if _, err := strconv.ParseFloat(took, 64); err == nil {
						continue
					}
				}
			}
			kept = append(kept, line)
		}
		return strings.Join(kept, "\n")
	}
	// batch runs cmds on one redis-cli, over one connection, and answers
	// what it printed for each, as if each had a process of its own: a
	// process per command was most of the run's time. An ECHO of a marker
	// follows each, to split the output; the redirections that -c follows
	// it reports only here (reading commands from its input), and they
	// are dropped.
	batch := func(cmds ...[]string) []string {
		const sep = "compat-batch-end"
		var lines []string
		for _, args := range cmds {
			quoted := make([]string, len(args))
			for i, a := range args {
				quoted[i] = strconv.Quote(a)
			}
			lines = append(lines, strings.Join(quoted, " "), "ECHO "+sep)
		}
		var outs []string
		var cur []string
		for _, line := range strings.Split(stdin(lines...), "\n") {
			switch {
			case line == strconv.Quote(sep):
				outs = append(outs, strings.Join(cur, "\n"))
				cur = nil
			case p.Cluster && strings.HasPrefix(line, "-> Redirected to slot ["):
			default:
				cur = append(cur, line)
			}
		}
		if len(outs) != len(cmds) {
			rec.errs = append(rec.errs, fmt.Errorf("redis-cli answered %d of %d commands: %q", len(outs), len(cmds), outs))
			outs = append(outs, make([]string, len(cmds))...)[:len(cmds)]
		}
		return outs
	}
	// masters are the primaries of CLUSTER NODES in cluster mode (sluice,
	// through sluice): the nodes that see the whole key space.
	masters := func() [][2]string {
		if !p.Cluster {
			return [][2]string{{host, port}}
		}
		var ms [][2]string
		for _, line := range strings.Split(cli("CLUSTER", "NODES"), "\n") {
			f := strings.Fields(line)
			if len(f) > 2 && strings.Contains(f[2], "master") {
				addr, _, _ := strings.Cut(f[1], "@")
				if h, pt, err := net.SplitHostPort(addr); err == nil {
					ms = append(ms, [2]string{h, pt})
				}
			}
		}
		return ms
	}
	k := p.key
	rec.step(p, "strings", func() any {
		return batch(
			[]string{"SET", k("", "s"), "hello"},
			[]string{"GET", k("", "s")},
			[]string{"APPEND", k("", "s"), " world"},
			[]string{"GET", k("", "s")},
			[]string{"SET", k("", "n"), "10"},
			[]string{"INCR", k("", "n")},
			[]string{"INCRBY", k("", "n"), "5"},
			[]string{"INCR", k("", "s")},
			[]string{"SETEX", k("", "sx"), "100000", "v"},
			[]string{"GET", k("", "sx")},
			[]string{"GET", k("", "missing")},
		)
	})
	rec.step(p, "hashes", func() any {
		return batch(
			[]string{"HSET", k("", "h"), "f1", "v1", "f2", "v2"},
			[]string{"HGET", k("", "h"), "f1"},
			[]string{"HGETALL", k("", "h")},
			[]string{"HINCRBY", k("", "h"), "n", "3"},
			[]string{"HDEL", k("", "h"), "f2"},
			[]string{"HEXISTS", k("", "h"), "f2"},
			[]string{"HLEN", k("", "h")},
			[]string{"HGETALL", k("", "h")},
		)
	})
	rec.step(p, "lists", func() any {
		return batch(
			[]string{"RPUSH", k("", "l"), "a", "b", "c"},
			[]string{"LPUSH", k("", "l"), "z"},
			[]string{"LRANGE", k("", "l"), "0", "-1"},
			[]string{"LPOP", k("", "l")},
			[]string{"RPOP", k("", "l")},
			[]string{"LLEN", k("", "l")},
			[]string{"GET", k("", "l")},
		)
	})
	rec.step(p, "sets", func() any {
		// A set's order is its node's hash table's: sorted.
		sorted := func(out string) any {
			v, ok := compatCLIValue(out).([]any)
			if !ok {
				return out
			}
			slices.SortFunc(v, func(a, b any) int { return strings.Compare(fmt.Sprint(a), fmt.Sprint(b)) })
			return v
		}
		out := batch(
			[]string{"SADD", k("", "set"), "x", "y", "z"},
			[]string{"SADD", k("", "set"), "x"},
			[]string{"SISMEMBER", k("", "set"), "y"},
			[]string{"SCARD", k("", "set")},
			[]string{"SMEMBERS", k("", "set")},
			[]string{"SREM", k("", "set"), "y"},
			[]string{"SMEMBERS", k("", "set")},
		)
		return []any{out[0], out[1], out[2], out[3], sorted(out[4]), out[5], sorted(out[6])}
	})
	rec.step(p, "zsets", func() any {
		return batch(
			[]string{"ZADD", k("", "z"), "1.5", "one", "2", "two", "3", "three"},
			[]string{"ZRANGE", k("", "z"), "0", "-1", "WITHSCORES"},
			[]string{"ZSCORE", k("", "z"), "one"},
			[]string{"ZINCRBY", k("", "z"), "2.5", "one"},
			[]string{"ZRANK", k("", "z"), "one"},
			[]string{"ZREVRANGE", k("", "z"), "0", "1", "WITHSCORES"},
		)
	})
	rec.step(p, "streams", func() any {
		return batch(
			[]string{"XADD", k("", "x"), "1-1", "f", "v"},
			[]string{"XADD", k("", "x"), "2-1", "f", "w", "a", "b"},
			[]string{"XADD", k("", "x"), "1-0", "f", "x"},
			[]string{"XRANGE", k("", "x"), "-", "+"},
			[]string{"XRANGE", k("", "x"), "-", "+", "COUNT", "1"},
			[]string{"XLEN", k("", "x")},
		)
	})
	rec.step(p, "expiry", func() any {
		ttl := func(out string) any {
			if n, ok := compatCLIValue(out).(int64); ok {
				return compatTTL(n)
			}
			return out
		}
		out := batch(
			[]string{"SET", k("", "e"), "v"},
			[]string{"TTL", k("", "e")},
			[]string{"EXPIRE", k("", "e"), "100000"},
			[]string{"TTL", k("", "e")},
			[]string{"PERSIST", k("", "e")},
			[]string{"TTL", k("", "e")},
			[]string{"TTL", k("", "missing")},
			[]string{"TTL", k("", "sx")},
			[]string{"EXPIRE", k("", "missing"), "10"},
		)
		return []any{out[0], out[1], out[2], ttl(out[3]), out[4], out[5], out[6], ttl(out[7]), out[8]}
	})
	rec.step(p, "multikey", func() any {
		sp := compatTags.Spread
		k0, k1, k2, none := k(sp[0], "m"), k(sp[1], "m"), k(sp[2], "m"), k(sp[2], "none")
		// Both ways are read into values (compatCLIValue), so that the merged
		// replies of the cluster run compare with sluice's arrays.
		if p.Cluster {
			// A cluster answers CROSSSLOT to these keys: a cluster client
			// sends one command per key and merges the replies as one
			// Redis would.
			mset := any("OK")
			for i, kk := range []string{k0, k1, k2} {
				if v := compatCLIValue(cli("SET", kk, fmt.Sprint("v", i))); v != "OK" {
					mset = v
				}
			}
			var mget, after []any
			for _, kk := range []string{k0, k1, none, k2} {
				mget = append(mget, compatCLIValue(cli("GET", kk)))
			}
			var dels int64
			for _, kk := range []string{k0, k1, k2, none} {
				n, _ := compatCLIValue(cli("DEL", kk)).(int64)
				dels += n
			}
			for _, kk := range []string{k0, k1} {
				after = append(after, compatCLIValue(cli("GET", kk)))
			}
			return []any{mset, mget, dels, after}
		}
		return []any{
			compatCLIValue(cli("MSET", k0, "v0", k1, "v1", k2, "v2")),
			compatCLIValue(cli("MGET", k0, k1, none, k2)),
			compatCLIValue(cli("DEL", k0, k1, k2, none)),
			compatCLIValue(cli("MGET", k0, k1)),
		}
	})
	rec.step(p, "pipeline", func() any {
		// redis-cli's pipeline is --pipe: raw RESP in, a count of replies
		// and errors out. It follows no redirect: the direct run is
		// seeded with the primary of these keys.
		kk := func(n string) string { return k(compatTags.Node, n) }
		var in []byte
		for _, args := range [][]string{
			{"SET", kk("pa"), "1"}, {"INCR", kk("pa")}, {"GET", kk("pa")},
			{"RPUSH", kk("pl"), "x"}, {"INCR", kk("pl")}, {"LRANGE", kk("pl"), "0", "-1"},
		} {
			bs := make([][]byte, len(args))
			for i, a := range args {
				bs[i] = []byte(a)
			}
			in = router.AppendCommand(in, bs)
		}
		cmd := exec.CommandContext(ctx, "redis-cli", "-h", host, "-p", port, "--pipe")
		cmd.Stdin = bytes.NewReader(in)
		return []string{run(cmd), cli("GET", kk("pa")), cli("LRANGE", kk("pl"), "0", "-1")}
	})
	// The transactions delete their keys, one by one, so that what they
	// wrote does not reach the scan.
	rec.step(p, "tx", func() any {
		kk := func(n string) string { return k(compatTags.Node, n) }
		return []string{
			stdin("MULTI", "SET "+kk("t")+" 1", "INCR "+kk("t"), "RPUSH "+kk("tl")+" x", "INCR "+kk("tl"), "GET "+kk("t"), "EXEC"),
			cli("DEL", kk("t")),
			cli("DEL", kk("tl")),
		}
	})
	rec.step(p, "tx_cross", func() any {
		a, b := k(compatTags.Node, "x"), k(compatTags.Other, "x")
		return []string{stdin("MULTI", "SET "+a+" 1", "SET "+b+" 2", "EXEC"), cli("DEL", a), cli("DEL", b)}
	})
	rec.step(p, "blpop", func() any {
		out := []string{cli("BLPOP", k("bl", "empty"), "0.01")}
		blocker := exec.CommandContext(ctx, "redis-cli", append(base(host, port), "BLPOP", k("bl", "q"), "10")...)
		var popped bytes.Buffer
		blocker.Stdout, blocker.Stderr = &popped, &popped
		if err := blocker.Start(); err != nil {
			return append(out, err.Error())
		}
		if err := e.waitBlocked(ctx); err != nil {
			rec.errs = append(rec.errs, err)
		}
		out = append(out, cli("RPUSH", k("bl", "q"), "item"))
		blocker.Wait()
		return append(out, strings.TrimRight(popped.String(), "\n"))
	})
	// redis-cli sends one command and, for SUBSCRIBE and PSUBSCRIBE, prints
	// what comes until it is killed: it cannot unsubscribe. So one process
	// subscribes and one subscribes to the pattern, each read line by
	// line (up to its confirmation, then up to the message), and both are
	// killed; the harness then waits until no node counts a subscriber,
	// after which PUBLISH's count is 0 everywhere.
	rec.step(p, "pubsub", func() any {
		ch, pat := k("", "ps:ch"), k("", "ps:*")
		type subscriber struct {
			cmd   *exec.Cmd
			lines chan string // closed at the end of its output
		}
		var subs []subscriber
		// stop kills the subscribers, reads their output to its end and
		// waits for them; on every way out.
		stop := func() {
			for _, s := range subs {
				s.cmd.Process.Kill()
				for range s.lines {
				}
				s.cmd.Wait()
			}
			subs = nil
		}
		defer stop()
		for _, args := range [][]string{{"SUBSCRIBE", ch}, {"PSUBSCRIBE", pat}} {
			cmd := exec.CommandContext(ctx, "redis-cli", append(base(host, port), args...)...)
			stdout, err := cmd.StdoutPipe()
			if err == nil {
				err = cmd.Start()
			}
			if err != nil {
				return compatErr(err)
			}
			s := subscriber{cmd, make(chan string)}
			go func() {
				defer close(s.lines)
				sc := bufio.NewScanner(stdout)
				for sc.Scan() {
					s.lines <- sc.Text()
				}
			}()
			subs = append(subs, s)
		}
		// read takes n lines of a subscriber's output.
		read := func(s subscriber, n int) string {
			var got []string
			for range n {
				select {
				case line, ok := <-s.lines:
					if !ok {
						return strings.Join(append(got, "(redis-cli exited)"), "\n")
					}
					got = append(got, line)
				case <-time.After(5 * time.Second):
					return strings.Join(append(got, "(no more within 5 s)"), "\n")
				}
			}
			return strings.Join(got, "\n")
		}
		out := map[string]any{
			// "Reading messages...", then the confirmation's three lines.
			"subscribe":  read(subs[0], 4),
			"psubscribe": read(subs[1], 4),
			"publish":    compatCounted(compatCLIValue(cli("PUBLISH", ch, "hello"))),
			"message":    read(subs[0], 3),
			"pmessage":   read(subs[1], 4),
		}
		stop()
		if err := e.waitNoSubscribers(ctx); err != nil {
			rec.errs = append(rec.errs, err)
		}
		out["publish_after"] = compatCLIValue(cli("PUBLISH", ch, "again"))
		return out
	})
	rec.step(p, "scripts", func() any {
		out := []string{cli("EVAL", compatIncrScript, "1", k("sc", "n"), "x")}
		// A script is loaded on every primary a cluster client knows.
		var shas []string
		for _, m := range masters() {
			if sha := on(m[0], m[1], "SCRIPT", "LOAD", compatGetScript); !slices.Contains(shas, sha) {
				shas = append(shas, sha)
			}
		}
		sha := ""
		if len(shas) > 0 {
			sha, _ = compatCLIValue(shas[0]).(string)
		}
		return append(out, strings.Join(shas, " "),
			cli("SET", k("sc", "g"), "val"),
			cli("EVALSHA", sha, "1", k("sc", "g")),
			cli("EVALSHA", compatNoSHA, "1", k("sc", "g")),
			cli("EVAL", compatBadScript, "1", k("sc", "g")),
		)
	})
	rec.step(p, "scan", func() any {
		var keys []string
		for _, m := range masters() {
			out := on(m[0], m[1], "--scan", "--pattern", p.Prefix+"*")
			keys = append(keys, strings.Fields(out)...)
		}
		sort.Strings(keys)
		return keys
	})
	rec.step(p, "article", func() any {
		var out []any
		for _, call := range p.Article.Calls {
			out = append(out, compatCLIValue(cli(append([]string{"EVAL", p.Article.Script, "1", k("", "article")}, call...)...)))
		}
		return out
	})
	if p.Sluice {
		for _, step := range []string{"throttle", "gcra"} {
			rec.step(p, step, func() any {
				var cmds [][]string
				for i := range compatOwnCommands[step] {
					cmds = append(cmds, p.ownCommand(step, i))
				}
				var out []any
				for _, o := range batch(cmds...) {
					out = append(out, compatCLIValue(o))
				}
				return out
			})
		}
	}
	return &rec.o, errors.Join(rec.errs...)
}

// compatCLIValue reads what redis-cli --no-raw printed for a flat reply (a
// scalar, or an array of scalars) into a JSON value; anything else stays
// the text it printed.
func compatCLIValue(out string) any {
	scalar := func(s string) (any, bool) {
		switch {
		case s == "(nil)":
			return nil, true
		case strings.HasPrefix(s, "(integer) "):
			n, err := strconv.ParseInt(strings.TrimPrefix(s, "(integer) "), 10, 64)
			return n, err == nil
		case strings.HasPrefix(s, "(error) "):
			return map[string]string{"error": strings.TrimPrefix(s, "(error) ")}, true
		case strings.HasPrefix(s, `"`):
			v, err := strconv.Unquote(s)
			return v, err == nil
		case s == "(empty array)":
			return []any{}, true
		case !strings.ContainsAny(s, "()\n"):
			return s, true // a status reply: OK
		}
		return nil, false
	}
	if !strings.HasPrefix(out, "1) ") {
		if v, ok := scalar(out); ok {
			return v
		}
		return out
	}
	var vs []any
	for i, line := range strings.Split(out, "\n") {
		item, ok := strings.CutPrefix(line, fmt.Sprintf("%d) ", i+1))
		if !ok {
			return out
		}
		v, ok := scalar(item)
		if !ok {
			return out
		}
		vs = append(vs, v)
	}
	return vs
}

// HELLO's version is the Redis version sluice speaks, as INFO's
// redis_version: clients gate features on it. rueidis reads HELLO's, and
// below 7 it sends no SUNSUBSCRIBE when a dedicated connection goes back
// to its pool (the shard subscription stayed, at the node), and below 6
// it refused a DoMulti mixing SUBSCRIBE with other commands in RESP3.
func TestHelloVersionIsRedisVersion(t *testing.T) {
	c := clustertest.New(t, clustertest.Config{Replicas: -1})
	r := newForwarding(t, c)
	eachIOConfig(t, proxy.Config{Decider: r, Forwarder: r}, func(t *testing.T, cfg proxy.Config) {
		addr := serveConfig(t, cfg)
		conn := dialRaw(t, addr)
		if got := conn.do("HELLO", "3"); !strings.Contains(got, "$7\r\nversion\r\n$5\r\n7.0.0\r\n") {
			t.Errorf("HELLO 3: %q", got)
		}
		if got := conn.do("INFO", "server"); !strings.Contains(got, "redis_version:7.0.0\r\n") {
			t.Errorf("INFO server: %q", got)
		}

		ctx := context.Background()
		rc, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{addr}, DisableCache: true})
		if err != nil {
			t.Fatal(err)
		}
		defer rc.Close()
		ch := "hv:{s}" + t.Name()
		err = rc.Dedicated(func(d rueidis.DedicatedClient) error {
			d.SetPubSubHooks(rueidis.PubSubHooks{OnMessage: func(rueidis.PubSubMessage) {}})
			return d.Do(ctx, d.B().Ssubscribe().Channel(ch).Build()).Error()
		})
		if err != nil {
			t.Fatal(err)
		}
		waitUntil(t, "the dedicated connection's shard subscription ends once it is back in the pool", func() bool {
			v, err := rc.Do(ctx, rc.B().PubsubShardnumsub().Channel(ch).Build()).ToArray()
			if err != nil || len(v) != 2 {
				t.Fatalf("PUBSUB SHARDNUMSUB: %v %v", v, err)
			}
			n, _ := v[1].AsInt64()
			return n == 0
		})
		err = rc.Dedicated(func(d rueidis.DedicatedClient) error {
			for i, res := range d.DoMulti(ctx, d.B().Subscribe().Channel("hv:ch").Build(), d.B().Ping().Build()) {
				if err := res.Error(); err != nil {
					t.Errorf("DoMulti(SUBSCRIBE, PING): %d: %v", i, err)
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	})
}
