package proxy_test

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/sluice-rl/sluice/proxy"
	"github.com/sluice-rl/sluice/router"
	"github.com/sluice-rl/sluice/router/clustertest"
	"github.com/sluice-rl/sluice/router/reply"
	"github.com/sluice-rl/sluice/router/slot"
)

// An operator scales the cluster out under load: a 4th primary joins and
// takes a slot of each primary, with its keys (sluice's buckets among
// them), while clients run THROTTLE on many keys and SET and GET through
// both serving paths. No client sees an error (a MOVED or an ASK is
// sluice's to follow), a bucket whose slot moved keeps its count (it
// moved with its slot), sluice's shards come to include the new primary,
// which then serves the moved slots' commands itself, and no decision
// falls back.
func TestScaleOutUnderLoad(t *testing.T) {
	c := clustertest.New(t, clustertest.Config{Replicas: -1})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	moved := tagsOnEachPrimary(t, c)
	fill(t, c, moved)
	servers := scaleServers(t, c)
	load := startScaleLoad(t, servers, moved)
	load.waitRounds(t, 5)

	added, err := c.AddPrimary(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, tag := range moved {
		if err := c.MoveSlot(ctx, slot.Of(tag), added); err != nil {
			t.Fatal(err)
		}
	}
	for _, s := range servers {
		waitUntil(t, "sluice's shards include the new primary", func() bool { return hasShard(s.r, added.Addr) })
		if info := dialRaw(t, s.addr).do("INFO", "backend"); !strings.Contains(info, "addr="+added.Addr+",state=healthy") {
			t.Errorf("INFO backend does not show the new primary %s healthy:\n%s", added.Addr, info)
		}
	}
	// Once sluice's slot map has the new primary, the moved slots'
	// commands go to it, not by way of a redirect from their old owner.
	waitUntil(t, "the new primary serves the moved slots without redirects", func() bool {
		before := redirects(c.Nodes[:3])
		sets := cmdCalls(added, "set")
		load.waitRounds(t, 2)
		return cmdCalls(added, "set") > sets && redirects(c.Nodes[:3]) == before
	})
	load.stop(t)
	load.checkExact(t, servers[0].addr)
	for _, tag := range moved {
		if got, err := nodeDo(added, "EXISTS", router.KeyPrefix+exactKey(tag)); got != ":1\r\n" {
			t.Errorf("the bucket of %s is not on the new primary: EXISTS %q %v", exactKey(tag), got, err)
		}
	}
	checkNoFallback(t, servers)
}

// An operator scales the cluster in under load: a primary's slots move,
// with their keys, to the others, every node forgets it and it is shut
// down. No client sees an error, the buckets keep their counts, sluice
// stops deciding on the primary, and no shard is taken for failed (no
// fallback decision, no warning).
func TestScaleInUnderLoad(t *testing.T) {
	c := clustertest.New(t, clustertest.Config{Replicas: -1})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	tags := tagsOnEachPrimary(t, c)
	home := map[string]*clustertest.Node{}
	for _, tag := range tags {
		home[tag] = primaryOf(t, c, tag)
	}
	fill(t, c, tags)
	leaving, err := c.AddPrimary(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, tag := range tags {
		if err := c.MoveSlot(ctx, slot.Of(tag), leaving); err != nil {
			t.Fatal(err)
		}
	}
	servers := scaleServers(t, c)
	for _, s := range servers {
		if !hasShard(s.r, leaving.Addr) {
			t.Fatalf("sluice does not decide on %s, the primary to leave", leaving.Addr)
		}
	}
	load := startScaleLoad(t, servers, tags)
	load.waitRounds(t, 5)

	for _, tag := range tags {
		if err := c.MoveSlot(ctx, slot.Of(tag), home[tag]); err != nil {
			t.Fatal(err)
		}
	}
	// The primary is shut down once sluice's slot map no longer names it
	// and the calls sent by the map before have been answered: one shut
	// down sooner fails the calls it was sent (passthrough answers
	// CLUSTERDOWN or ERR, a bucket call falls back), as any node that
	// dies with calls in flight does.
	for _, s := range servers {
		waitUntil(t, "sluice no longer decides on the primary that left", func() bool { return !hasShard(s.r, leaving.Addr) })
	}
	load.waitRounds(t, 1)
	if err := c.Remove(ctx, leaving); err != nil {
		t.Fatal(err)
	}
	for _, s := range servers {
		if info := dialRaw(t, s.addr).do("INFO", "backend"); strings.Contains(info, leaving.Addr) {
			t.Errorf("INFO backend still shows the primary that left, %s:\n%s", leaving.Addr, info)
		}
	}
	load.waitRounds(t, 5)
	load.stop(t)
	load.checkExact(t, servers[0].addr)
	checkNoFallback(t, servers)
}

// scaleLimit is the exact keys' limit: a refill of one an hour adds no
// token in a test's seconds, so what they admit is what they held.
const scaleCapacity = 100_000

var scaleLimit = []string{strconv.Itoa(scaleCapacity), "1", "1h"}

// exactKey is the key whose bucket lives in tag's slot.
func exactKey(tag string) string { return "{" + tag + "}b" }

// tagsOnEachPrimary are tags, one in a slot of each primary of c.
func tagsOnEachPrimary(t *testing.T, c *clustertest.Cluster) []string {
	t.Helper()
	var tags []string
	on := map[*clustertest.Node]bool{}
	for i := 0; len(on) < 3; i++ {
		tag := "scale" + strconv.Itoa(i)
		if n := primaryOf(t, c, tag); !on[n] {
			on[n] = true
			tags = append(tags, tag)
		}
	}
	return tags
}

// fill gives each tag's slot keys of its own, so that moving it takes a
// few MIGRATE rounds while the clients run.
func fill(t *testing.T, c *clustertest.Cluster, tags []string) {
	t.Helper()
	for _, tag := range tags {
		n := primaryOf(t, c, tag)
		args := []string{"MSET"}
		for i := range 250 {
			args = append(args, "{"+tag+"}fill"+strconv.Itoa(i), "v")
		}
		if got, err := nodeDo(n, args...); got != "+OK\r\n" {
			t.Fatalf("MSET on %s: %q %v", n.Addr, got, err)
		}
	}
}

// scaleServer is a sluice, with a router of its own, on one serving path.
type scaleServer struct {
	r    *router.Cluster
	addr string
	logs *observer.ObservedLogs // the router's warnings
}

// scaleServers serves c on an event loop and on goroutines. No heartbeat
// (Share): the shards' faults are the test's to count.
func scaleServers(t *testing.T, c *clustertest.Cluster) []scaleServer {
	t.Helper()
	var out []scaleServer
	for _, loops := range []int{1, -1} {
		core, logs := observer.New(zap.WarnLevel)
		r := newRouterConfig(t, router.ClusterConfig{Seeds: c.Addrs(), Timeout: time.Second, HotThreshold: -1, Share: 1, Logger: zap.New(core)})
		waitRouter(t, r)
		out = append(out, scaleServer{r, serveConfig(t, proxy.Config{Decider: r, Forwarder: r, Loops: loops}), logs})
	}
	return out
}

// scaleLoad is clients that send, round after round, THROTTLE on a key of
// many, SET and GET, and THROTTLE on the exact keys, through each server,
// each reply checked.
type scaleLoad struct {
	done    chan struct{}
	wg      sync.WaitGroup
	rounds  []atomic.Int64 // by client
	allowed []atomic.Int64 // by exact key
	tags    []string

	mu   sync.Mutex // guards errs
	errs []string
}

func startScaleLoad(t *testing.T, servers []scaleServer, tags []string) *scaleLoad {
	t.Helper()
	const perServer = 3
	l := &scaleLoad{done: make(chan struct{}), rounds: make([]atomic.Int64, len(servers)*perServer),
		allowed: make([]atomic.Int64, len(tags)), tags: tags}
	for i := range len(servers) * perServer {
		conn, err := net.Dial("tcp", servers[i%len(servers)].addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { conn.Close() })
		l.wg.Go(func() { l.client(i, conn) })
	}
	t.Cleanup(func() { l.stopped() })
	return l
}

// client runs rounds on conn until the load stops or a reply is wrong.
func (l *scaleLoad) client(id int, conn net.Conn) {
	br := bufio.NewReader(conn)
	for round := 0; ; round++ {
		select {
		case <-l.done:
			return
		default:
		}
		tag := l.tags[round%len(l.tags)]
		pass := fmt.Sprintf("{%s}p%d", tag, id)
		if round%2 == 1 {
			pass = fmt.Sprintf("pass%d:%d", id, round%64)
		}
		val := strconv.Itoa(round)
		cmds := [][]string{
			{"THROTTLE", fmt.Sprintf("many:%d:%d", id, round%500), "1000000", "1000000", "1s"},
			{"SET", pass, val},
			{"GET", pass},
			append([]string{"THROTTLE", exactKey(tag)}, scaleLimit...),
		}
		var b []byte
		for _, args := range cmds {
			bs := make([][]byte, len(args))
			for i, a := range args {
				bs[i] = []byte(a)
			}
			b = router.AppendCommand(b, bs)
		}
		conn.SetDeadline(time.Now().Add(10 * time.Second))
		if _, err := conn.Write(b); err != nil {
			l.fail("writing: %v", err)
			return
		}
		for i, want := range []string{"*5\r\n:0\r\n", "+OK\r\n", "$" + strconv.Itoa(len(val)) + "\r\n" + val + "\r\n", "*5\r\n"} {
			got, err := reply.Read(br, nil)
			if err != nil {
				l.fail("reading: %v", err)
				return
			}
			if !strings.HasPrefix(string(got), want) {
				l.fail("%q: %q, want %q", cmds[i], got, want)
				return
			}
			if i == 3 && strings.HasPrefix(string(got), "*5\r\n:0\r\n") {
				l.allowed[slices.Index(l.tags, tag)].Add(1)
			}
		}
		l.rounds[id].Add(1)
	}
}

func (l *scaleLoad) fail(format string, args ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.errs = append(l.errs, fmt.Sprintf(format, args...))
}

// waitRounds waits until each client has made n more rounds, and fails t
// if one has seen an error. A client's calls sent before are answered
// then: it waits for a round's replies before its next.
func (l *scaleLoad) waitRounds(t *testing.T, n int64) {
	t.Helper()
	want := make([]int64, len(l.rounds))
	for i := range l.rounds {
		want[i] = l.rounds[i].Load() + n
	}
	waitUntil(t, "the clients make their rounds", func() bool {
		for i := range l.rounds {
			if l.rounds[i].Load() < want[i] {
				return l.failed()
			}
		}
		return true
	})
	l.check(t)
}

func (l *scaleLoad) failed() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.errs) > 0
}

func (l *scaleLoad) check(t *testing.T) {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.errs) > 0 {
		t.Fatalf("%d client errors, the first: %s", len(l.errs), l.errs[0])
	}
}

// stop ends the clients and fails t if one has seen an error.
func (l *scaleLoad) stop(t *testing.T) {
	t.Helper()
	l.stopped()
	l.check(t)
}

func (l *scaleLoad) stopped() {
	select {
	case <-l.done:
	default:
		close(l.done)
	}
	l.wg.Wait()
}

// checkExact checks, through the sluice at addr, that each exact key's
// bucket took one token for each call it allowed: what is left and what
// was allowed make its capacity, and a call for one more is denied.
func (l *scaleLoad) checkExact(t *testing.T, addr string) {
	t.Helper()
	conn := dialRaw(t, addr)
	for i, tag := range l.tags {
		key := exactKey(tag)
		allowed := l.allowed[i].Load()
		left := scaleCapacity - allowed
		if left <= 0 {
			t.Fatalf("%s: %d calls allowed, more than its capacity %d", key, allowed, scaleCapacity)
		}
		want := fmt.Sprintf("*5\r\n:0\r\n:%d\r\n:0\r\n", scaleCapacity)
		if got := conn.do(append(append([]string{"THROTTLE", key}, scaleLimit...), strconv.FormatInt(left, 10))...); !strings.HasPrefix(got, want) {
			t.Errorf("%s, after %d calls allowed: taking the %d tokens left: %q, want %q...", key, allowed, left, got, want)
		}
		if got := conn.do(append([]string{"THROTTLE", key}, scaleLimit...)...); !strings.HasPrefix(got, "*5\r\n:1\r\n") {
			t.Errorf("%s: a call past its capacity: %q, want denied", key, got)
		}
	}
}

// hasShard reports whether r decides keys on the primary at addr.
func hasShard(r *router.Cluster, addr string) bool {
	return slices.ContainsFunc(r.Stats().Cluster.Shards, func(s router.ShardStats) bool { return s.Addr == addr })
}

var redirectStat = regexp.MustCompile(`errorstat_(?:MOVED|ASK):count=(\d+)`)

// redirects is how many MOVED and ASK the nodes have answered.
func redirects(nodes []*clustertest.Node) int {
	sum := 0
	for _, n := range nodes {
		stats, _ := n.Do(context.Background(), "INFO", "errorstats").ToString()
		for _, m := range redirectStat.FindAllStringSubmatch(stats, -1) {
			v, _ := strconv.Atoi(m[1])
			sum += v
		}
	}
	return sum
}

// checkNoFallback fails t if a server's router decided by the fallback,
// saw a shard fail or warned of anything.
func checkNoFallback(t *testing.T, servers []scaleServer) {
	t.Helper()
	for _, s := range servers {
		for _, e := range s.logs.All() {
			t.Errorf("warning: %s %v", e.Message, e.ContextMap())
		}
		st := s.r.Stats().Cluster
		if fb := st.Decisions[router.SourceLocal] + st.Decisions[router.SourceOpen] + st.Decisions[router.SourceClosed]; fb != 0 {
			t.Errorf("%d decisions by the fallback", fb)
		}
		for _, sh := range st.Shards {
			if !sh.Healthy || sh.Errors != 0 {
				t.Errorf("shard %s: healthy %v, %d errors (%v), last %q", sh.Addr, sh.Healthy, sh.Errors, sh.ErrorKinds, sh.LastError)
			}
		}
	}
}
