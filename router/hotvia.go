package router

import "slices"

// Hot keys' steps on an event loop's own bucket pipes. A round's calls on
// a hot key are grouped as the coalescer groups a batch (one script step
// per sub-bucket, limit and cost) and go out with the round's other steps
// on the loop's connections; their replies are settled in the loop's pass,
// and a call sent on to a sibling goes out from there. Through the
// coalescer a step crossed its goroutine, rueidis's writer and reader and
// the loop's eventfd: one client's hot call took 263 µs at p50 where a
// call on a key's own bucket, on the pipes, took 135 µs.

// HotCalls is an event loop's coalescer of hot keys' calls, the loop's
// own (no lock: only its goroutine uses it): while a key has hotInFlight
// batches out, its calls queue, and the next batch carries them all, as
// the coalescer's does.
type HotCalls struct {
	keys map[*hotKey]*loopKey
}

// hotInFlight is how many batches of one hot key a loop has out at once.
// Sent as soon as read, a key's calls left in small steps, one per pass:
// with 50 clients on one key, 8.5 µs of the six redis-servers' CPU per
// call, against 5.6 to 6.1 with one batch at a time, at the same
// throughput; 2 and 3 at a time gave 7.2 and 7.5-8.1, no faster.
const hotInFlight = 1

// loopKey is a hot key's calls on one loop.
type loopKey struct {
	out   int       // batches in flight
	ahead []*waiter // calls sent on, for the next batch before queue
	queue []*waiter // for the next batch
}

// viaBatch is a batch of a hot key's calls on a loop's pipes.
type viaBatch struct {
	via  Pipes
	hc   *HotCalls
	hk   *hotKey
	left int // calls not yet settled (or handed to the goroutine path)
}

// hotVia is where a round's hot calls go: its loop's pipes. While the
// round is being submitted (open), calls gather by key, so that each key's
// are one batch; after, a call sent on (to a sibling, or past a failed
// shard) joins its key's next batch.
type hotVia struct {
	pipes   Pipes
	open    bool
	batches []hotBatch
}

// hotBatch is a round's calls on one hot key.
type hotBatch struct {
	hk *hotKey
	ws []*waiter
}

func (v *hotVia) send(c *Cluster, hk *hotKey, w *waiter, ahead bool) {
	if !v.open {
		c.sendHotVia(v.pipes, hk, []*waiter{w}, ahead)
		return
	}
	for i := range v.batches {
		if b := &v.batches[i]; b.hk == hk {
			b.ws = append(b.ws, w)
			return
		}
	}
	v.batches = append(v.batches, hotBatch{hk: hk, ws: []*waiter{w}})
}

// close sends the round's batches.
func (v *hotVia) close(c *Cluster) {
	v.open = false
	for _, b := range v.batches {
		c.sendHotVia(v.pipes, b.hk, b.ws, false)
	}
	v.batches = nil
}

// sendHotVia sends ws on hk as a batch of its own when the loop has room
// for one, else queues them for hk's next batch (ahead: calls sent on,
// before those queued).
func (c *Cluster) sendHotVia(via Pipes, hk *hotKey, ws []*waiter, ahead bool) {
	hc := via.HotCalls()
	if hc.keys == nil {
		hc.keys = map[*hotKey]*loopKey{}
	}
	lk := hc.keys[hk]
	if lk == nil {
		lk = &loopKey{}
		hc.keys[hk] = lk
	}
	if lk.out >= hotInFlight {
		if ahead {
			lk.ahead = append(lk.ahead, ws...)
		} else {
			lk.queue = append(lk.queue, ws...)
		}
		return
	}
	lk.out++
	c.stepVia(&viaBatch{via: via, hc: hc, hk: hk, left: len(ws)}, ws)
}

// settled counts n of b's calls settled; the last one sends what queued
// on the key meanwhile.
func (c *Cluster) settled(b *viaBatch, n int) {
	if b.left -= n; b.left > 0 {
		return
	}
	lk := b.hc.keys[b.hk]
	lk.out--
	if len(lk.ahead)+len(lk.queue) == 0 {
		if lk.out == 0 {
			delete(b.hc.keys, b.hk)
		}
		return
	}
	ws := nextBatch(&lk.ahead, &lk.queue)
	lk.out++
	c.stepVia(&viaBatch{via: b.via, hc: b.hc, hk: b.hk, left: len(ws)}, ws)
}

// stepVia decides b's calls, batch, as step does, each group a step
// queued on the bucket pipe to its shard.
func (c *Cluster) stepVia(b *viaBatch, batch []*waiter) {
	groups, alone := c.groupHot(b.hk, batch, c.topo.Load())
	var pipes []*Pipe
	var owners []*shard
	var down, routed []*group
	n := len(alone)
	for _, g := range groups {
		g.vb = b
		switch {
		case g.owner == nil:
			// No slot map yet: the cluster client routes the step.
			routed = append(routed, g)
			continue
		case !g.owner.healthy.Load():
			// Failed since the call was placed.
			for _, w := range g.ws {
				w.err = errShardDown
			}
			down = append(down, g)
			n += len(g.ws)
			continue
		}
		p := b.via.BucketPipe(g.owner.addr)
		p.bq = append(p.bq, queued{hot: g})
		if !slices.Contains(pipes, p) {
			pipes, owners = append(pipes, p), append(owners, g.owner)
		}
	}
	for i, p := range pipes {
		c.pump(p, owners[i])
	}
	if len(routed) > 0 {
		c.againHot(nil, routed)
	}
	if n > 0 {
		thenAll(alone, down)
		c.settled(b, n)
	}
}

// settleVia reports g's calls, settled on the loop's pipe.
func (c *Cluster) settleVia(g *group) {
	thenAll(nil, []*group{g})
	c.settled(g.vb, len(g.ws))
}

// againHot decides hot groups a pipe could not (the node refused the
// script call, or a sub-bucket's slot moved; owner nil: no slot map yet)
// on the goroutine path, which loads the script and follows MOVED and
// ASK. Their calls go on there: they no longer run on the loop's
// goroutine, and the key's next batch on the loop does not wait for them,
// as the calls after a refused one on a pipe do not (rare: a pipe loads
// the script when it connects).
func (c *Cluster) againHot(owner *shard, gs []*group) {
	for _, g := range gs {
		for _, w := range g.ws {
			w.h.via = nil
		}
		c.settled(g.vb, len(g.ws))
	}
	go func() {
		cl := c.client.Load()
		if cl == nil {
			for _, g := range gs {
				for _, w := range g.ws {
					w.err = errShardDown
				}
			}
		} else {
			c.stepShard(owner, gs, *cl)
		}
		thenAll(nil, gs)
	}()
}
