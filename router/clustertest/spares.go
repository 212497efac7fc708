package clustertest

import (
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
)

// A primary answers CLUSTERDOWN for 2 s after it starts, whatever the
// test does (Redis's CLUSTER_WRITABLE_DELAY, counted from the node's
// first cluster cron): a cluster of fresh nodes costs every test those
// 2 s. So New keeps spares: blank cluster nodes started when the previous
// cluster was made, which have waited out the delay by the time the next
// one needs them. Forming a cluster of spares takes what its gossip takes.
//
// Only clusters without replicas, TLS or a password use them (the common
// shape); the settings that differ between the others (node timeout,
// coverage) are set when a spare is adopted, and written to its
// redis.conf for a Restart. Not replicas: after its first sync a primary
// holds its writes back until the replica's first REPLCONF ACK, which
// comes with the replica's once-a-second cron, so a test that killed a
// primary just after New lost what it wrote (fresh nodes are still in
// their 2 s delay meanwhile). Spares that no test took die with the test binary (Pdeathsig);
// their directories are removed by the next test binary that makes
// spares.
var spares sparePool

// spareCount is how many spares are kept: two of the common cluster.
const spareCount = 6

type sparePool struct {
	mu    sync.Mutex
	nodes []*Node // oldest first
	dir   string  // where their directories are, once made
	seq   int     // names their directories
}

// spares reports whether a cluster of cfg may be made of spares.
func (cfg Config) spares() bool {
	return cfg.replicas() == 0 && !cfg.TLS && cfg.User == "" && cfg.Password == ""
}

// take hands out up to n spares, oldest first.
func (p *sparePool) take(n int) []*Node {
	p.mu.Lock()
	defer p.mu.Unlock()
	n = min(n, len(p.nodes))
	got := p.nodes[:n:n]
	p.nodes = append([]*Node(nil), p.nodes[n:]...)
	return got
}

// fill starts spares until there are spareCount, and waits until they
// answer: what runs after New sees no goroutine of theirs but the one
// that waits for each process. A spare that fails to start is left out.
func (p *sparePool) fill() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.dir == "" {
		dir, err := p.makeDir()
		if err != nil {
			return
		}
		p.dir = dir
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	for range spareCount - len(p.nodes) {
		p.seq++
		dir := filepath.Join(p.dir, strconv.Itoa(p.seq))
		wg.Go(func() {
			n, err := (&Cluster{}).startNode(dir, Config{})
			if err != nil {
				os.RemoveAll(dir)
				return
			}
			// Its kept client would keep connection goroutines alive while
			// it waits; tests count those.
			n.dropView(nil)
			n.spare = true
			mu.Lock()
			p.nodes = append(p.nodes, n)
			mu.Unlock()
		})
	}
	wg.Wait()
}

// makeDir makes the directory of this process's spares, with its pid,
// after removing those of processes that have exited.
func (p *sparePool) makeDir() (string, error) {
	old, _ := filepath.Glob(filepath.Join(os.TempDir(), "clustertest-spares-*"))
	for _, d := range old {
		pid, err := strconv.Atoi(d[strings.LastIndexByte(d, '-')+1:])
		if err == nil && pid != os.Getpid() && errors.Is(syscall.Kill(pid, 0), syscall.ESRCH) {
			os.RemoveAll(d)
		}
	}
	dir := filepath.Join(os.TempDir(), "clustertest-spares-"+strconv.Itoa(os.Getpid()))
	return dir, os.MkdirAll(dir, 0o755)
}

// formingTimeout is a spare's node timeout while its cluster forms. A
// spare has known no primary with slots while it waited, which Redis
// counts as being in a minority partition: a primary that leaves one
// waits its node timeout (500 ms to 5 s) before it takes writes (the
// rejoin delay). The smallest delay, then the test's timeout (settle).
const formingTimeout = "500"

// adopt makes spare n a node of c, shaped by cfg.
func (c *Cluster) adopt(ctx context.Context, n *Node, cfg Config) error {
	n.c = c
	_, port, _ := net.SplitHostPort(n.Addr)
	p, _ := strconv.Atoi(port)
	if err := os.WriteFile(filepath.Join(n.dir, "redis.conf"), c.conf(p, n.dir, cfg), 0o644); err != nil {
		return err
	}
	return n.do(ctx, "CONFIG", "SET", "cluster-node-timeout", formingTimeout, "cluster-require-full-coverage", cfg.fullCoverage()).Error()
}

// settle gives c's spares the node timeout of cfg, once c has formed.
func (c *Cluster) settle(ctx context.Context, cfg Config) error {
	for _, n := range c.Nodes {
		if !n.spare {
			continue
		}
		if err := n.do(ctx, "CONFIG", "SET", "cluster-node-timeout", strconv.FormatInt(cfg.nodeTimeout().Milliseconds(), 10)).Error(); err != nil {
			return err
		}
	}
	return nil
}

// handedOut are the ports freePort gave in this process: a node killed by
// a test keeps its port for its Restart, which a spare started meanwhile
// must not take.
var handedOut = struct {
	sync.Mutex
	ports map[int]bool
}{ports: map[int]bool{}}
