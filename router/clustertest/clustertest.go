// Package clustertest starts a real Redis Cluster for tests and benchmarks,
// in the manner of net/http/httptest: New starts it on free loopback ports
// in a temporary directory and registers its shutdown with t.Cleanup.
//
// It needs redis-server on PATH. Without it the test is skipped, unless
// SLUICE_REQUIRE_REDIS is set (make test sets it), so CI cannot silently
// skip the tests that matter.
package clustertest

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/redis/rueidis"
)

// Slots is the number of hash slots in a Redis Cluster.
const Slots = 16384

// setupTimeout bounds every wait while a cluster forms or a node restarts.
const setupTimeout = 30 * time.Second

// Config shapes a cluster. The zero value is 3 primaries with one replica
// each, a node timeout of 1s and full coverage required (Redis's default).
type Config struct {
	Primaries int // 0 means 3
	// Replicas per primary; 0 means 1, a negative value means none.
	Replicas int
	// NodeTimeout is cluster-node-timeout; 0 means 1s, short so that
	// failover tests take seconds.
	NodeTimeout time.Duration
	// PartialCoverage sets cluster-require-full-coverage no, so keys of
	// healthy shards stay available while another shard has no primary.
	PartialCoverage bool
	// TLS serves every node on TLS only (tls-port, port 0), its cluster
	// bus and replication too (tls-cluster, tls-replication), with
	// certificates made for the test (Cluster.Certs). Clients present a
	// certificate of the same authority, as Redis requires by default
	// (tls-auth-clients yes).
	TLS bool
	// Password, when set, is required of every client: the default
	// user's (requirepass) or, with User, that ACL user's, the default
	// user being off then. Replicas authenticate with it (masteruser,
	// masterauth).
	User, Password string

	// spare marks a spare's node, which runs at Redis's default hz until
	// adopted: two dozen idle nodes at hz 100 cost a tenth of a core.
	spare bool
}

// hz is a node's hz in a test's cluster.
const hz = "100"

func (c Config) primaries() int {
	if c.Primaries <= 0 {
		return 3
	}
	return c.Primaries
}

func (c Config) replicas() int {
	switch {
	case c.Replicas < 0:
		return 0
	case c.Replicas == 0:
		return 1
	}
	return c.Replicas
}

// fullCoverage is cluster-require-full-coverage's value for c.
func (c Config) fullCoverage() string {
	if c.PartialCoverage {
		return "no"
	}
	return "yes"
}

func (c Config) nodeTimeout() time.Duration {
	if c.NodeTimeout <= 0 {
		return time.Second
	}
	return c.NodeTimeout
}

// Cluster is a running Redis Cluster of local redis-server processes.
type Cluster struct {
	// Nodes are the primaries first (in slot order), then the replicas,
	// then the primaries AddPrimary added; a node Remove took out of the
	// cluster is no longer among them.
	Nodes []*Node
	// Certs are the nodes' certificates with Config.TLS, else nil.
	Certs *Certs
	// User and Password are Config's: what clients authenticate with.
	User, Password string

	// cfg and root are what New made the nodes with, for AddPrimary's.
	cfg  Config
	root string
}

// ClientOption is what a rueidis client needs to reach the cluster: its
// addresses, and its TLS configuration and credentials when it has them.
func (c *Cluster) ClientOption() rueidis.ClientOption {
	opt := rueidis.ClientOption{InitAddress: c.Addrs(), DisableCache: true, Username: c.User, Password: c.Password}
	if c.Certs != nil {
		opt.TLSConfig = c.Certs.ClientTLS()
	}
	return opt
}

// Node is one redis-server process of a Cluster.
type Node struct {
	Addr   string // 127.0.0.1:port
	ID     string // cluster node ID
	c      *Cluster
	dir    string
	cmd    *exec.Cmd
	done   chan struct{} // closed when cmd has exited
	paused atomic.Bool
	spare  bool // started as a spare: its directory is removed with it

	mu sync.Mutex // guards views
	// views is the client clustertest's own calls use (do), kept between
	// calls: Do's fresh client per call costs a connection and a
	// handshake, tens of ms under -race, and a cluster forming, or a test
	// asking keys' primaries, makes hundreds of calls. Dropped when it
	// fails and when the node is killed.
	views rueidis.Client
}

// Require skips t when redis-server is missing and SLUICE_REQUIRE_REDIS is
// unset, and fails it when redis-server is missing but required.
func Require(t testing.TB) {
	t.Helper()
	if _, err := exec.LookPath("redis-server"); err != nil {
		if os.Getenv("SLUICE_REQUIRE_REDIS") != "" {
			t.Fatalf("clustertest: redis-server is not on PATH and SLUICE_REQUIRE_REDIS is set (install redis-server, or run make test)")
		}
		t.Skip("clustertest: redis-server is not on PATH; install it or run make test")
	}
}

// New starts a cluster shaped by cfg and waits until every node agrees on
// the slot map. It stops every node when the test ends.
func New(t testing.TB, cfg Config) *Cluster {
	t.Helper()
	Require(t)
	c := &Cluster{User: cfg.User, Password: cfg.Password, cfg: cfg, root: t.TempDir()}
	if cfg.TLS {
		c.Certs = NewCerts(t)
	}
	t.Cleanup(c.close)
	np, nr := cfg.primaries(), cfg.replicas()
	ctx, cancel := context.WithTimeout(context.Background(), setupTimeout)
	defer cancel()
	// A formed group of spares, when the shape is theirs, saves the
	// nodes' start and the cluster's forming.
	var group []*Node
	shape, spare := cfg.spareShape()
	if spare {
		group = spares.take(shape)
	}
	for _, n := range group {
		if err := c.adopt(ctx, n, cfg); err != nil {
			// One that died idle: the group is given up for fresh nodes.
			for _, n := range group {
				n.Kill()
				os.RemoveAll(n.dir)
			}
			group = nil
			break
		}
	}
	c.Nodes = group
	for len(c.Nodes) < np*(1+nr) {
		n, err := c.startNode(filepath.Join(c.root, strconv.Itoa(len(c.Nodes))), cfg)
		if err != nil {
			t.Fatalf("clustertest: %v", err)
		}
		c.Nodes = append(c.Nodes, n)
	}
	if spare {
		spares.fill(shape)
	}
	if group == nil {
		if err := c.begin(ctx, np); err != nil {
			t.Fatalf("clustertest: forming the cluster: %v", err)
		}
	}
	if err := c.join(ctx, np, nr); err != nil {
		t.Fatalf("clustertest: forming the cluster: %v", err)
	}
	if err := c.settle(ctx, cfg); err != nil {
		t.Fatalf("clustertest: %v", err)
	}
	return c
}

// Addrs are the addresses of all nodes, usable as seeds by a cluster client.
func (c *Cluster) Addrs() []string {
	addrs := make([]string, len(c.Nodes))
	for i, n := range c.Nodes {
		addrs[i] = n.Addr
	}
	return addrs
}

// Do sends one command to node n, on a connection of its own, and
// returns its reply.
func (n *Node) Do(ctx context.Context, args ...string) rueidis.RedisResult {
	cl, err := n.client()
	if err != nil {
		return rueidis.NewErrorResult(err)
	}
	defer cl.Close()
	return cl.Do(ctx, cl.B().Arbitrary(args...).Build())
}

func (n *Node) client() (rueidis.Client, error) {
	opt := n.c.ClientOption()
	opt.InitAddress, opt.ForceSingleClient, opt.DisableRetry = []string{n.Addr}, true, true
	opt.Dialer = net.Dialer{Timeout: time.Second}
	return rueidis.NewClient(opt)
}

// do is Do on n's kept client (views), for clustertest's own calls: a
// cluster forming polls its nodes, and tests ask a slot's primary often.
func (n *Node) do(ctx context.Context, args ...string) rueidis.RedisResult {
	n.mu.Lock()
	cl := n.views
	if cl == nil {
		var err error
		if cl, err = n.client(); err != nil {
			n.mu.Unlock()
			return rueidis.NewErrorResult(err)
		}
		n.views = cl
	}
	n.mu.Unlock()
	res := cl.Do(ctx, cl.B().Arbitrary(args...).Build())
	if _, redis := rueidis.IsRedisErr(res.Error()); res.Error() != nil && !redis {
		n.dropView(cl)
	}
	return res
}

// dropView closes cl if it is still n's kept client (nil: whichever is).
func (n *Node) dropView(cl rueidis.Client) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.views != nil && (cl == nil || n.views == cl) {
		n.views.Close()
		n.views = nil
	}
}

// Kill stops n with SIGKILL, as a crash would, and waits for it to exit.
func (n *Node) Kill() {
	if n.cmd.Process.Signal(syscall.SIGKILL) == nil {
		<-n.done
	}
	n.dropView(nil)
}

// Pause stops n with SIGSTOP: a hung node whose socket stays open.
func (n *Node) Pause() error {
	n.paused.Store(true)
	return n.cmd.Process.Signal(syscall.SIGSTOP)
}

// Resume continues a paused node with SIGCONT.
func (n *Node) Resume() error {
	n.paused.Store(false)
	return n.cmd.Process.Signal(syscall.SIGCONT)
}

// Restart starts a killed node again on its port with its identity.
func (n *Node) Restart(ctx context.Context) error {
	if err := n.spawn(); err != nil {
		return err
	}
	return n.waitUp(ctx)
}

func (c *Cluster) close() {
	for _, n := range c.Nodes {
		n.Resume() // a paused process does not act on SIGKILL until continued on some kernels
		n.Kill()
		if n.spare {
			os.RemoveAll(n.dir)
		}
	}
}

func (c *Cluster) startNode(dir string, cfg Config) (*Node, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	var lastErr error
	// A free port can be taken by another process between the probe and the
	// start; try a few.
	for range 5 {
		port, err := freePort()
		if err != nil {
			return nil, err
		}
		if err := os.WriteFile(filepath.Join(dir, "redis.conf"), c.conf(port, dir, cfg), 0o644); err != nil {
			return nil, err
		}
		n := &Node{Addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), dir: dir, c: c}
		if err := n.spawn(); err != nil {
			return nil, err
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		err = n.waitUp(ctx)
		cancel()
		if err == nil {
			return n, nil
		}
		n.Kill()
		lastErr = err
	}
	return nil, lastErr
}

// conf is the redis.conf of c's node on port, in dir, for cfg.
func (c *Cluster) conf(port int, dir string, cfg Config) []byte {
	nodeHz := hz
	if cfg.spare {
		nodeHz = "10"
	}
	lines := []string{
		"port " + strconv.Itoa(port),
		"bind 127.0.0.1",
		"dir " + dir,
		"logfile redis.log",
		"save \"\"",
		"appendonly no",
		"cluster-enabled yes",
		"cluster-config-file nodes.conf",
		"cluster-node-timeout " + strconv.FormatInt(cfg.nodeTimeout().Milliseconds(), 10),
		"cluster-require-full-coverage " + cfg.fullCoverage(),
		// Let any replica take over whatever its link history, and never
		// move replicas between primaries behind a test's back.
		"cluster-replica-validity-factor 0",
		"cluster-allow-replica-migration no",
		"repl-diskless-sync yes",
		"repl-diskless-sync-delay 0",
		// Tests make a node slow on purpose with DEBUG SLEEP.
		"enable-debug-command local",
		// A blocking command's timeout is noticed at the server's next
		// cron: up to 100 ms late at Redis's default hz 10, which
		// tests of timeouts (BLPOP k 0.01) would wait on every time.
		"hz " + nodeHz,
	}
	if c.Certs != nil {
		// The bus port is tls-port+10000 then, as freePort keeps free.
		lines[0] = "port 0"
		lines = append(lines, "tls-port "+strconv.Itoa(port),
			"tls-cert-file "+c.Certs.CertFile, "tls-key-file "+c.Certs.KeyFile, "tls-ca-cert-file "+c.Certs.CAFile,
			"tls-cluster yes", "tls-replication yes")
	}
	switch {
	case cfg.User != "":
		lines = append(lines, "user default off", "user "+cfg.User+" on >"+cfg.Password+" ~* &* +@all",
			"masteruser "+cfg.User, "masterauth "+cfg.Password)
	case cfg.Password != "":
		lines = append(lines, "requirepass "+cfg.Password, "masterauth "+cfg.Password)
	}
	return []byte(strings.Join(lines, "\n") + "\n")
}

// freePort finds a loopback port p such that p and its cluster bus port
// p+10000 are both free, both below the kernel's ephemeral range where
// there is room: a node a test killed keeps its port for Restart, which
// the source port of any connection made meanwhile, drawn from that
// range, could take.
func freePort() (int, error) {
	lo, hi := 10000, ephemeralLow()-10000
	for range 100 {
		port := lo + rand.IntN(max(hi-lo, 1))
		if hi-lo < 1000 {
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				return 0, err
			}
			port = ln.Addr().(*net.TCPAddr).Port
			ln.Close()
		}
		if port+10000 > 65535 || !free(port) || !free(port+10000) {
			continue
		}
		handedOut.Lock()
		taken := handedOut.ports[port] || handedOut.ports[port+10000]
		handedOut.ports[port], handedOut.ports[port+10000] = true, true
		handedOut.Unlock()
		if taken {
			continue
		}
		return port, nil
	}
	return 0, errors.New("no free port pair for a node and its cluster bus")
}

// free reports whether a loopback port can be listened on.
func free(port int) bool {
	ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
	if err != nil {
		return false
	}
	ln.Close()
	return true
}

// ephemeralLow is the first port of Linux's ephemeral range, or 0 where
// it cannot be read.
func ephemeralLow() int {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return 0
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return 0
	}
	n, _ := strconv.Atoi(f[0])
	return n
}

func (n *Node) spawn() error {
	cmd := exec.Command("redis-server", filepath.Join(n.dir, "redis.conf"))
	cmd.Dir = n.dir
	cmd.SysProcAttr = DieWithParent()
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("starting redis-server: %w", err)
	}
	n.cmd = cmd
	n.done = make(chan struct{})
	go func(done chan struct{}) {
		cmd.Wait()
		close(done)
	}(n.done)
	return nil
}

func (n *Node) waitUp(ctx context.Context) error {
	return poll(ctx, func() error {
		select {
		case <-n.done:
			log, _ := os.ReadFile(filepath.Join(n.dir, "redis.log"))
			return stop{fmt.Errorf("redis-server on %s exited: %s", n.Addr, lastLines(string(log), 5))}
		default:
		}
		return n.do(ctx, "PING").Error()
	})
}

// begin gives c's blank nodes their epochs and the primaries their slots,
// and introduces the nodes to each other: the rest is their gossip's.
func (c *Cluster) begin(ctx context.Context, np int) error {
	for i, n := range c.Nodes {
		id, err := n.do(ctx, "CLUSTER", "MYID").ToString()
		if err != nil {
			return err
		}
		n.ID = id
		// Distinct epochs up front avoid a round of epoch collisions.
		if err := n.do(ctx, "CLUSTER", "SET-CONFIG-EPOCH", strconv.Itoa(i+1)).Error(); err != nil {
			return err
		}
	}
	for i := 0; i < np; i++ {
		lo, hi := i*Slots/np, (i+1)*Slots/np-1
		if err := c.Nodes[i].do(ctx, "CLUSTER", "ADDSLOTSRANGE", strconv.Itoa(lo), strconv.Itoa(hi)).Error(); err != nil {
			return err
		}
	}
	return c.meet(ctx)
}

func (c *Cluster) meet(ctx context.Context) error {
	host, port, _ := net.SplitHostPort(c.Nodes[0].Addr)
	for _, n := range c.Nodes[1:] {
		if err := n.do(ctx, "CLUSTER", "MEET", host, port).Error(); err != nil {
			return err
		}
	}
	return nil
}

// join waits until c's nodes, begun, know each other, makes the
// replicas, and waits until the cluster is ready.
func (c *Cluster) join(ctx context.Context, np, nr int) error {
	met := time.Now()
	if err := poll(ctx, func() error {
		err := c.allKnown(ctx)
		if err != nil && time.Since(met) > 3*time.Second {
			// A handshake not answered within the node timeout (a loaded
			// machine) is dropped, and Redis does not try it again. A
			// MEET of a node being met is ignored, and of one known, a
			// handshake that ends at its first answer.
			met = time.Now()
			if err := c.meet(ctx); err != nil {
				return err
			}
		}
		return err
	}); err != nil {
		return err
	}
	for j := 0; j < np*nr; j++ {
		replica, primary := c.Nodes[np+j], c.Nodes[j%np]
		if err := poll(ctx, func() error {
			return replica.do(ctx, "CLUSTER", "REPLICATE", primary.ID).Error()
		}); err != nil {
			return err
		}
	}
	if err := poll(ctx, func() error { return c.ready(ctx, np) }); err != nil {
		return err
	}
	if nr == 0 {
		return nil
	}
	return c.streaming(ctx, np, nr)
}

// streaming waits until every primary's replicas have acknowledged a
// write. After a replica's first sync its primary holds the writes for it
// back until its first REPLCONF ACK, which may come with the replica's
// once-a-second cron: a test that wrote to a primary and killed it
// meanwhile lost the write, though the replica's link was up. FUNCTION
// FLUSH, of no functions, is a write that leaves no key behind.
func (c *Cluster) streaming(ctx context.Context, np, nr int) error {
	for _, p := range c.Nodes[:np] {
		if err := p.do(ctx, "FUNCTION", "FLUSH").Error(); err != nil {
			return err
		}
		if err := poll(ctx, func() error {
			acked, err := p.do(ctx, "WAIT", strconv.Itoa(nr), "1000").AsInt64()
			if err == nil && acked < int64(nr) {
				err = fmt.Errorf("%s: %d of %d replicas acknowledge its writes", p.Addr, acked, nr)
			}
			return err
		}); err != nil {
			return err
		}
	}
	return nil
}

// allKnown holds when every node knows every other one as connected.
func (c *Cluster) allKnown(ctx context.Context) error {
	for _, n := range c.Nodes {
		out, err := n.do(ctx, "CLUSTER", "NODES").ToString()
		if err != nil {
			return err
		}
		lines := strings.Split(strings.TrimSpace(out), "\n")
		if len(lines) != len(c.Nodes) || strings.Contains(out, "handshake") || strings.Contains(out, "noaddr") {
			return fmt.Errorf("%s knows %d of %d nodes", n.Addr, len(lines), len(c.Nodes))
		}
	}
	return nil
}

// ready holds when every node reports cluster_state:ok, all agree on the
// nodes, their addresses, roles and slots (a client that reads the slot
// map from one node then finds every primary in it), every node knows
// every replica's primary (a primary that does not yet know its replica
// ignores its CLUSTER FAILOVER), and every replica has finished its
// first sync.
func (c *Cluster) ready(ctx context.Context, np int) error {
	first := ""
	for _, n := range c.Nodes {
		info, err := n.do(ctx, "CLUSTER", "INFO").ToString()
		if err != nil {
			return err
		}
		if !strings.Contains(info, "cluster_state:ok") || !strings.Contains(info, "cluster_known_nodes:"+strconv.Itoa(len(c.Nodes))) {
			return fmt.Errorf("%s: cluster not ok yet", n.Addr)
		}
		nodes, err := n.do(ctx, "CLUSTER", "NODES").ToString()
		if err != nil {
			return err
		}
		// RESP3's verbatim string keeps its format in front.
		nodes = strings.TrimPrefix(nodes, "txt:")
		primaryOf := map[string]string{}
		var view []string
		for line := range strings.SplitSeq(strings.TrimSpace(nodes), "\n") {
			f := strings.Fields(line)
			if len(f) < 8 {
				return fmt.Errorf("%s: CLUSTER NODES line %q", n.Addr, line)
			}
			addr, _, _ := strings.Cut(f[1], "@")
			role := "master"
			if strings.Contains(f[2], "slave") {
				role = "slave"
			}
			primaryOf[f[0]] = f[3]
			view = append(view, strings.Join(append([]string{f[0], addr, role, f[3]}, f[8:]...), " "))
		}
		slices.Sort(view)
		if v := strings.Join(view, "\n"); first == "" {
			first = v
		} else if v != first {
			return fmt.Errorf("%s does not see the cluster as %s does yet", n.Addr, c.Nodes[0].Addr)
		}
		for j, r := range c.Nodes[np:] {
			if primaryOf[r.ID] != c.Nodes[j%np].ID {
				return fmt.Errorf("%s does not know %s as a replica yet", n.Addr, r.Addr)
			}
		}
		if len(c.Nodes) == np {
			continue
		}
		repl, err := n.do(ctx, "INFO", "replication").ToString()
		if err != nil {
			return err
		}
		if strings.Contains(repl, "role:slave") && !strings.Contains(repl, "master_link_status:up") {
			return fmt.Errorf("%s: replica not in sync yet", n.Addr)
		}
	}
	return nil
}

// AddPrimary starts a node shaped as c's others, without slots, and has it
// meet the cluster, as an operator scaling out does (redis-cli --cluster
// add-node). It returns once every node knows it and it reports the
// cluster ok: a primary new to a cluster answers CLUSTERDOWN for its
// first 2 s (Redis's CLUSTER_WRITABLE_DELAY), and slots moved to it
// before then would be refused. MoveSlot then gives it slots. Not to be
// called concurrently with c's other methods: it adds to c.Nodes.
func (c *Cluster) AddPrimary(ctx context.Context) (*Node, error) {
	n, err := c.startNode(filepath.Join(c.root, "added"+strconv.Itoa(len(c.Nodes))), c.cfg)
	if err != nil {
		return nil, fmt.Errorf("clustertest: adding a primary: %w", err)
	}
	if n.ID, err = n.do(ctx, "CLUSTER", "MYID").ToString(); err != nil {
		n.Kill()
		return nil, fmt.Errorf("clustertest: adding a primary: %w", err)
	}
	live := c.live()
	c.Nodes = append(c.Nodes, n)
	met := time.Time{}
	err = poll(ctx, func() error {
		if time.Since(met) > 3*time.Second {
			// As join: a handshake not answered in time is dropped.
			met = time.Now()
			host, port, _ := net.SplitHostPort(live[0].Addr)
			if err := n.do(ctx, "CLUSTER", "MEET", host, port).Error(); err != nil {
				return err
			}
		}
		for _, m := range live {
			// n's own view is its CLUSTER INFO's, below.
			if err := m.knows(ctx, n); err != nil {
				return err
			}
		}
		info, err := n.do(ctx, "CLUSTER", "INFO").ToString()
		if err != nil {
			return err
		}
		if !strings.Contains(info, "cluster_state:ok") || !strings.Contains(info, "cluster_known_nodes:"+strconv.Itoa(len(c.Nodes))+"\r\n") {
			return fmt.Errorf("%s: cluster not ok yet", n.Addr)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("clustertest: adding a primary: %w", err)
	}
	return n, nil
}

// Remove takes n, a primary without slots or a replica, out of the
// cluster and stops it, as an operator scaling in does (redis-cli
// --cluster del-node): every other node forgets it, which keeps them from
// learning it again from each other's gossip for a minute, and it is shut
// down. Not to be called concurrently with c's other methods: it takes n
// from c.Nodes.
func (c *Cluster) Remove(ctx context.Context, n *Node) error {
	for _, m := range c.live() {
		if m == n {
			continue
		}
		if err := m.do(ctx, "CLUSTER", "FORGET", n.ID).Error(); err != nil {
			return fmt.Errorf("clustertest: %s forgetting %s: %w", m.Addr, n.Addr, err)
		}
	}
	n.Kill()
	if n.spare {
		os.RemoveAll(n.dir)
	}
	c.Nodes = slices.DeleteFunc(c.Nodes, func(m *Node) bool { return m == n })
	return nil
}

// knows holds when n knows m as a node it is connected to.
func (n *Node) knows(ctx context.Context, m *Node) error {
	out, err := n.do(ctx, "CLUSTER", "NODES").ToString()
	if err != nil {
		return err
	}
	// RESP3's verbatim string keeps its format in front.
	for line := range strings.SplitSeq(strings.TrimSpace(strings.TrimPrefix(out, "txt:")), "\n") {
		f := strings.Fields(line)
		if len(f) > 7 && f[0] == m.ID && !strings.Contains(f[2], "handshake") && !strings.Contains(f[2], "noaddr") && f[7] == "connected" {
			return nil
		}
	}
	return fmt.Errorf("%s does not know %s yet", n.Addr, m.Addr)
}

// live are c's nodes that run and answer.
func (c *Cluster) live() []*Node {
	var live []*Node
	for _, n := range c.Nodes {
		if !n.exited() && !n.paused.Load() {
			live = append(live, n)
		}
	}
	return live
}

// Primary returns the node that currently serves slot as a primary.
func (c *Cluster) Primary(ctx context.Context, slot int) (*Node, error) {
	for _, n := range c.Nodes {
		if n.exited() || n.paused.Load() {
			continue // it would not answer
		}
		addr, err := n.slotOwner(ctx, slot)
		if err != nil {
			if strings.HasPrefix(err.Error(), "clustertest:") {
				return nil, err
			}
			continue
		}
		for _, m := range c.Nodes {
			if m.Addr == addr {
				return m, nil
			}
		}
		return nil, fmt.Errorf("clustertest: slot %d is on %s, not a node of this cluster", slot, addr)
	}
	return nil, errors.New("clustertest: no node answers")
}

// StartMove begins moving slot to the primary to, as a resharding does,
// and stops there: to is IMPORTING the slot and its owner, returned,
// MIGRATING it. Keys moved with Migrate are then answered ASK by the
// owner; MoveSlot ends the move. It does nothing when to owns the slot.
func (c *Cluster) StartMove(ctx context.Context, slot int, to *Node) (from *Node, err error) {
	from, err = c.Primary(ctx, slot)
	if err != nil || from == to {
		return from, err
	}
	sl := strconv.Itoa(slot)
	if err := to.do(ctx, "CLUSTER", "SETSLOT", sl, "IMPORTING", from.ID).Error(); err != nil {
		return nil, fmt.Errorf("clustertest: importing slot %d: %w", slot, err)
	}
	if err := from.do(ctx, "CLUSTER", "SETSLOT", sl, "MIGRATING", to.ID).Error(); err != nil {
		return nil, fmt.Errorf("clustertest: migrating slot %d: %w", slot, err)
	}
	return from, nil
}

// Migrate moves keys (of one slot) from one primary to another, with the
// cluster's credentials.
func (c *Cluster) Migrate(ctx context.Context, from, to *Node, keys ...string) error {
	host, port, _ := net.SplitHostPort(to.Addr)
	args := []string{"MIGRATE", host, port, "", "0", "5000"}
	switch {
	case c.User != "":
		args = append(args, "AUTH2", c.User, c.Password)
	case c.Password != "":
		args = append(args, "AUTH", c.Password)
	}
	args = append(append(args, "KEYS"), keys...)
	if err := from.do(ctx, args...).Error(); err != nil {
		return fmt.Errorf("clustertest: migrating %d keys to %s: %w", len(keys), to.Addr, err)
	}
	return nil
}

// MoveSlot migrates slot, with its keys, to the primary to, as a
// resharding does (SETSLOT IMPORTING/MIGRATING, MIGRATE, SETSLOT NODE),
// and waits until every live primary agrees on the new owner.
func (c *Cluster) MoveSlot(ctx context.Context, slot int, to *Node) error {
	from, err := c.StartMove(ctx, slot, to)
	if err != nil || from == to {
		return err
	}
	sl := strconv.Itoa(slot)
	for range 10_000 { // 100 keys a round: bounded, far above any test's slot
		keys, err := from.do(ctx, "CLUSTER", "GETKEYSINSLOT", sl, "100").AsStrSlice()
		if err != nil {
			return err
		}
		if len(keys) == 0 {
			break
		}
		if err := c.Migrate(ctx, from, to, keys...); err != nil {
			return err
		}
	}
	// The new owner first, then the old one, as Redis's docs ask.
	for _, n := range []*Node{to, from} {
		if err := n.do(ctx, "CLUSTER", "SETSLOT", sl, "NODE", to.ID).Error(); err != nil {
			return fmt.Errorf("clustertest: assigning slot %d: %w", slot, err)
		}
	}
	return poll(ctx, func() error {
		for _, n := range c.Nodes {
			if n.paused.Load() || n.exited() {
				continue
			}
			owner, err := n.slotOwner(ctx, slot)
			if err != nil {
				return err
			}
			if owner != to.Addr {
				return fmt.Errorf("%s sees slot %d on %s", n.Addr, slot, owner)
			}
		}
		return nil
	})
}

func (n *Node) exited() bool {
	select {
	case <-n.done:
		return true
	default:
		return false
	}
}

// slotOwner is the address of slot's primary in n's view.
func (n *Node) slotOwner(ctx context.Context, slot int) (string, error) {
	shards, err := n.do(ctx, "CLUSTER", "SLOTS").ToArray()
	if err != nil {
		return "", err
	}
	for _, s := range shards {
		r, err := s.ToArray()
		if err != nil || len(r) < 3 {
			continue
		}
		lo, _ := r[0].AsInt64()
		hi, _ := r[1].AsInt64()
		if int64(slot) < lo || int64(slot) > hi {
			continue
		}
		p, err := r[2].ToArray()
		if err != nil || len(p) < 2 {
			continue
		}
		host, _ := p[0].ToString()
		port, _ := p[1].AsInt64()
		return net.JoinHostPort(host, strconv.FormatInt(port, 10)), nil
	}
	return "", fmt.Errorf("clustertest: no primary for slot %d in %s's view", slot, n.Addr)
}

// stop ends a poll at once.
type stop struct{ error }

// poll calls f until it succeeds, fails with stop, or ctx ends.
func poll(ctx context.Context, f func() error) error {
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		err := f()
		if err == nil {
			return nil
		}
		var s stop
		if errors.As(err, &s) {
			return s.error
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w (last: %v)", ctx.Err(), err)
		case <-tick.C:
		}
	}
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, " | ")
}
