package router

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/hex"
	"fmt"
	"math"
	"net"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/rueidis"
	"go.uber.org/zap"

	"github.com/sluice-rl/sluice/lua"
	"github.com/sluice-rl/sluice/router/bucket"
	"github.com/sluice-rl/sluice/router/command"
	"github.com/sluice-rl/sluice/router/slot"
)

// ClusterConfig configures a Cluster. Zero values mean the defaults.
type ClusterConfig struct {
	// Seeds are cluster nodes to start from, host:port. Required.
	Seeds []string
	// Timeout bounds each call to a shard, counted from when its pipeline
	// is sent; 0 means 50ms. A shard that does not answer in time is marked
	// unhealthy. Redis's own active-expire cycle may hold a shard about
	// 25-35 ms when many keys expire together.
	Timeout time.Duration
	// Fallback decides what a shard cannot (FallbackLocal by default).
	Fallback Policy
	// Share is the fraction of each limit the local fallback grants; 0
	// means auto: 1/N for N live sluice instances, counted through a
	// heartbeat in the cluster and kept from before an outage during it.
	Share float64
	// MaxLocalKeys caps the local fallback buckets (as NewMemory's, at
	// least 64); 0 means 100,000.
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
	// HotKeys are patterns (a Redis glob) of keys that are hot
	// whenever they are asked.
	HotKeys []string
	// HotSplit is the number of sub-buckets of a hot key this instance
	// splits; 0 means one per primary. At most MaxSplit. A split made by
	// another instance keeps its own number: this one follows and renews
	// it as it is.
	HotSplit int
	// HotCooldown is how long a hot key must stay under the threshold (a
	// declared one: unasked) before it is one bucket again; 0 means 10s.
	HotCooldown time.Duration
	// MaxBlocking bounds the blocking commands (BLPOP, XREAD BLOCK, ...)
	// waiting at once, each on a connection of its own; 0 means 1000.
	MaxBlocking int
	// ReadFromReplicas sends forwarded read-only commands (GET, MGET,
	// ...) to a replica of their slot's primary, in turn, when it has any.
	// Replicas lag: a read may not see a write just made.
	ReadFromReplicas bool
	// ForwardTimeout bounds how long a node may hold an ordinary command
	// forwarded to it, or a subscriber's command (not the subscriber's
	// wait for messages), from when it was written (a long one's last
	// part) or the node last sent or, while it is written, took bytes;
	// 0 means 10s. Past it the node's connection is
	// closed and its commands answered an error; a subscriber's client is
	// closed after those errors, its subscriptions gone.
	ForwardTimeout time.Duration
	// TopologyInterval is how often the slot map is read again while
	// nothing suggests it changed (a redirect, a node's error, a replica
	// where a primary was); 0 means a second.
	TopologyInterval time.Duration
	// Logger receives one line per change of shard state and per key that
	// becomes hot or cools down; nil means none.
	Logger *zap.Logger
	// TLS, when set, is how every connection to the nodes is made: the
	// nodes' CA (RootCAs) and the certificate sluice presents. The event
	// loops' own connections cannot carry TLS (the loops read raw
	// sockets), so with it every call goes through rueidis and the
	// router's own connections, as on the goroutine path.
	TLS *tls.Config
	// Username and Password authenticate every connection to the nodes
	// (AUTH [username] password); an empty Username is the default user.
	Username, Password string
}

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
	resetter  *lua.Resetter
	tags      *slot.Tags
	byLength  []int // slots, the shortest tags first
	local     *Memory
	hot       *hotSet
	id        string // this instance, in the heartbeat

	client atomic.Pointer[rueidis.Client] // nil until the cluster first answers
	// connectErr is why the last attempt to connect failed, for
	// WaitConnected to tell.
	connectErr  atomic.Pointer[error]
	topo        atomic.Pointer[topology]
	stale       atomic.Bool   // an error suggests the slot map moved
	share       atomic.Uint64 // float64 bits of the local share in use
	live        atomic.Int64  // sluice instances counted by the last heartbeat
	beatRefused atomic.Bool   // a heartbeat was refused (logged once)

	commandsRefused atomic.Bool // COMMAND was refused (logged once)

	mu     sync.Mutex        // guards shards, forgotten, backends, idle, tunnels and stayed
	shards map[string]*shard // by primary address, kept across topologies
	// forgotten are the faults of primaries that lost their slots, by
	// address: one that is a primary again goes on counting its faults
	// from theirs, since INFO and the metrics show them as counters. At
	// most maxForgotten: where nodes come back at new addresses (a pod
	// restarted), the old ones would otherwise pile up for good.
	forgotten map[string]faults
	backends  map[string]*backend   // forwarding connections, by node address
	idle      map[string][]idleConn // connections for blocking commands, between uses
	tunnels   map[*Tunnel]struct{}  // subscribers' tunnels not yet closed
	// stayed are the nodes absent from the slot map that a tunnel holds
	// and that, asked whether they left the cluster (closeLeft), did not
	// say so, by when they were asked.
	stayed      map[string]time.Time
	scripts     scripts       // loaded or run through sluice, for NOSCRIPT replay
	blocking    atomic.Int64  // blocking commands in flight
	nextReplica atomic.Uint64 // turns reads over a primary's replicas
	// replicaDown is when each replica last failed a read (unix ns), by
	// address: reads pass it over for replicaRest after.
	replicaDown sync.Map

	commands atomic.Pointer[map[string]*command.Spec] // the cluster's command table

	counts [numSources]atomic.Int64
	split  atomic.Int64 // cluster decisions made by a sub-bucket
	// deniedHere counts split decisions denied from a hot key's last
	// denial, without a step.
	deniedHere atomic.Int64

	ctx  context.Context // ends at Close: background work, hot keys' batched steps
	stop context.CancelFunc
	done chan struct{}
}

// NewCluster returns a Cluster and starts connecting to cfg.Seeds in the
// background. Close stops it.
func NewCluster(cfg ClusterConfig) *Cluster {
	if cfg.Timeout <= 0 {
		cfg.Timeout = 50 * time.Millisecond
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
		resetter:  lua.NewResetter(),
		tags:      tags,
		byLength:  slotsByTagLength(tags),
		local:     NewMemory(cfg.MaxLocalKeys),
		hot:       newHotSet(cfg),
		id:        newID(),
		shards:    map[string]*shard{},
		forgotten: map[string]faults{},
		backends:  map[string]*backend{},
		idle:      map[string][]idleConn{},
		tunnels:   map[*Tunnel]struct{}{},
		stayed:    map[string]time.Time{},
		scripts:   scripts{known: map[string]struct{}{}},
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

// pipes is via, or nil when the loops' pipes cannot reach the nodes: they
// are raw sockets, and TLS needs crypto/tls between them and the loop.
func (c *Cluster) pipes(via Pipes) Pipes {
	if c.cfg.TLS != nil {
		return nil
	}
	return via
}

// Close stops the background work and the connections.
func (c *Cluster) Close() {
	c.stop()
	<-c.done
	c.closeBackends()
	if cl := c.client.Load(); cl != nil {
		c.leave(*cl)
		(*cl).Close()
	}
}

// Connected reports whether the cluster has answered at least once.
func (c *Cluster) Connected() bool { return c.client.Load() != nil }

// WaitConnected waits until the cluster has answered and its slot map is
// read, or ctx ends; then it returns why the last attempt to connect
// failed (a wrong password, a certificate the nodes refuse, ...), if one
// did.
func (c *Cluster) WaitConnected(ctx context.Context) error {
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for c.topo.Load() == nil {
		select {
		case <-ctx.Done():
			if err := c.connectErr.Load(); err != nil {
				return fmt.Errorf("router: connecting to the cluster: %w", *err)
			}
			return ctx.Err()
		case <-tick.C:
		}
	}
	return nil
}

// Decide decides reqs and waits for them: Takes as Submit does, Resets in
// one pipelined batch bounded by the timeout, and all by the fallback
// policy while there is no cluster. Requests are grouped in runs of one Op
// so that a Reset and a Take on one key in one pipeline keep their order.
func (c *Cluster) Decide(ctx context.Context, reqs []Request, res []Result) {
	for start := 0; start < len(reqs); {
		end := start + 1
		for end < len(reqs) && reqs[end].Op == reqs[start].Op {
			end++
		}
		c.decideRun(ctx, reqs[start:end], res[start:end])
		start = end
	}
}

// Submit decides reqs as Decide does, without waiting for the shards: each
// shard's calls go out on a goroutine of their own and are reported through
// done when that shard answers, so that a slow shard delays only its own
// keys; a hot key's calls are reported together. What no shard decides
// (fallback) is reported before Submit returns. Rounds with a Reset, rare,
// are decided whole, in order.
func (c *Cluster) Submit(ctx context.Context, reqs []Request, res []Result, done func(idx []int)) {
	c.SubmitVia(ctx, nil, c.Map(), reqs, res, done)
}

// SubmitVia is Submit with the calls on a key's own bucket sent on via's
// bucket pipes, when via is not nil: the caller's event loop writes them,
// reads the replies and calls done on its own goroutine. Hot keys and
// resets take Submit's way. The calls go where m, a map read when they
// were taken, sends them: a caller that let one be taken because its calls
// in flight went by m's generation would otherwise have it overtake them
// once a newer map moved its slot (they, redirected, reach the new owner
// after it).
func (c *Cluster) SubmitVia(ctx context.Context, via Pipes, m SlotMap, reqs []Request, res []Result, done func(idx []int)) {
	via = c.pipes(via)
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
	topo := m.t
	now := time.Now().UnixNano()
	var groups []*shardCalls
	// hot is the round's calls on hot keys: reported together by the last
	// to be decided; left holds one more while Submit still adds to it.
	var hot *shardCalls
	var hv *hotVia // where hot calls go: via's pipes, or the coalescer (nil)
	var here []int
	var kept []keptCall // on keys' own buckets, in order
	// A round of a few requests, the common one, keeps them on the stack:
	// kept dies with the call, yet a make in the loop below is on the heap.
	var small [8]keptCall
	var pooled *[]keptCall // kept's room, when it is the pool's
	for i := range reqs {
		r := &reqs[i]
		if hk := c.hot.observe(r.Key, now); hk != nil {
			if hot == nil {
				hot = &shardCalls{c: c, ctx: ctx, reqs: reqs, res: res, topo: topo, done: done}
				hot.left.Store(1)
				if via != nil {
					hv = &hotVia{pipes: via, open: true}
				}
			}
			hot.left.Add(1)
			if c.startHot(i, r, hk, hk.inForce(topo, now), topo, reqs, res, hot.then, hv) {
				hot.idx = append(hot.idx, i)
			} else {
				hot.left.Add(-1) // decided at once: never 0, Submit's share holds
				here = append(here, i)
			}
			continue
		}
		key := r.storedKey()
		owner := topo.ownerOf(key)
		if owner != nil && !owner.healthy.Load() {
			c.fallback(reqs[i:i+1], res[i:i+1])
			here = append(here, i)
			continue
		}
		k := slices.IndexFunc(groups, func(g *shardCalls) bool { return g.owner == owner })
		if k < 0 {
			k = len(groups)
			groups = append(groups, &shardCalls{owner: owner})
		}
		if kept == nil {
			if len(reqs)-i <= len(small) {
				kept = small[:0]
			} else {
				pooled = takeKept(len(reqs) - i)
				kept = *pooled
			}
		}
		kept = append(kept, keptCall{req: i, group: k, key: key})
	}
	if len(kept) > 0 {
		// Each shard's calls are a part of one array, sized once: a round
		// of hundreds of calls costs a few allocations, not a slice grown
		// per shard.
		n := make([]int, len(groups))
		for _, kc := range kept {
			n[kc.group]++
		}
		var calls []call
		var idx []int
		if len(kept) == 1 {
			// A lone request, as each is when the load is light: its
			// group holds them.
			g := groups[0]
			calls, idx = g.oneCall[:], g.oneIdx[:]
		} else {
			calls, idx = make([]call, len(kept)), make([]int, len(kept))
		}
		at := 0
		for k, g := range groups {
			g.calls, g.idx = calls[at:at:at+n[k]], idx[at:at:at+n[k]]
			at += n[k]
		}
		for _, kc := range kept {
			g := groups[kc.group]
			g.calls = append(g.calls, call{req: kc.req, owner: g.owner, key: kc.key})
			g.idx = append(g.idx, kc.req)
		}
	}
	if pooled != nil {
		giveKept(pooled, len(kept))
	}
	if len(here) > 0 {
		c.count(res, here)
		done(here)
	}
	for _, g := range groups {
		g.c, g.reqs, g.res, g.topo, g.ctx, g.done = c, reqs, res, topo, ctx, done
		g.left.Store(int64(len(g.calls)))
		if g.owner == nil {
			// No slot map yet: the cluster client routes the calls.
			groups := make([]*shardCalls, len(g.calls))
			for k := range groups {
				groups[k] = g
			}
			go c.flushCalls(nil, g.calls, groups)
			continue
		}
		if via != nil {
			c.sendVia(via, g)
			continue
		}
		c.enqueue(g)
	}
	if hv != nil {
		hv.close(c)
	}
	if hot != nil {
		hot.release()
	}
}

// count counts the decisions of idx (nil: all of res) by source. An
// error (WRONGTYPE, OOM, a caller gone) decided nothing, and is not
// counted, as sluice_decisions_total does not count it.
func (c *Cluster) count(res []Result, idx []int) {
	if idx == nil {
		for i := range res {
			if res[i].Err == nil {
				c.counts[res[i].Source].Add(1)
			}
		}
		return
	}
	for _, i := range idx {
		if res[i].Err == nil {
			c.counts[res[i].Source].Add(1)
		}
	}
}

func (c *Cluster) decideRun(ctx context.Context, reqs []Request, res []Result) {
	cl := c.client.Load()
	switch {
	case cl == nil:
		c.fallback(reqs, res)
	case reqs[0].Op == Reset:
		ctx, cancel := context.WithTimeoutCause(ctx, c.cfg.Timeout, errBackendTimeout)
		defer cancel()
		c.reset(ctx, *cl, c.topo.Load(), reqs, res)
	default:
		c.submitAndWait(ctx, reqs, res) // Submit counts them
		return
	}
	// A Reset decides nothing: the counts are INFO's decisions, which
	// sluice_decisions_total counts without Resets too.
	if reqs[0].Op != Reset {
		c.count(res, nil)
	}
}

// submitAndWait is Submit for a caller that waits: a run of Takes.
func (c *Cluster) submitAndWait(ctx context.Context, reqs []Request, res []Result) {
	var mu sync.Mutex // guards left
	left := len(reqs)
	all := make(chan struct{})
	c.Submit(ctx, reqs, res, func(idx []int) {
		mu.Lock()
		defer mu.Unlock()
		if idx == nil {
			left = 0
		} else {
			left -= len(idx)
		}
		if left == 0 {
			close(all)
		}
	})
	<-all
}

// step is the Lua call that takes cost tokens from the bucket at key.
func step(key string, iv bucket.Interval, cost int64) lua.Call {
	return lua.Call{Key: key, Capacity: iv.Capacity, U: iv.U, V: iv.V, Cost: cost}
}

// keptCall is a request SubmitVia sends to its key's own bucket, in
// groups[group], before its call is made.
type keptCall struct {
	req, group int
	key        string
}

// keptPool holds SubmitVia's lists of calls on keys' own buckets, each
// done with before SubmitVia returns: a round of hundreds of requests
// would otherwise allocate one on every call.
var keptPool sync.Pool // of *[]keptCall

// takeKept is an empty list with room for n calls, from the pool.
func takeKept(n int) *[]keptCall { return fromPool[keptCall](&keptPool, n) }

// giveKept puts p back, its n calls cleared of the keys they point to.
// A list far longer than a round's usual is let go: kept, every later
// round would be given its room.
func giveKept(p *[]keptCall, n int) {
	if cap(*p) > maxPooledKept {
		return
	}
	clear((*p)[:n])
	keptPool.Put(p)
}

// maxPooledKept is the longest list the pool keeps: a round of 16
// clients' pipelines of 64.
const maxPooledKept = 1024

// call is a Lua step on a key's own bucket. The step is made from its
// request when it is encoded, not kept: a round holds a call per request
// while its shard answers, and the step is four times a call's size.
type call struct {
	req   int
	owner *shard // nil when sluice has no slot map yet
	key   string // stored
}

// stepIn is cl's Lua step, for cl a call on reqs.
func (cl *call) stepIn(reqs []Request) lua.Call {
	r := &reqs[cl.req]
	return step(cl.key, r.Interval, r.Cost)
}

// settle stores the outcome of a step on a key's own bucket in res. A key
// that another instance split is followed: its call goes on to the
// sub-buckets, with g.then to call when it is decided, and settle reports
// true.
func (c *Cluster) settle(cl *call, br lua.Result, err error, g *shardCalls, sent int64) bool {
	reqs, res := g.reqs, g.res
	i, r := cl.req, &reqs[cl.req]
	se := lua.SplitOf(err)
	switch {
	case se != nil:
		hk := c.hot.follow(r.Key, se.Split, sent)
		if st := hk.live(sent); st != nil {
			return c.startHot(i, r, hk, st, g.topo, reqs, res, g.then, nil)
		}
	case !c.failed(cl.owner, err):
		res[i] = Result{Result: bucket.Result(br), Err: err}
		return false
	}
	c.fallback(reqs[i:i+1], res[i:i+1])
	return false
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

// reset deletes buckets. A split key's sub-buckets go too, and this
// instance forgets the split. A key whose shard is unhealthy is reset only
// in the local fallback, and answered ErrResetNotInCluster.
func (c *Cluster) reset(ctx context.Context, client rueidis.Client, topo *topology, reqs []Request, res []Result) {
	// A sub-bucket to delete, and the request it can tell existed: one
	// whose marker's own state was full (-1: none).
	type sub struct {
		key  string
		tell int
	}
	var mu sync.Mutex // guards subs
	var subs []sub
	perShard(reqs, func(r *Request) *shard { return topo.ownerOf(r.storedKey()) }, func(s *shard, idx []int) {
		if s != nil && !s.healthy.Load() {
			for _, i := range idx {
				c.fallback(reqs[i:i+1], res[i:i+1])
			}
			return
		}
		to := c.nodeOr(s, client)
		keys := make([]string, len(idx))
		for j, i := range idx {
			keys[j] = reqs[i].storedKey()
		}
		results := c.resetter.Reset(ctx, to, keys)
		errs := make([]error, len(results))
		for j, r := range results {
			errs[j] = r.Error()
		}
		if again := c.redirected(errs); len(again) > 0 {
			re := make([]string, len(again))
			for j, k := range again {
				re[j] = keys[k]
			}
			for j, r := range c.resetter.Reset(ctx, client, re) {
				results[again[j]] = r
			}
		}
		for j, r := range results {
			i := idx[j]
			v, err := r.ToString()
			full := false
			if arr, aerr := r.ToArray(); aerr == nil && len(arr) == 2 {
				v, err = arr[0].ToString()
				n, _ := arr[1].AsInt64()
				full = n == 0
			}
			err = callerGone(ctx, err)
			if err == nil || rueidis.IsRedisNil(err) {
				// The bucket is full now: one an outage left in the
				// fallback (settle keeps it) would deny the key at the
				// next outage as if the reset had not been.
				c.local.forget(reqs[i].Key)
			}
			if rueidis.IsRedisNil(err) {
				res[i] = Result{}
				continue
			}
			if c.failed(s, err) {
				c.fallback(reqs[i:i+1], res[i:i+1])
				continue
			}
			// A split whose own state is full existed only if a
			// sub-bucket did: it answers as one bucket would.
			res[i] = Result{Existed: err == nil && !full, Err: err}
			if sp, ok := lua.Marker(v); ok {
				tell := -1
				if full {
					tell = i
				}
				mu.Lock()
				for j := range sp.Tags {
					subs = append(subs, sub{sp.SubKey(j, reqs[i].Key), tell})
				}
				mu.Unlock()
			}
		}
	})
	for i := range reqs {
		if res[i].Err == nil {
			c.hot.forget(reqs[i].Key)
		}
	}
	// A sub-bucket on an unhealthy shard is left to expire, as the calls
	// to that shard skip the network: the next split has other names.
	cmds := make(rueidis.Commands, 0, len(subs))
	tells := make([]int, 0, len(subs))
	for _, sb := range subs {
		if s := topo.ownerOf(sb.key); s == nil || s.healthy.Load() {
			cmds = append(cmds, client.B().Del().Key(sb.key).Build())
			tells = append(tells, sb.tell)
		} else if sb.tell >= 0 {
			// Not read, it may hold the tokens the key lacks: a reset
			// that deleted a bucket is the safer answer.
			res[sb.tell].Existed = true
		}
	}
	if len(cmds) == 0 {
		return
	}
	for j, r := range client.DoMulti(ctx, cmds...) {
		// A sub-bucket's key is gone once it is full again.
		if n, err := r.AsInt64(); err == nil && n > 0 && tells[j] >= 0 {
			res[tells[j]].Existed = true
		}
	}
}

// run is the background loop: it connects, keeps the slot map, probes
// unhealthy shards and starts each heartbeat, which runs beside it.
func (c *Cluster) run(ctx context.Context) {
	defer close(c.done)
	tick := time.NewTicker(c.cfg.ProbeInterval / 2)
	defer tick.Stop()
	// The heartbeat runs beside the loop: its shard paused, a beat waits
	// out its deadline (300 ms at the default timeout), and the probes
	// and slot-map reads of an outage must not wait behind it. Awaited
	// before done, so that leave comes after the last beat.
	var beating sync.WaitGroup
	defer beating.Wait()
	var beatDone atomic.Bool
	beatDone.Store(true)
	// Whether subscribers' nodes absent from the slot map left the
	// cluster is asked of those nodes beside the loop too: one paused
	// would hold it up to a dial's time.
	var sweeping sync.WaitGroup
	defer sweeping.Wait()
	var sweepDone atomic.Bool
	sweepDone.Store(true)
	var nextConnect, nextTopo, nextBeat time.Time
	connectBackoff := c.cfg.ProbeInterval
	for {
		now := time.Now()
		if c.client.Load() == nil {
			if !now.Before(nextConnect) {
				if err := c.connect(ctx); err != nil {
					c.connectErr.Store(&err)
					c.log.Debug("cluster not reachable yet", zap.Strings("seeds", c.cfg.Seeds), zap.Error(err))
					connectBackoff = min(2*connectBackoff, 8*c.cfg.ProbeInterval)
					nextConnect = now.Add(connectBackoff)
				} else {
					// connect read the slot map: the next read is a period
					// away, not at the next tick.
					nextTopo = time.Now().Add(c.topologyEvery())
				}
			}
		} else {
			// During an outage the slot map is read on every tick, so that
			// a promoted replica is used as soon as it owns the slots.
			if c.stale.Swap(false) || c.unhealthy() || !now.Before(nextTopo) {
				c.refreshTopology(ctx)
				nextTopo = now.Add(c.topologyEvery())
				if addrs := c.absentTunnelNodes(now); len(addrs) > 0 && sweepDone.Load() {
					sweepDone.Store(false)
					sweeping.Go(func() {
						defer sweepDone.Store(true)
						c.closeLeft(ctx, addrs)
					})
				}
			}
			if c.commands.Load() == nil {
				c.readCommands(ctx)
			}
			c.probe(ctx, now)
			c.releaseFallback()
			c.tendHotKeys(ctx, now)
			if c.cfg.Share <= 0 && !now.Before(nextBeat) && beatDone.Load() {
				beatDone.Store(false)
				beating.Go(func() {
					defer beatDone.Store(true)
					c.beat(ctx)
				})
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
		// rueidis's default is 512 KiB each way per connection; its
		// connections carry the goroutine path's batches (a few KB), hot
		// keys and probes, and at the default their buffers were a third
		// of sluice's live heap, held for good.
		ReadBufferEachConn:  64 << 10,
		WriteBufferEachConn: 64 << 10,
		TLSConfig:           c.cfg.TLS,
		Username:            c.cfg.Username,
		Password:            c.cfg.Password,
	})
	if err != nil {
		return err
	}
	if ctx.Err() != nil {
		client.Close()
		return ctx.Err()
	}
	c.client.Store(&client)
	// Before the slot map, which WaitConnected waits for: sluice then
	// serves, and without the table would answer every ordinary command
	// TRYAGAIN until run's next tick (a restart under load).
	c.readCommands(ctx)
	c.refreshTopology(ctx)
	c.log.Info("connected to the cluster", zap.Strings("seeds", c.cfg.Seeds))
	return nil
}

// LocalBuckets is the number of local fallback buckets held.
func (c *Cluster) LocalBuckets() int { return c.local.Len() }

// Decisions is how many decisions source has made since start.
func (c *Cluster) Decisions(source Source) int64 { return c.counts[source].Load() }
