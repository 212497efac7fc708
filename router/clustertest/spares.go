package clustertest

import (
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
)

// A primary answers CLUSTERDOWN for 2 s after it starts, whatever the
// test does (Redis's CLUSTER_WRITABLE_DELAY, counted from the node's
// first cluster cron), and nodes that have just met take their gossip's
// time, half a second or more under -race, to know each other: a cluster
// of fresh nodes costs every test both. So New keeps spares: groups of
// nodes of one shape, each started and begun as a cluster of its own
// when the previous cluster of that shape was made, which have waited out
// the delay and formed by the time the next one needs them. Their forming
// is the redis-servers' gossip, not a goroutine of the test binary.
//
// Only the shapes most tests use have spares, and only clusters without
// TLS or an ACL user use them (a node cannot move its ports to TLS once
// started); the settings that differ between the others (node timeout,
// coverage, password) are set when a group is adopted, and written to its
// nodes' redis.conf for a Restart. A group's replicas are
// begun as primaries without slots and made replicas when the group is
// adopted (join): CLUSTER REPLICATE needs the nodes to know each other,
// which fill does not wait for, and by then they do, so the replicas'
// first sync (diskless) takes milliseconds, and their first
// acknowledgement (streaming) a second at most. Spares that
// no test took die with the test binary (DieWithParent, on Linux); their
// directories are removed by the next test binary that makes spares.
var spares sparePool

// shape is a cluster's number of primaries and of replicas per primary.
type shape struct{ primaries, replicas int }

// spareGroups is how many groups of each shape are kept: three of the
// shape most tests use, which they often ask for back to back, two of 3
// primaries with a replica each, which fewer tests use, and one of a
// single primary, which a few tests of a package use, further apart.
var spareGroups = map[shape]int{{3, 0}: 3, {3, 1}: 2, {1, 0}: 1}

type sparePool struct {
	mu     sync.Mutex
	groups map[shape][][]*Node // oldest first
	dir    string              // where their directories are, once made
	seq    int                 // names their directories
}

// spareShape is c's shape, and whether a cluster of c may be made of
// spares.
func (c Config) spareShape() (shape, bool) {
	s := shape{c.primaries(), c.replicas()}
	return s, spareGroups[s] > 0 && !c.TLS && c.User == ""
}

// take hands out the oldest group of shape s, or nil.
func (p *sparePool) take(s shape) []*Node {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.groups[s]) == 0 {
		return nil
	}
	g := p.groups[s][0]
	p.groups[s] = append([][]*Node(nil), p.groups[s][1:]...)
	return g
}

// fill starts and begins groups of shape s until there are spareGroups,
// and waits until their nodes have been introduced: what runs after New
// sees no goroutine of theirs but the one that waits for each process. A
// group of which a node fails to start or to begin is left out.
func (p *sparePool) fill(s shape) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.dir == "" {
		dir, err := p.makeDir()
		if err != nil {
			return
		}
		p.dir = dir
	}
	if p.groups == nil {
		p.groups = map[shape][][]*Node{}
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	for range spareGroups[s] - len(p.groups[s]) {
		dirs := make([]string, s.primaries*(1+s.replicas))
		for i := range dirs {
			p.seq++
			dirs[i] = filepath.Join(p.dir, strconv.Itoa(p.seq))
		}
		wg.Go(func() {
			if g := startGroup(dirs, s.primaries); g != nil {
				mu.Lock()
				p.groups[s] = append(p.groups[s], g)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
}

// startGroup starts a node in each of dirs and begins them as a cluster
// of which the first np are the primaries.
func startGroup(dirs []string, np int) []*Node {
	nodes := make([]*Node, len(dirs))
	var wg sync.WaitGroup
	for i, dir := range dirs {
		wg.Go(func() {
			if n, err := (&Cluster{}).startNode(dir, Config{spare: true}); err == nil {
				n.spare = true
				nodes[i] = n
			}
		})
	}
	wg.Wait()
	c := &Cluster{Nodes: nodes}
	for _, n := range nodes {
		if n != nil {
			n.c = c
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), setupTimeout)
	defer cancel()
	if slices.Contains(c.Nodes, nil) || c.begin(ctx, np) != nil {
		for i, n := range c.Nodes {
			if n != nil {
				n.Kill()
			}
			os.RemoveAll(dirs[i])
		}
		return nil
	}
	for _, n := range c.Nodes {
		// Its kept client would keep connection goroutines alive while
		// it waits; tests count those.
		n.dropView(nil)
	}
	return c.Nodes
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
// spare was in a minority partition (no primary with slots) until its
// group began, and a primary that leaves one waits its node timeout
// (500 ms to 5 s) before it takes writes (the rejoin delay): a group
// taken young waits the smallest delay, then has the test's timeout
// (settle). Not with replicas: they would take over a primary that
// missed half a second, which a loaded machine's can.
const formingTimeout = "500"

// adopt makes spare n a node of c, shaped by cfg.
func (c *Cluster) adopt(ctx context.Context, n *Node, cfg Config) error {
	_, port, _ := net.SplitHostPort(n.Addr)
	p, _ := strconv.Atoi(port)
	if err := os.WriteFile(filepath.Join(n.dir, "redis.conf"), c.conf(p, n.dir, cfg), 0o644); err != nil {
		return err
	}
	timeout := formingTimeout
	if cfg.replicas() > 0 {
		timeout = strconv.FormatInt(cfg.nodeTimeout().Milliseconds(), 10)
	}
	args := []string{"CONFIG", "SET", "cluster-node-timeout", timeout, "cluster-require-full-coverage", cfg.fullCoverage(), "hz", hz}
	if cfg.Password != "" {
		args = append(args, "requirepass", cfg.Password, "masterauth", cfg.Password)
	}
	// Sent as the spare's, without a password: c's client would
	// authenticate with one the node does not have yet.
	err := n.do(ctx, args...).Error()
	if cfg.Password != "" {
		// Its kept client would reconnect without one.
		n.dropView(nil)
	}
	n.c = c
	return err
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
