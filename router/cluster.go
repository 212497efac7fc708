package router

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
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
	// HotThreshold is the rate of decisions on one key, per second on this
	// instance, over which the key is hot and split across shards; 0 means
	// 2000, a negative value turns detection off.
	HotThreshold float64
	// HotKeys are patterns (Redis glob: * and ?) of keys that are hot
	// whenever they are asked.
	HotKeys []string
	// HotSplit is the number of sub-buckets of a hot key; 0 means one per
	// primary. At most MaxSplit.
	HotSplit int
	// HotCooldown is how long a hot key must stay under the threshold (a
	// declared one: unasked) before it is one bucket again; 0 means 10s.
	HotCooldown time.Duration
	// Logger receives one line per change of shard state and per key that
	// becomes hot or cools down; nil means none.
	Logger *zap.Logger
}

// Names in the cluster that are sluice's own, outside KeyPrefix, so that
// no caller's key can take them (THROTTLE instances would otherwise meet
// the heartbeat's sorted set).
const (
	instancesKey = "sluice.instances"
	probePrefix  = "sluice.probe:"
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
	splitter  *lua.Splitter
	tags      *slot.Tags
	byLength  []int // slots, the shortest tags first
	local     *Memory
	hot       *hotSet
	id        string // this instance, in the heartbeat

	client atomic.Pointer[rueidis.Client] // nil until the cluster first answers
	topo   atomic.Pointer[topology]
	stale  atomic.Bool   // an error suggests the slot map moved
	share  atomic.Uint64 // float64 bits of the local share in use
	live   atomic.Int64  // sluice instances counted by the last heartbeat

	mu     sync.Mutex        // guards shards
	shards map[string]*shard // by primary address, kept across topologies

	counts [numSources]atomic.Int64
	split  atomic.Int64 // cluster decisions made by a sub-bucket
	// deniedHere counts split decisions denied from a hot key's last
	// denial, without a step.
	deniedHere atomic.Int64

	ctx  context.Context // ends at Close: background work, hot keys' batched steps
	stop context.CancelFunc
	done chan struct{}
}

// topology is one reading of the slot map.
type topology struct {
	owners [slot.Count]*shard
	tags   []string // a hot key's sub-buckets' hash tags, on distinct primaries
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
	out     shardQueue

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
	if cfg.HotThreshold == 0 {
		cfg.HotThreshold = 2000
	}
	cfg.HotSplit = min(cfg.HotSplit, MaxSplit)
	if cfg.HotCooldown <= 0 {
		cfg.HotCooldown = 10 * time.Second
	}
	tags := slot.NewTags()
	c := &Cluster{
		cfg:       cfg,
		log:       cfg.Logger,
		throttle:  lua.NewThrottle(),
		heartbeat: lua.NewHeartbeat(),
		splitter:  lua.NewSplitter(),
		tags:      tags,
		byLength:  slotsByTagLength(tags),
		local:     NewMemory(cfg.MaxLocalKeys),
		hot:       newHotSet(cfg),
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
	c.ctx, c.stop = ctx, stop
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

// Submit decides reqs as Decide does, without waiting for the shards: each
// shard's calls go out on a goroutine of their own and are reported through
// done when that shard answers, so that a slow shard delays only its own
// keys; a hot key's calls are reported together. What no shard decides
// (fallback) is reported before Submit returns. Rounds with a Reset, rare,
// are decided whole, in order.
func (c *Cluster) Submit(ctx context.Context, reqs []Request, res []Result, done func(idx []int)) {
	cl := c.client.Load()
	if cl == nil {
		c.Decide(ctx, reqs, res)
		done(nil)
		return
	}
	if slices.ContainsFunc(reqs, func(r Request) bool { return r.Op == Reset }) {
		go func() {
			c.Decide(ctx, reqs, res)
			done(nil)
		}()
		return
	}
	topo := c.topo.Load()
	now := time.Now().UnixNano()
	var groups []*shardCalls
	var hot []*hotCall
	var hotIdx, here []int
	for i := range reqs {
		r := &reqs[i]
		if hk := c.hot.observe(r.Key, now); hk != nil {
			n := len(hot)
			if hot = c.startHot(hot, i, r, hk, hk.live(now), topo, reqs, res); len(hot) > n {
				hotIdx = append(hotIdx, i)
			} else {
				here = append(here, i)
			}
			continue
		}
		pc := call{req: i, step: lua.Call{Key: KeyPrefix + r.Key, Interval: r.Interval, Cost: r.Cost}}
		pc.owner = topo.ownerOf(pc.step.Key)
		if pc.owner != nil && !pc.owner.healthy.Load() {
			c.fallback(reqs[i:i+1], res[i:i+1])
			here = append(here, i)
			continue
		}
		k := slices.IndexFunc(groups, func(g *shardCalls) bool { return g.owner == pc.owner })
		if k < 0 {
			k = len(groups)
			groups = append(groups, &shardCalls{owner: pc.owner})
		}
		groups[k].calls = append(groups[k].calls, pc)
		groups[k].idx = append(groups[k].idx, i)
	}
	if len(here) > 0 {
		c.count(res, here)
		done(here)
	}
	for _, g := range groups {
		g.reqs, g.res, g.topo, g.ctx, g.done = reqs, res, topo, ctx, done
		g.left.Store(int64(len(g.calls)))
		if g.owner == nil {
			go c.flushCalls(nil, g.calls, []*shardCalls{g}, nil) // no slot map yet
			continue
		}
		c.enqueue(g)
	}
	if len(hot) > 0 {
		go func() {
			c.finishHot(hot, reqs, res, topo)
			c.count(res, hotIdx)
			done(hotIdx)
		}()
	}
}

// count counts the decisions of idx by source.
func (c *Cluster) count(res []Result, idx []int) {
	for _, i := range idx {
		c.counts[res[i].Source].Add(1)
	}
}

func (c *Cluster) decideRun(ctx context.Context, reqs []Request, res []Result) {
	cl := c.client.Load()
	if cl == nil {
		c.fallback(reqs, res)
		return
	}
	if reqs[0].Op == Reset {
		ctx, cancel := context.WithTimeout(ctx, c.cfg.Timeout)
		defer cancel()
		c.reset(ctx, *cl, c.topo.Load(), reqs, res)
		return
	}
	c.takes(ctx, *cl, c.topo.Load(), reqs, res)
}

// call is a Lua step on a key's own bucket.
type call struct {
	req   int
	owner *shard // nil when sluice has no slot map yet
	step  lua.Call
}

// takes decides a run of Takes: each in its bucket's shard, the shards'
// calls pipelined and concurrent, or, for a hot key, in its sub-buckets;
// what a shard cannot decide goes to fallback.
func (c *Cluster) takes(ctx context.Context, client rueidis.Client, topo *topology, reqs []Request, res []Result) {
	now := time.Now().UnixNano()
	calls := make([]call, 0, len(reqs))
	var hot []*hotCall
	for i := range reqs {
		r := &reqs[i]
		if hk := c.hot.observe(r.Key, now); hk != nil {
			hot = c.startHot(hot, i, r, hk, hk.live(now), topo, reqs, res)
			continue
		}
		pc := call{req: i, step: lua.Call{Key: KeyPrefix + r.Key, Interval: r.Interval, Cost: r.Cost}}
		pc.owner = topo.ownerOf(pc.step.Key)
		if pc.owner != nil && !pc.owner.healthy.Load() {
			c.fallback(reqs[i:i+1], res[i:i+1])
			continue
		}
		calls = append(calls, pc)
	}
	if len(calls) > 0 {
		sent := time.Now().UnixNano()
		rctx, cancel := context.WithTimeout(ctx, c.cfg.Timeout)
		out, errs := c.exec(rctx, client, calls)
		cancel()
		for j := range calls {
			hot = c.settle(hot, &calls[j], out[j], errs[j], reqs, res, topo, sent)
		}
	}
	if len(hot) > 0 {
		c.finishHot(hot, reqs, res, topo)
	}
}

// settle stores the outcome of a step on a key's own bucket in res. A key
// that another instance split is followed: its call joins hot.
func (c *Cluster) settle(hot []*hotCall, cl *call, br bucket.Result, err error, reqs []Request, res []Result, topo *topology, sent int64) []*hotCall {
	i, r := cl.req, &reqs[cl.req]
	var se *lua.SplitError
	switch {
	case errors.As(err, &se):
		hk := c.hot.follow(r.Key, se.Split, sent)
		if st := hk.live(sent); st != nil {
			return c.startHot(hot, i, r, hk, st, topo, reqs, res)
		}
	case err == nil || !isFault(err):
		res[i] = Result{Result: br, Err: err}
		return hot
	case isRedirect(err):
		// The slot moved before sluice's map did: not the shard's fault.
		c.stale.Store(true)
	default:
		c.fault(cl.owner, err)
	}
	c.fallback(reqs[i:i+1], res[i:i+1])
	return hot
}

// exec runs calls, one pipeline per shard, the shards concurrently.
func (c *Cluster) exec(ctx context.Context, client rueidis.Client, calls []call) ([]bucket.Result, []error) {
	out, errs := make([]bucket.Result, len(calls)), make([]error, len(calls))
	perShard(calls, func(cl *call) *shard { return cl.owner }, func(s *shard, idx []int) {
		steps := make([]lua.Call, len(idx))
		for k, j := range idx {
			steps[k] = calls[j].step
		}
		br, es := make([]bucket.Result, len(idx)), make([]error, len(idx))
		c.throttle.Do(ctx, c.nodeOr(s, client), steps, br, es)
		for k, j := range idx {
			out[j], errs[j] = br[k], es[k]
		}
	})
	return out, errs
}

// perShard groups the indexes of items by their shard and runs each
// shard's, the shards concurrently; a single shard, the common case, runs
// on the caller's goroutine.
func perShard[T any](items []T, owner func(*T) *shard, run func(s *shard, idx []int)) {
	groups := map[*shard][]int{}
	for i := range items {
		o := owner(&items[i])
		groups[o] = append(groups[o], i)
	}
	var wg sync.WaitGroup
	for s, idx := range groups {
		if len(groups) == 1 {
			run(s, idx)
			break
		}
		wg.Go(func() { run(s, idx) })
	}
	wg.Wait()
}

// nodeOr is s's own node client, or client (which routes by rueidis's
// slot map) when sluice has none for it.
func (c *Cluster) nodeOr(s *shard, client rueidis.Client) rueidis.Client {
	if s != nil {
		if n := s.node.Load(); n != nil {
			return *n
		}
	}
	return client
}

// ownerOf is the shard of a Redis key, nil without a slot map.
func (t *topology) ownerOf(key string) *shard {
	return t.owner(slot.Of(key))
}

func (t *topology) owner(sl int) *shard {
	if t == nil {
		return nil
	}
	return t.owners[sl]
}

// reset deletes buckets. A split key's sub-buckets go too, and this
// instance forgets the split.
func (c *Cluster) reset(ctx context.Context, client rueidis.Client, topo *topology, reqs []Request, res []Result) {
	var mu sync.Mutex // guards subs
	var subs []string
	perShard(reqs, func(r *Request) *shard { return topo.ownerOf(KeyPrefix + r.Key) }, func(s *shard, idx []int) {
		if s != nil && !s.healthy.Load() {
			for _, i := range idx {
				c.fallback(reqs[i:i+1], res[i:i+1])
			}
			return
		}
		to := c.nodeOr(s, client)
		cmds := make(rueidis.Commands, len(idx))
		for j, i := range idx {
			cmds[j] = to.B().Getdel().Key(KeyPrefix + reqs[i].Key).Build()
		}
		for j, r := range to.DoMulti(ctx, cmds...) {
			i := idx[j]
			v, err := r.ToString()
			if rueidis.IsRedisNil(err) {
				res[i] = Result{}
				continue
			}
			if err != nil && isFault(err) {
				if isRedirect(err) {
					c.stale.Store(true)
				} else {
					c.fault(s, err)
				}
				c.fallback(reqs[i:i+1], res[i:i+1])
				continue
			}
			res[i] = Result{Existed: err == nil, Err: err}
			if sp, ok := lua.Marker(v); ok {
				mu.Lock()
				for j := range sp.Tags {
					subs = append(subs, sp.SubKey(j, reqs[i].Key))
				}
				mu.Unlock()
			}
		}
	})
	for i := range reqs {
		c.hot.forget(reqs[i].Key)
	}
	if len(subs) > 0 {
		cmds := make(rueidis.Commands, len(subs))
		for j, k := range subs {
			cmds[j] = client.B().Del().Key(k).Build()
		}
		client.DoMulti(ctx, cmds...)
	}
}

// isFault tells a shard's failure (it cannot decide now) from an error in
// the request itself, such as WRONGTYPE, which the caller must see.
func isFault(err error) bool {
	var se *lua.SplitError
	if errors.As(err, &se) {
		return false // an answer: the bucket is split
	}
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
	if c.ctx.Err() != nil || errors.Is(err, context.Canceled) {
		// Closing, or the caller went away (a server shutting down): the
		// calls were cancelled, not failed.
		return
	}
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
			res[i] = Result{Source: SourceClosed, Result: bucket.Result{
				Limited:    true,
				RetryAfter: c.cfg.ProbeInterval.Microseconds(),
				ResetAfter: fillTime(r.Interval),
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
			c.tendHotKeys(ctx, now)
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
			t.owners[sl] = s
		}
	}
	// A primary that lost its slots (failed over, or moved away) is
	// forgotten; if it comes back as a primary it starts healthy.
	for addr, s := range c.shards {
		if !owning[s] {
			delete(c.shards, addr)
		}
	}
	n := c.cfg.HotSplit
	if n <= 0 {
		n = min(len(owning), MaxSplit)
	}
	t.tags = splitTags(&t.owners, c.tags, c.byLength, n)
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
	fmt.Fprintf(&b, "decisions_split:%d\r\n", c.split.Load())
	fmt.Fprintf(&b, "decisions_split_denied_here:%d\r\n", c.deniedHere.Load())
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
	fmt.Fprintf(&b, "hot_threshold:%.0f\r\n", c.cfg.HotThreshold)
	c.hot.info(&b, time.Now().UnixNano())
	return b.String()
}

// tendHotKeys splits the keys found hot and renews their markers, cools
// those that stayed under the threshold for the cool-down, and forgets
// followed splits that lapsed.
func (c *Cluster) tendHotKeys(ctx context.Context, now time.Time) {
	ns := now.UnixNano()
	var wg sync.WaitGroup
	for _, hk := range *c.hot.keys.Load() {
		hk.rate.Store(math.Float64bits(c.hot.counter.Rate(hk.key, ns)))
		if !hk.detected.Load() {
			continue
		}
		cooled := ns-hk.lastHot.Load() > int64(c.cfg.HotCooldown)
		if !cooled {
			if st := hk.split.Load(); st != nil && st.until-ns > int64(c.hot.ttl/2) {
				continue
			}
		}
		if !cooled && ns < hk.noSplit.Load() {
			continue
		}
		if !hk.renewing.CompareAndSwap(false, true) {
			continue
		}
		if cooled {
			hk.detected.Store(false)
			wg.Go(func() { c.endSplit(ctx, hk) })
		} else {
			wg.Go(func() { c.renew(ctx, hk) })
		}
	}
	wg.Wait()
	c.hot.drop(func(hk *hotKey) bool { return hk.detected.Load() || hk.live(ns) != nil })
}

// endSplit ends a cooled key's split: the marker lapses when it was to
// (followers may use the sub-buckets until then), into one bucket as empty
// as the sub-buckets are now.
func (c *Cluster) endSplit(ctx context.Context, hk *hotKey) {
	defer hk.renewing.Store(false)
	st := hk.split.Load()
	topo, cl := c.topo.Load(), c.client.Load()
	if st == nil || topo == nil || cl == nil {
		return
	}
	ttf := c.readTTF(ctx, *cl, topo, st)
	if ttf < 0 {
		return // the split lapses at its last renewal's state
	}
	ctx, cancel := context.WithTimeout(ctx, c.cfg.Timeout)
	defer cancel()
	ended, err := c.splitter.End(ctx, c.nodeOr(topo.ownerOf(hk.parent), *cl), hk.parent, ttf)
	if err != nil {
		c.log.Debug("hot key split not ended", zap.String("key", hk.key), zap.Error(err))
	}
	if ended {
		c.log.Info("hot key cooled: one bucket again when its split lapses", zap.String("key", hk.key),
			zap.Duration("lapses_in", time.Duration(max(st.until-time.Now().UnixNano(), 0))))
	}
}

// readTTF reads a split's sub-buckets on healthy shards, within the
// backend timeout, and returns their mean time until full, each as
// throttle.lua sees it (never fuller than the base, a missing one at the
// base); -1 when none answers. Other instances' calls count too, which an
// estimate from this instance's own replies would miss.
func (c *Cluster) readTTF(ctx context.Context, client rueidis.Client, topo *topology, st *splitState) time.Duration {
	ctx, cancel := context.WithTimeout(ctx, c.cfg.Timeout)
	defer cancel()
	var cmds rueidis.Commands
	for j, k := range st.keys {
		if c.healthySub(st, j, topo) {
			cmds = append(cmds, client.B().Get().Key(k).Build())
		}
	}
	if len(cmds) == 0 {
		return -1
	}
	base, _ := strconv.ParseInt(st.base, 10, 64)
	now := time.Now().UnixNano()
	var sum, n int64
	for _, r := range client.DoMulti(ctx, cmds...) {
		v, err := r.ToString()
		if err != nil && !rueidis.IsRedisNil(err) {
			continue // its shard is down: the others tell
		}
		tat, _ := strconv.ParseInt(v, 10, 64)
		sum += max(tat, base, now) - now
		n++
	}
	if n == 0 {
		return -1
	}
	return time.Duration(sum / n)
}

// renew writes hk's split marker, or extends it, with the current
// topology's tags (no more than leave each sub-bucket the largest cost
// seen on the key). The first split keeps the bucket's state for the
// sub-buckets; a renewal records theirs, read from them.
func (c *Cluster) renew(ctx context.Context, hk *hotKey) {
	defer hk.renewing.Store(false)
	topo, cl := c.topo.Load(), c.client.Load()
	if topo == nil || cl == nil || min(len(topo.tags), int(hk.maxParts.Load())) < 2 {
		return
	}
	n := min(len(topo.tags), int(hk.maxParts.Load()))
	owner := topo.ownerOf(hk.parent)
	if owner != nil && !owner.healthy.Load() {
		return
	}
	old := hk.split.Load()
	ttf := time.Duration(-1)
	if old != nil {
		ttf = c.readTTF(ctx, *cl, topo, old)
	}
	// A time of its own: a sub-bucket's hung shard must not use it up and
	// get the parent's shard marked unhealthy.
	ctx, cancel := context.WithTimeout(ctx, c.cfg.Timeout)
	defer cancel()
	sent := time.Now().UnixNano()
	sp, err := c.splitter.Split(ctx, c.nodeOr(owner, *cl), hk.parent, topo.tags[:n], c.hot.ttl, ttf)
	switch {
	case err == nil:
	case isRedirect(err):
		c.stale.Store(true)
		return
	case isFault(err):
		c.fault(owner, err)
		return
	default:
		// The key holds something that is not a bucket: leave it alone
		// for a cool-down.
		hk.noSplit.Store(time.Now().Add(c.cfg.HotCooldown).UnixNano())
		c.log.Warn("hot key cannot be split", zap.String("key", hk.key), zap.Error(err))
		return
	}
	hk.setSplit(sp, sent)
	if old == nil {
		c.log.Info("hot key split", zap.String("key", hk.key), zap.Int("sub_buckets", len(sp.Tags)),
			zap.Strings("tags", sp.Tags), zap.Float64("decisions_per_sec", hk.rateNow()))
	}
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
