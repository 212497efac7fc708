package router

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"math"
	"net"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/rueidis"
	"go.uber.org/zap"

	"github.com/sluice-rl/sluice/lua"
	"github.com/sluice-rl/sluice/router/bucket"
	"github.com/sluice-rl/sluice/router/slot"
)

// Policy says how a decision is made when the key's shard cannot make it.
type Policy uint8

const (
	// FallbackLocal decides with an in-process bucket holding this
	// instance's share of the limit.
	FallbackLocal Policy = iota
	// FallbackOpen allows: availability first.
	FallbackOpen
	// FallbackClosed denies.
	FallbackClosed
)

// ParsePolicy reads "local", "open" or "closed".
func ParsePolicy(s string) (Policy, error) {
	switch s {
	case "local":
		return FallbackLocal, nil
	case "open":
		return FallbackOpen, nil
	case "closed":
		return FallbackClosed, nil
	}
	return 0, fmt.Errorf("router: fallback policy %q: want local, open or closed", s)
}

// ClusterConfig configures a Cluster. Zero values mean the defaults.
type ClusterConfig struct {
	// Seeds are cluster nodes to start from, host:port. Required.
	Seeds []string
	// Timeout bounds each batch of Lua calls; 0 means 25ms. A shard that
	// does not answer in time is marked unhealthy.
	Timeout time.Duration
	// Fallback decides what a shard cannot (FallbackLocal by default).
	Fallback Policy
	// Share is the fraction of each limit the local fallback grants; 0
	// means auto: 1/N for N live sluice instances, counted through a
	// heartbeat in the cluster and kept from before an outage during it.
	Share float64
	// MaxLocalKeys caps the local fallback buckets; 0 means 100,000.
	MaxLocalKeys int
	// ProbeInterval is the first wait before probing an unhealthy shard;
	// it doubles up to 8x. 0 means 100ms. The closed policy answers it as
	// retry_after.
	ProbeInterval time.Duration
	// FlushDelay is rueidis's MaxFlushDelay: after each write to a shard,
	// wait up to this long so more clients' commands share the next write.
	FlushDelay time.Duration
	// Logger receives one line per change of shard state; nil means none.
	Logger *zap.Logger
}

// Names in the cluster that are sluice's own.
const (
	instancesKey = KeyPrefix + "instances"
	probePrefix  = KeyPrefix + "probe:"
)

// heartbeatEvery is how often an instance announces itself; an
// announcement lasts three beats, so one lost beat drops no one.
const heartbeatEvery = time.Second

// topologyEvery is how often the slot map is read again while nothing
// suggests it changed.
const topologyEvery = time.Second

// Cluster keeps buckets in a Redis Cluster, each decided by the Lua step on
// the shard that owns its slot. Decisions a shard cannot make in time go to
// the fallback policy; the shard is probed in the background and used
// again once it answers. It starts without a reachable cluster and connects
// when one answers.
type Cluster struct {
	cfg       ClusterConfig
	log       *zap.Logger
	throttle  *lua.Throttle
	heartbeat *lua.Heartbeat
	tags      *slot.Tags
	local     *Memory
	id        string // this instance, in the heartbeat

	client atomic.Pointer[rueidis.Client] // nil until the cluster first answers
	topo   atomic.Pointer[topology]
	stale  atomic.Bool   // an error suggests the slot map moved
	share  atomic.Uint64 // float64 bits of the local share in use
	live   atomic.Int64  // sluice instances counted by the last heartbeat

	mu     sync.Mutex        // guards shards
	shards map[string]*shard // by primary address, kept across topologies

	counts [numSources]atomic.Int64

	stop context.CancelFunc
	done chan struct{}
}

// topology is one reading of the slot map.
type topology struct {
	owner [slot.Count]*shard
}

// shard is one primary's slot ranges and health.
type shard struct {
	addr  string
	probe string // a key in one of its slots
	// node talks to this primary directly, so that sluice's slot map, not
	// rueidis's (refreshed lazily, up to a second late), decides where a
	// call goes: a promoted replica is used as soon as it owns the slots.
	// nil when rueidis does not know the node yet. Replaced at each slot
	// map reading, as rueidis may replace its connection to the node.
	node atomic.Pointer[rueidis.Client]

	healthy atomic.Bool

	mu        sync.Mutex // guards the fields below
	since     time.Time  // of the current state
	errors    int64      // faults seen since start
	lastErr   string
	nextProbe time.Time
	backoff   time.Duration
}

// NewCluster returns a Cluster and starts connecting to cfg.Seeds in the
// background. Close stops it.
func NewCluster(cfg ClusterConfig) *Cluster {
	if cfg.Timeout <= 0 {
		cfg.Timeout = 25 * time.Millisecond
	}
	if cfg.MaxLocalKeys <= 0 {
		cfg.MaxLocalKeys = 100_000
	}
	if cfg.ProbeInterval <= 0 {
		cfg.ProbeInterval = 100 * time.Millisecond
	}
	c := &Cluster{
		cfg:       cfg,
		log:       cfg.Logger,
		throttle:  lua.NewThrottle(),
		heartbeat: lua.NewHeartbeat(),
		tags:      slot.NewTags(),
		local:     NewMemory(cfg.MaxLocalKeys),
		id:        newID(),
		shards:    map[string]*shard{},
		done:      make(chan struct{}),
	}
	if c.log == nil {
		c.log = zap.NewNop()
	}
	share := cfg.Share
	if share <= 0 || share > 1 {
		share = 1
	}
	c.share.Store(math.Float64bits(share))
	c.live.Store(1)
	ctx, stop := context.WithCancel(context.Background())
	c.stop = stop
	go c.run(ctx)
	return c
}

func newID() string {
	var b [8]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// Close stops the background work and the connections.
func (c *Cluster) Close() {
	c.stop()
	<-c.done
	if cl := c.client.Load(); cl != nil {
		(*cl).Close()
	}
}

// Connected reports whether the cluster has answered at least once.
func (c *Cluster) Connected() bool { return c.client.Load() != nil }

// WaitConnected waits until the cluster has answered and its slot map is
// read, or ctx ends.
func (c *Cluster) WaitConnected(ctx context.Context) error {
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for c.topo.Load() == nil {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
		}
	}
	return nil
}

// Decide decides reqs: those whose shard is healthy in one pipelined batch
// bounded by the timeout, the others by the fallback policy. Requests are
// grouped in runs of one Op so that a Reset and a Take on one key in one
// pipeline keep their order.
func (c *Cluster) Decide(ctx context.Context, reqs []Request, res []Result) {
	for start := 0; start < len(reqs); {
		end := start + 1
		for end < len(reqs) && reqs[end].Op == reqs[start].Op {
			end++
		}
		c.decideRun(ctx, reqs[start:end], res[start:end])
		start = end
	}
	for i := range res {
		c.counts[res[i].Source].Add(1)
	}
}

func (c *Cluster) decideRun(ctx context.Context, reqs []Request, res []Result) {
	cl := c.client.Load()
	if cl == nil {
		c.fallback(reqs, res)
		return
	}
	client := *cl
	topo := c.topo.Load()
	owners := make([]*shard, len(reqs))
	keys := make([]string, len(reqs)) // as stored in Redis
	var send []int                    // indexes of the requests that go to the cluster
	for i := range reqs {
		keys[i] = KeyPrefix + reqs[i].Key
		if topo != nil {
			owners[i] = topo.owner[slot.Of(keys[i])]
		}
		if owners[i] != nil && !owners[i].healthy.Load() {
			continue
		}
		send = append(send, i)
	}
	if len(send) < len(reqs) {
		c.fallbackExcept(reqs, res, send)
	}
	if len(send) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, c.cfg.Timeout)
	defer cancel()
	out := make([]Result, len(reqs))
	c.send(ctx, client, reqs, keys, owners, send, out)
	for _, i := range send {
		err := out[i].Err
		switch {
		case err == nil || !isFault(err):
			res[i] = out[i]
			continue
		case isRedirect(err):
			// The slot moved before sluice's map did: not the shard's fault.
			c.stale.Store(true)
		default:
			c.fault(owners[i], err)
		}
		c.fallback(reqs[i:i+1], res[i:i+1])
	}
}

// send runs the requests at indexes send, one pipeline per shard, the
// shards concurrently; out[i] receives request i's result.
func (c *Cluster) send(ctx context.Context, client rueidis.Client, reqs []Request, keys []string, owners []*shard, send []int, out []Result) {
	groups := map[*shard][]int{}
	for _, i := range send {
		groups[owners[i]] = append(groups[owners[i]], i)
	}
	run := func(s *shard, idx []int) {
		to := client // through rueidis's slot map when sluice has none
		if s != nil {
			if n := s.node.Load(); n != nil {
				to = *n
			}
		}
		if reqs[0].Op == Reset {
			c.reset(ctx, to, keys, idx, out)
		} else {
			c.take(ctx, to, reqs, keys, idx, out)
		}
	}
	var wg sync.WaitGroup
	for s, idx := range groups {
		if len(groups) == 1 {
			run(s, idx) // the common case: no goroutine
			break
		}
		wg.Go(func() { run(s, idx) })
	}
	wg.Wait()
}

func (c *Cluster) take(ctx context.Context, to rueidis.Client, reqs []Request, keys []string, idx []int, out []Result) {
	calls := make([]lua.Call, len(idx))
	for j, i := range idx {
		calls[j] = lua.Call{Key: keys[i], Interval: reqs[i].Interval, Cost: reqs[i].Cost}
	}
	br := make([]bucket.Result, len(idx))
	errs := make([]error, len(idx))
	c.throttle.Do(ctx, to, calls, br, errs)
	for j, i := range idx {
		out[i] = Result{Result: br[j], Err: errs[j]}
	}
}

func (c *Cluster) reset(ctx context.Context, to rueidis.Client, keys []string, idx []int, out []Result) {
	cmds := make(rueidis.Commands, len(idx))
	for j, i := range idx {
		cmds[j] = to.B().Del().Key(keys[i]).Build()
	}
	for j, r := range to.DoMulti(ctx, cmds...) {
		n, err := r.AsInt64()
		out[idx[j]] = Result{Existed: n > 0, Err: err}
	}
}

// isFault tells a shard's failure (it cannot decide now) from an error in
// the request itself, such as WRONGTYPE, which the caller must see.
func isFault(err error) bool {
	re, ok := rueidis.IsRedisErr(err)
	if !ok {
		// Timeouts, EOF, refused and reset connections, a closing client.
		return true
	}
	return re.IsClusterDown() || re.IsTryAgain() || re.IsLoading() || isRedirect(err) ||
		strings.HasPrefix(re.Error(), "MASTERDOWN") || strings.HasPrefix(re.Error(), "READONLY")
}

// isRedirect reports a MOVED or ASK: a shard's own node client does not
// follow them, and they mean sluice's slot map is behind.
func isRedirect(err error) bool {
	re, ok := rueidis.IsRedisErr(err)
	if !ok {
		return false
	}
	_, moved := re.IsMoved()
	_, ask := re.IsAsk()
	return moved || ask
}

// fault marks s unhealthy (once per outage) and asks for a fresh slot map,
// since a failover may be what happened.
func (c *Cluster) fault(s *shard, err error) {
	c.stale.Store(true)
	if s == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.errors++
	s.lastErr = err.Error()
	if !s.healthy.Swap(false) {
		return
	}
	s.since = time.Now()
	s.backoff = c.cfg.ProbeInterval
	s.nextProbe = s.since.Add(s.backoff)
	c.log.Warn("shard unhealthy: deciding its keys by fallback", zap.String("shard", s.addr),
		zap.String("fallback", c.policyName()), zap.Error(err))
}

func (c *Cluster) fallbackExcept(reqs []Request, res []Result, sent []int) {
	j := 0
	for i := range reqs {
		if j < len(sent) && sent[j] == i {
			j++
			continue
		}
		c.fallback(reqs[i:i+1], res[i:i+1])
	}
}

// fallback decides reqs without the cluster.
func (c *Cluster) fallback(reqs []Request, res []Result) {
	now := time.Now().UnixMicro()
	for i := range reqs {
		r := &reqs[i]
		if r.Op == Reset {
			res[i] = c.local.decide(r, now)
			res[i].Source = SourceLocal
			continue
		}
		switch c.cfg.Fallback {
		case FallbackOpen:
			br, _ := bucket.Take(0, now, r.Interval, r.Cost)
			res[i] = Result{Result: br, Source: SourceOpen}
		case FallbackClosed:
			iv := r.Interval
			res[i] = Result{Source: SourceClosed, Result: bucket.Result{
				Limited:    true,
				RetryAfter: c.cfg.ProbeInterval.Microseconds(),
				ResetAfter: (iv.Capacity*iv.U + iv.V - 1) / iv.V,
			}}
		default:
			scaled := *r
			scaled.Interval = c.scale(r.Interval)
			res[i] = c.local.decide(&scaled, now)
			res[i].Source = SourceLocal
		}
	}
}

// scale grants this instance its share of a limit: share x the capacity
// (at least one token) and share x the rate, by stretching the interval.
func (c *Cluster) scale(iv bucket.Interval) bucket.Interval {
	share := math.Float64frombits(c.share.Load())
	if share >= 1 {
		return iv
	}
	s := iv
	s.Capacity = max(int64(math.Round(float64(iv.Capacity)*share)), 1)
	u := math.Round(float64(iv.U) / share)
	if u*float64(s.Capacity) > bucket.MaxCapacityTime {
		return iv // cannot be stretched exactly; grant the whole limit
	}
	s.U = int64(u)
	return s
}

func (c *Cluster) policyName() string {
	return [...]string{"local", "open", "closed"}[c.cfg.Fallback]
}

// run is the one background goroutine: it connects, keeps the slot map,
// probes unhealthy shards and beats the heartbeat.
func (c *Cluster) run(ctx context.Context) {
	defer close(c.done)
	tick := time.NewTicker(c.cfg.ProbeInterval / 2)
	defer tick.Stop()
	var nextConnect, nextTopo, nextBeat time.Time
	connectBackoff := c.cfg.ProbeInterval
	for {
		now := time.Now()
		if c.client.Load() == nil {
			if !now.Before(nextConnect) {
				if err := c.connect(ctx); err != nil {
					c.log.Debug("cluster not reachable yet", zap.Strings("seeds", c.cfg.Seeds), zap.Error(err))
					connectBackoff = min(2*connectBackoff, 8*c.cfg.ProbeInterval)
					nextConnect = now.Add(connectBackoff)
				}
			}
		} else {
			// During an outage the slot map is read on every tick, so that
			// a promoted replica is used as soon as it owns the slots.
			if c.stale.Swap(false) || c.unhealthy() || !now.Before(nextTopo) {
				c.refreshTopology(ctx)
				nextTopo = now.Add(topologyEvery)
			}
			c.probe(ctx, now)
			if c.cfg.Share <= 0 && !now.Before(nextBeat) {
				c.beat(ctx)
				nextBeat = now.Add(heartbeatEvery)
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

func (c *Cluster) connect(ctx context.Context) error {
	client, err := rueidis.NewClient(rueidis.ClientOption{
		// A copy per attempt: ShuffleInit shuffles it in place, and a
		// failed attempt's goroutines may still be reading their own.
		InitAddress: slices.Clone(c.cfg.Seeds),
		ShuffleInit: true,
		// sluice reads nothing it could cache; RESP3 tracking would only
		// cost the shards work.
		DisableCache:  true,
		MaxFlushDelay: c.cfg.FlushDelay,
		Dialer:        net.Dialer{Timeout: time.Second},
		// A dead connection is noticed well before a client would give up.
		ConnWriteTimeout: 2 * time.Second,
	})
	if err != nil {
		return err
	}
	if ctx.Err() != nil {
		client.Close()
		return ctx.Err()
	}
	c.client.Store(&client)
	c.refreshTopology(ctx)
	c.log.Info("connected to the cluster", zap.Strings("seeds", c.cfg.Seeds))
	return nil
}

// refreshTopology reads CLUSTER SLOTS and points every slot at its
// primary's shard. A shard new to this instance starts healthy.
func (c *Cluster) refreshTopology(ctx context.Context) {
	client := *c.client.Load()
	ctx, cancel := context.WithTimeout(ctx, 4*c.cfg.Timeout+100*time.Millisecond)
	defer cancel()
	ranges, err := client.Do(ctx, client.B().ClusterSlots().Build()).ToArray()
	if err != nil {
		c.stale.Store(true)
		return
	}
	t := &topology{}
	owning := map[*shard]bool{}
	nodes := client.Nodes()
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, rg := range ranges {
		v, err := rg.ToArray()
		if err != nil || len(v) < 3 {
			continue
		}
		lo, err1 := v[0].AsInt64()
		hi, err2 := v[1].AsInt64()
		node, err3 := v[2].ToArray()
		if err1 != nil || err2 != nil || err3 != nil || len(node) < 2 || lo < 0 || hi >= slot.Count || lo > hi {
			continue
		}
		host, _ := node[0].ToString()
		port, _ := node[1].AsInt64()
		addr := net.JoinHostPort(host, strconv.FormatInt(port, 10))
		s := c.shards[addr]
		if s == nil {
			s = &shard{addr: addr, since: time.Now()}
			s.healthy.Store(true)
			c.shards[addr] = s
		}
		s.probe = probePrefix + "{" + c.tags[lo] + "}"
		if n, ok := nodes[addr]; ok {
			s.node.Store(&n)
		} else {
			s.node.Store(nil)
		}
		owning[s] = true
		for sl := lo; sl <= hi; sl++ {
			t.owner[sl] = s
		}
	}
	// A primary that lost its slots (failed over, or moved away) is
	// forgotten; if it comes back as a primary it starts healthy.
	for addr, s := range c.shards {
		if !owning[s] {
			delete(c.shards, addr)
		}
	}
	c.topo.Store(t)
}

// unhealthy reports whether any shard is unhealthy.
func (c *Cluster) unhealthy() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, s := range c.shards {
		if !s.healthy.Load() {
			return true
		}
	}
	return false
}

// probe sends one cheap keyed command to each unhealthy shard whose probe
// is due, through the slot map, so that a promoted replica is what answers
// once it owns the slots.
func (c *Cluster) probe(ctx context.Context, now time.Time) {
	c.mu.Lock()
	var due []*shard
	for _, s := range c.shards {
		s.mu.Lock()
		if !s.healthy.Load() && !now.Before(s.nextProbe) && s.probe != "" {
			due = append(due, s)
		}
		s.mu.Unlock()
	}
	c.mu.Unlock()
	if len(due) == 0 {
		return
	}
	client := *c.client.Load()
	ctx, cancel := context.WithTimeout(ctx, c.cfg.Timeout)
	defer cancel()
	errs := make([]error, len(due))
	var wg sync.WaitGroup
	for i, s := range due {
		to := client
		if n := s.node.Load(); n != nil {
			to = *n
		}
		wg.Go(func() { errs[i] = to.Do(ctx, to.B().Exists().Key(s.probe).Build()).Error() })
	}
	wg.Wait()
	for i, s := range due {
		s.mu.Lock()
		if err := errs[i]; err != nil {
			s.lastErr = err.Error()
			s.backoff = min(2*s.backoff, 8*c.cfg.ProbeInterval)
			s.nextProbe = time.Now().Add(s.backoff)
			if isFault(err) {
				c.stale.Store(true)
			}
		} else {
			down := time.Since(s.since)
			s.since = time.Now()
			s.healthy.Store(true)
			c.log.Info("shard healthy again: deciding its keys in the cluster", zap.String("shard", s.addr), zap.Duration("after", down))
		}
		s.mu.Unlock()
	}
}

// beat announces this instance and, while the cluster answers, keeps the
// local share at 1/live instances.
func (c *Cluster) beat(ctx context.Context) {
	client := *c.client.Load()
	ctx, cancel := context.WithTimeout(ctx, 4*c.cfg.Timeout+100*time.Millisecond)
	defer cancel()
	n, err := c.heartbeat.Beat(ctx, client, instancesKey, c.id, 3*heartbeatEvery)
	if err != nil || n < 1 {
		return // keep the last known count through an outage
	}
	if old := c.live.Swap(n); old != n {
		c.log.Info("sluice instances sharing the cluster", zap.Int64("instances", n))
	}
	c.share.Store(math.Float64bits(1 / float64(n)))
}

// Info is the backend's INFO section: decisions by source, the fallback in
// force and every shard's state.
func (c *Cluster) Info() string {
	var b strings.Builder
	fmt.Fprintf(&b, "cluster_connected:%d\r\n", boolInt(c.Connected()))
	fmt.Fprintf(&b, "fallback_policy:%s\r\n", c.policyName())
	fmt.Fprintf(&b, "fallback_share:%.4f\r\n", math.Float64frombits(c.share.Load()))
	fmt.Fprintf(&b, "sluice_instances:%d\r\n", c.live.Load())
	fmt.Fprintf(&b, "local_buckets:%d\r\n", c.local.Len())
	for s := SourceCluster; s < numSources; s++ {
		if s != SourceEmbedded {
			fmt.Fprintf(&b, "decisions_%s:%d\r\n", s, c.counts[s].Load())
		}
	}
	c.mu.Lock()
	addrs := make([]string, 0, len(c.shards))
	for a := range c.shards {
		addrs = append(addrs, a)
	}
	sort.Strings(addrs)
	shards := make([]*shard, len(addrs))
	for i, a := range addrs {
		shards[i] = c.shards[a]
	}
	c.mu.Unlock()
	for i, s := range shards {
		s.mu.Lock()
		state := "healthy"
		if !s.healthy.Load() {
			state = "unhealthy"
		}
		fmt.Fprintf(&b, "shard%d:addr=%s,state=%s,since=%s,errors=%d,last_error=%s\r\n", i, s.addr, state,
			s.since.UTC().Format(time.RFC3339), s.errors, strings.NewReplacer(",", ";", "\r", " ", "\n", " ").Replace(s.lastErr))
		s.mu.Unlock()
	}
	return b.String()
}

// Instances is the number of live sluice instances the last heartbeat
// counted (1 until one has).
func (c *Cluster) Instances() int64 { return c.live.Load() }

// LocalBuckets is the number of local fallback buckets held.
func (c *Cluster) LocalBuckets() int { return c.local.Len() }

// Decisions is how many decisions source has made since start.
func (c *Cluster) Decisions(source Source) int64 { return c.counts[source].Load() }

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}
