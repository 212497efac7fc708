package router

import (
	"slices"
	"time"

	"github.com/sluice-rl/sluice/lua"
)

// Bucket calls on an event loop's own connections: a round's calls on a
// shard are queued on the loop's bucket pipe to the shard's primary and
// sent as one script call (at most maxPipeline steps), at most maxFlushes
// calls in flight per pipe; calls that queue meanwhile go out together in
// the next one. Each call's deadline is the backend timeout from when it
// is written: waiting in the queue is not the shard's fault. The replies
// are read, parsed and settled in the loop's own pass. Whatever is not a
// plain decision (NOSCRIPT, a slot that moved, BUSY...) is decided again
// on the goroutine path, whose handling of it is complete.

// sendVia queues g's calls on via's pipe to their shard and sends what the
// pipe has room for.
func (c *Cluster) sendVia(via Pipes, g *shardCalls) {
	p := via.BucketPipe(g.owner.addr)
	for j := range g.calls {
		p.bq = append(p.bq, queued{g: g, j: j})
	}
	c.pump(p, g.owner)
}

// pump sends p's queued calls, maxPipeline to a script call, while fewer
// than maxFlushes are in flight.
func (c *Cluster) pump(p *Pipe, s *shard) {
	if p.diverted && len(p.bq) > 0 {
		// Calls refused whole went to the shard's queue. Once it has
		// decided them, the pipe may have the script again (reloaded by
		// their replay), and a call sent here would overtake those still
		// queued: later ones follow them until the queue is idle. Not
		// before the pipe's calls in flight are answered: refused too,
		// they go to the queue ahead of these.
		if p.bInFlight > 0 {
			return
		}
		q := &s.out
		q.mu.Lock()
		idle := len(q.queue) == 0 && q.flushing == 0
		q.mu.Unlock()
		if !idle {
			bq := p.bq
			p.bq = nil
			c.requeue(s, bq)
			return
		}
		p.diverted = false
	}
	for len(p.bq) > 0 && p.bInFlight < maxFlushes {
		n := min(len(p.bq), maxPipeline)
		b := &bucketCall{c: c, s: s, p: p, sent: time.Now().UnixNano()}
		if n == 1 {
			// A lone call, as each is when the load is light, takes no
			// array of its own.
			b.one[0] = p.bq[0]
			b.calls = b.one[:]
		} else {
			b.calls = append(p.takeSpare(), p.bq[:n]...)
		}
		for k := range b.calls {
			p.steps = append(p.steps, b.calls[k].step())
		}
		// The vacated tail is cleared: it would keep finished rounds (their
		// requests and results) alive for as long as the pipe lives.
		left := copy(p.bq, p.bq[n:])
		clear(p.bq[left:])
		p.bq = p.bq[:left]
		p.bInFlight++
		// Encoded where it is written from: nothing reads a bucket call's
		// command again (a refused call is decided again from its steps).
		p.out = c.throttle.AppendMany(p.out, p.steps)
		clear(p.steps)
		p.steps = p.steps[:0]
		b.f = forwarded{c: c, replies: 1, bucket: b}
		p.send(&b.f)
	}
}

// bucketCall is one script call of bucket steps on a loop's pipe: its
// calls, in the order of its steps, where their groups hold them.
type bucketCall struct {
	c     *Cluster
	s     *shard
	p     *Pipe
	calls []queued
	one   [1]queued // calls, when it is one
	sent  int64
	f     forwarded // its place in the pipe's queue, allocated with it
}

// answer settles the calls from the node's reply.
func (b *bucketCall) answer(r []byte) {
	b.p.bInFlight--
	// The loop answers its pipes' calls one at a time: one buffer serves
	// them all, nothing keeps it past the settling below.
	out := slices.Grow(b.p.outcomes[:0], len(b.calls))[:len(b.calls)]
	b.p.outcomes = out
	defer clear(out)
	if err := lua.ReadMany(r, out); err != nil {
		// The whole call was refused: NOSCRIPT (a restarted or promoted
		// node), BUSY, LOADING, CLUSTERDOWN, ...
		b.p.diverted = true
		b.again(nil)
		b.giveSpare()
		b.c.pump(b.p, b.s)
		return
	}
	var again []int
	for k, o := range out {
		if le := lua.ErrorOf(o.Err); le != nil && (le.IsNotLocal() || le.IsClusterDown()) {
			again = append(again, k) // sent again, declared, where MOVED and ASK work
			continue
		}
		b.settle(k, o.Result, o.Taken, o.Err)
	}
	if len(again) > 0 {
		b.c.stale.Store(true) // the slot map is behind
		b.again(again)
	}
	b.giveSpare()
	b.c.pump(b.p, b.s)
}

// again decides the calls of idx (nil: all) again on the goroutine path.
// They go through the shard's queue, as its own calls do: the pipe's
// calls in flight after this one may hold the same keys, and are answered
// again in turn; pipelines of their own, sent concurrently, would run a
// key's calls in any order.
func (b *bucketCall) again(idx []int) {
	if idx == nil {
		b.c.requeue(b.s, b.calls)
		return
	}
	calls := make([]queued, len(idx))
	for i, k := range idx {
		calls[i] = b.calls[k]
	}
	b.c.requeue(b.s, calls)
}

// requeue decides qs again on the goroutine path, in order: through s's
// queue, or the hot keys' own way.
func (c *Cluster) requeue(s *shard, qs []queued) {
	var calls []queued
	var hot []*group
	for _, q := range qs {
		if q.hot != nil {
			hot = append(hot, q.hot)
		} else {
			calls = append(calls, q)
		}
	}
	if len(hot) > 0 {
		c.againHot(s, hot)
	}
	if len(calls) == 0 {
		return
	}
	q := &s.out
	q.mu.Lock()
	q.queue = append(q.queue, calls...)
	start := q.flushing < maxFlushes
	if start {
		q.flushing++
	}
	q.mu.Unlock()
	if start {
		go c.flushShard(s)
	}
}

// lost settles the calls of a connection that failed or timed out, which
// marks the shard unhealthy: they are decided by the fallback.
func (b *bucketCall) lost(err error) {
	b.p.bInFlight--
	for k := range b.calls {
		b.settle(k, lua.Result{}, 0, err)
	}
	b.giveSpare()
}

// takeSpare is an empty list for a script call's steps, from p's spares:
// the loop answers a pipe's calls on its own goroutine, so a list goes
// back once its call is settled, with no allocation per call.
func (p *Pipe) takeSpare() []queued {
	if n := len(p.spare); n > 0 {
		l := p.spare[n-1]
		p.spare[n-1] = nil
		p.spare = p.spare[:n-1]
		return l
	}
	return make([]queued, 0, maxPipeline)
}

// giveSpare gives b's list of steps back to its pipe once they are
// settled (requeue keeps copies), cleared of the rounds it points to.
func (b *bucketCall) giveSpare() {
	if cap(b.calls) != maxPipeline || len(b.p.spare) >= maxFlushes {
		return // b.one, or a pipe that has all it needs
	}
	clear(b.calls)
	b.p.spare = append(b.p.spare, b.calls[:0])
	b.calls = nil
}

func (b *bucketCall) settle(k int, br lua.Result, taken int64, err error) {
	if hg := b.calls[k].hot; hg != nil {
		b.c.store(hg, br, taken, err)
		b.c.settleVia(hg)
		return
	}
	g := b.calls[k].g
	if !b.c.settle(&g.calls[b.calls[k].j], br, err, g, b.sent) {
		g.release()
	}
}

// failQueued decides p's queued calls by the fallback: their shard failed
// (the calls in flight on it did).
func (p *Pipe) failQueued() {
	bq := p.bq
	p.bq = nil
	for _, q := range bq {
		if q.hot != nil {
			for _, w := range q.hot.ws {
				w.err = errShardDown
			}
			p.c.settleVia(q.hot)
			continue
		}
		g := q.g
		i := g.calls[q.j].req
		g.c.fallback(g.reqs[i:i+1], g.res[i:i+1])
		g.release()
	}
}
