package router

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/rueidis"

	"github.com/sluice-rl/sluice/lua"
)

// A shard's calls from every round of every loop are coalesced: while the
// shard has maxFlushes pipelines in flight, new calls queue, and the next
// pipeline carries all of them (at most maxPipeline), decided by one script
// call. At light load a call goes out at once; under load the pipelines
// grow, so the shard and this process pay one command, one write and one
// read per pipeline, not per call, and a script blocks the shard for at
// most maxPipeline steps (about 250 µs). Each pipeline's deadline is the
// backend timeout from when it is sent: a call waits in the shard behind at
// most maxFlushes-1 other pipelines, so the timeout bounds each call, and a
// long pipeline from one client cannot make a healthy shard look hung.
// Waiting in the queue is not the shard's fault and does not count.
//
// The pipelines in flight are sent by as many goroutines, on rueidis's
// one connection to the node: a pipeline taken first can be written
// second. So a key's calls keep their order (a client's pipelined
// THROTTLEs of one key, on the goroutine path, or on a loop whose pipes
// are not used, with --cluster-tls) by going in one pipeline at a time: a
// call whose key a pipeline in flight carries waits in the queue until
// that pipeline is answered (shardQueue.busy).
const (
	maxPipeline = 64
	maxFlushes  = 4
)

// shardQueue is one shard's calls waiting for a pipeline.
type shardQueue struct {
	mu       sync.Mutex // guards flushing, queue, busy and batch
	flushing int        // pipelines in flight
	queue    []queued
	// busy are the keys of the pipelines in flight, each with the number
	// of the pipeline that carries it (batch, when it was taken).
	busy  map[string]uint64
	batch uint64
}

// next takes the next pipeline's calls off q, in order: at most
// maxPipeline, and none of a key that another pipeline in flight carries
// (those wait, in order, with the rest). q.mu is held.
func (q *shardQueue) next() ([]call, []*shardCalls) {
	if len(q.queue) == 0 {
		return nil, nil
	}
	if q.busy == nil {
		q.busy = make(map[string]uint64)
	}
	q.batch++
	n := min(len(q.queue), maxPipeline)
	calls, groups := make([]call, 0, n), make([]*shardCalls, 0, n)
	kept, i := 0, 0
	for ; i < len(q.queue) && len(calls) < maxPipeline; i++ {
		b := q.queue[i]
		cl := b.g.calls[b.j]
		if in, ok := q.busy[cl.key]; ok && in != q.batch {
			q.queue[kept] = b
			kept++
			continue
		}
		q.busy[cl.key] = q.batch
		calls, groups = append(calls, cl), append(groups, b.g)
	}
	left := kept + copy(q.queue[kept:], q.queue[i:])
	clear(q.queue[left:]) // or it keeps finished rounds alive
	q.queue = q.queue[:left]
	return calls, groups
}

// sent frees the keys of calls, a pipeline of q's that is answered, for
// the calls that wait on them. q.mu is held.
func (q *shardQueue) sent(calls []call) {
	for k := range calls {
		delete(q.busy, calls[k].key)
	}
}

// queued is one call of a round's group, or a hot key's step.
type queued struct {
	g   *shardCalls
	j   int    // into g.calls
	hot *group // or this, on a loop's pipe
}

// step is q's Lua step.
func (q *queued) step() lua.Call {
	if q.hot != nil {
		return q.hot.call()
	}
	return q.g.calls[q.j].stepIn(q.g.reqs)
}

// shardCalls are a round's calls on one shard (or on hot keys), and where
// their results go.
type shardCalls struct {
	owner *shard
	calls []call
	idx   []int // the calls' requests, reported together
	// oneCall and oneIdx are calls and idx when a round has one request.
	oneCall [1]call
	oneIdx  [1]int

	c    *Cluster
	ctx  context.Context
	reqs []Request
	res  []Result
	topo *topology
	done func([]int)
	left atomic.Int64 // calls not yet settled
}

// enqueue queues g's calls on its shard and starts a pipeline if the shard
// has room for one.
func (c *Cluster) enqueue(g *shardCalls) {
	q := &g.owner.out
	q.mu.Lock()
	for j := range g.calls {
		q.queue = append(q.queue, queued{g: g, j: j})
	}
	start := q.flushing < maxFlushes
	if start {
		q.flushing++
	}
	q.mu.Unlock()
	if start {
		go c.flushShard(g.owner)
	}
}

// flushShard sends the shard's queued calls, a pipeline at a time, until none
// are left.
func (c *Cluster) flushShard(s *shard) {
	q := &s.out
	var calls []call
	for {
		q.mu.Lock()
		q.sent(calls)
		var groups []*shardCalls
		calls, groups = q.next()
		if len(calls) == 0 {
			// What is left waits on the keys of pipelines in flight,
			// whose goroutines take it once they are answered.
			q.flushing--
			q.mu.Unlock()
			return
		}
		q.mu.Unlock()
		c.flushCalls(s, calls, groups)
	}
}

// flushCalls runs one pipeline of calls, call k of groups[k], and settles
// each into its group.
func (c *Cluster) flushCalls(s *shard, calls []call, groups []*shardCalls) {
	br, errs := make([]lua.Result, len(calls)), make([]error, len(calls))
	sent := time.Now().UnixNano()
	cl := c.client.Load()
	switch {
	case cl == nil || (s != nil && !s.healthy.Load()):
		// Failed since the calls were queued: their keys fall back.
		for k := range errs {
			errs[k] = errShardDown
		}
	default:
		steps := make([]lua.Call, len(calls))
		for k := range calls {
			steps[k] = calls[k].stepIn(groups[k].reqs)
		}
		// The pipeline's own time; the first group's context carries the
		// server's cancellation.
		ctx, cancel := context.WithTimeoutCause(groups[0].ctx, c.cfg.Timeout, errBackendTimeout)
		c.decideOn(ctx, s, *cl, steps, br, errs)
		for k := range errs {
			errs[k] = callerGone(ctx, errs[k])
		}
		cancel()
	}
	for k := range calls {
		g := groups[k]
		if errs[k] == errShardDown {
			i := calls[k].req
			c.fallback(g.reqs[i:i+1], g.res[i:i+1])
		} else if c.settle(&calls[k], br[k], errs[k], g, sent) {
			continue // on a split key: its sub-buckets' step releases it
		}
		g.release()
	}
}

// then is a group's call on a split key whose step is done.
func (g *shardCalls) then(h *hotCall) {
	if !g.c.advance(h, g.reqs, g.res, g.topo) {
		g.release()
	}
}

// release ends one of g's calls; the last reports the group (a round's
// hot calls may all have been decided at once: nothing left to report).
func (g *shardCalls) release() {
	if g.left.Add(-1) == 0 && len(g.idx) > 0 {
		g.c.count(g.res, g.idx)
		g.done(g.idx)
	}
}

// decideOn decides a pipeline's steps on shard s: all in one script call on
// its node, which costs the shard one command, one parse and one reply
// instead of one per step. A key the node turns out not to serve (its
// slot moved, or is moving) is sent again on its own, declared, through
// the cluster client, which follows MOVED and ASK. Without a node client
// of its own (no slot map yet), each step is its own call.
func (c *Cluster) decideOn(ctx context.Context, s *shard, client rueidis.Client, steps []lua.Call, br []lua.Result, errs []error) {
	var node *rueidis.Client
	if s != nil {
		node = s.node.Load()
	}
	if node == nil {
		c.throttle.Do(ctx, client, steps, br, errs)
		return
	}
	out := make([]lua.Outcome, len(steps))
	c.throttle.DoMany(ctx, *node, steps, out)
	var again []int
	for k, o := range out {
		br[k], errs[k] = o.Result, o.Err
		if le := lua.ErrorOf(o.Err); le != nil && (le.IsNotLocal() || le.IsClusterDown()) {
			again = append(again, k)
		}
	}
	if len(again) == 0 {
		return
	}
	c.stale.Store(true) // the slot map is behind
	re := make([]lua.Call, len(again))
	for j, k := range again {
		re[j] = steps[k]
	}
	rb, rerrs := make([]lua.Result, len(re)), make([]error, len(re))
	c.throttle.Do(ctx, client, re, rb, rerrs)
	for j, k := range again {
		br[k], errs[k] = rb[j], rerrs[j]
	}
}
