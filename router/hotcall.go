package router

import (
	"context"
	"errors"
	"math/bits"
	"slices"
	"sync"
	"time"

	"github.com/redis/rueidis"

	"github.com/sluice-rl/sluice/lua"
	"github.com/sluice-rl/sluice/router/bucket"
)

// errShardDown answers a batched step whose shard went unhealthy while it
// waited.
var errShardDown = errors.New("router: shard unhealthy")

// hotCall is one Take on a split key, in flight on one sub-bucket.
type hotCall struct {
	req   int
	hk    *hotKey
	st    *splitState
	parts []bucket.Interval
	sub   int
	w     *waiter
	steps int
	// tried has bit j set once sub-bucket j denied the call.
	tried uint32
	// faulted: a step of the call met a failed shard and was sent on; a
	// second such goes to the fallback. Denials' steps (bounded by the
	// split) do not count against it: a call sent on to a sibling on a
	// hung shard is decided by that sibling's stand-in, not the fallback.
	faulted bool
	// prevSub is the sub-bucket that denied the call before its sibling's
	// step, or -1: its figures are counted, as of now, from what was seen
	// of it then.
	prevSub int
	// then is called with the call once each of its steps is done, on the
	// goroutine that ran the step: nothing waits for it.
	then func(*hotCall)
	// via, when not nil, sends the call's steps on an event loop's bucket
	// pipes, on whose goroutine the call then runs; nil: the coalescer.
	via *hotVia
}

// startHot queues request i on hk: on its sub-buckets when st is its
// live split, on its own bucket when st is nil (a key found hot and not
// yet split: its calls are batched already), and reports true; then is
// called as its steps are done. It reports false when it decided the
// request at once: denied from the key's last denial, or by fallback when
// no shard for it is healthy.
func (c *Cluster) startHot(i int, r *Request, hk *hotKey, st *splitState, topo *topology, reqs []Request, res []Result, then func(*hotCall), via *hotVia) bool {
	hk.seeCost(r.Interval, r.Cost)
	if st != nil {
		if parts := hk.partsFor(st, r.Interval); r.Cost > parts[len(parts)-1].Capacity && r.Cost <= r.Interval.Capacity {
			// The split is too fine for this call, whether it is denied
			// here or by a step: renewing it from here closes it, and
			// the next split leaves room for the cost.
			hk.lastHot.Store(time.Now().UnixNano())
			hk.detected.Store(true)
		}
		if out, ok := hk.denied(st, r); ok {
			res[i] = Result{Result: out}
			c.split.Add(1)
			c.deniedHere.Add(1)
			return false
		}
	}
	h := &hotCall{req: i, hk: hk, sub: -1, prevSub: -1, then: then, via: via}
	if h.follow(st, r) {
		if st.placeable(topo) {
			c.send(h, -1, r)
			return true
		}
	} else if o := topo.ownerOf(hk.parent); o == nil || o.healthy.Load() {
		c.send(h, -1, r)
		return true
	}
	c.fallbackHot(h, reqs[i:i+1], res[i:i+1])
	return false
}

// fallbackHot decides a split key's request by the fallback, its local
// bucket starting from the tokens the sub-buckets were last seen to hold,
// not full: when no shard can decide it (CLUSTERDOWN under full coverage),
// a key kept empty by its load would otherwise be granted its whole
// capacity again by every instance.
func (c *Cluster) fallbackHot(h *hotCall, reqs []Request, res []Result) {
	r := &reqs[0]
	if h.st != nil && r.Op == Take && c.cfg.Fallback == FallbackLocal {
		now := time.Now().UnixMicro()
		fill := fillTime(r.Interval)
		var have, capacity int64
		known := true
		for j, part := range h.parts {
			t, ok := h.st.seen.tokens(j, part, fill, now)
			known = known && ok
			have += t
			capacity += part.Capacity
		}
		if known && capacity > 0 && fill > 0 {
			// The share scales a bucket's tokens and rate alike, so its
			// time to full is the whole key's.
			c.local.start(r.Key, (now+mulDiv(capacity-have, fill, capacity))*1000)
		}
	}
	c.fallback(reqs, res)
}

// follow points h at split st (nil: at the key's own bucket) and reports
// whether it is a split.
func (h *hotCall) follow(st *splitState, r *Request) bool {
	h.st, h.steps, h.tried = st, 0, 0
	if st == nil {
		h.parts = []bucket.Interval{r.Interval}
		return false
	}
	h.parts = h.hk.partsFor(st, r.Interval)
	st.seen.use(len(h.parts))
	return true
}

// send queues h's next step: on sub-bucket j, or with j < 0 on the one
// the key's next batch goes to.
func (c *Cluster) send(h *hotCall, j int, r *Request) {
	// A call sent on (answered "split" by the key's own bucket, or on to
	// a sibling) came before the calls queued since: it goes ahead of
	// them, or a peek sent while the split was made would count a later
	// call's tokens as taken.
	ahead := h.w != nil
	h.steps++
	h.w = &waiter{st: h.st, parts: h.parts, cost: r.Cost, sub: j, then: func() { h.then(h) }, h: h}
	if v := h.via; v != nil {
		v.send(c, h.hk, h.w, ahead)
		return
	}
	c.submit(h.hk, h.w, ahead)
}

// advance takes a hot call's step that is done: it stores the whole
// bucket's outcome in res, or sends the call again (to a sibling, or to
// the split found meanwhile) and reports true.
func (c *Cluster) advance(h *hotCall, reqs []Request, res []Result, topo *topology) bool {
	r := &reqs[h.req]
	br, err := h.w.res, h.w.err
	h.sub = h.w.sub
	now := time.Now().UnixMicro()
	if h.st == nil {
		// A step on the key's own bucket.
		se := lua.SplitOf(err)
		switch {
		case se != nil:
			// Split meanwhile, here or by another instance.
			hk := c.hot.follow(r.Key, se.Split, h.w.sent)
			if h.hk = hk; h.follow(hk.live(h.w.sent), r) {
				c.send(h, -1, r)
				return true
			}
		case err == nil || !isFault(err):
			res[h.req] = Result{Result: br, Err: err}
			return false
		}
		c.fallback(reqs[h.req:h.req+1], res[h.req:h.req+1])
		return false
	}
	switch {
	case err == nil:
		// Times count from when the step was sent: it ran later, so the
		// sub-bucket is full (and has tokens) no sooner than this says,
		// which is the side a denial from it must err on.
		sent := h.w.sent / 1000
		// Into what was seen of the split the step was of: another
		// split's sub-bucket i is another bucket.
		h.w.st.seen.fullAt[h.sub].Store(sent + br.ResetAfter)
		h.w.st.seen.placed[h.sub].Store(int32(h.w.at + 1))
		if br.Limited {
			h.tried |= 1 << h.sub
		}
		// A burst decided together drains the sub-bucket it goes to and
		// the sibling its denials try next: one sibling only would leave
		// a third sub-bucket's tokens to the next burst, denying a third
		// of a split in three meanwhile.
		hops := len(h.parts)
		if h.faulted {
			hops++ // the step that met the fault is not a sub-bucket's try
		}
		if br.Limited && h.steps < hops {
			if j := h.sibling(r, now); j >= 0 {
				h.prevSub = h.sub
				c.send(h, j, r)
				return true
			}
		}
		out, known := h.logical(br, r, now)
		if out.Limited && out.RetryAfter > 0 && known && r.Cost > 0 && h.prevSub < 0 {
			h.hk.deny.Store(&denial{seen: h.st.seen, iv: r.Interval, cost: r.Cost, res: out, at: sent})
		}
		res[h.req] = Result{Result: out}
		c.split.Add(1)
		return false
	case !isFault(err):
		if lua.SplitOf(err) != nil {
			// No split's sub-bucket (nor stand-in) is ever split: a
			// marker there came through passthrough, and is not a bucket.
			err = lua.WrongType()
		}
		res[h.req] = Result{Err: err}
		return false
	}
	// The shard failed (the step marked it): the sub-bucket is decided
	// again where it is placed now, its stand-in on a sibling's shard;
	// had its place not moved (a redirect), the next sibling decides.
	if _, _, at, ok := h.st.place(h.hk, h.sub, topo); ok && !h.faulted {
		h.faulted = true
		j := h.sub
		if at == h.w.at {
			j = (h.sub + 1) % len(h.parts)
		}
		c.send(h, j, r)
		return true
	}
	c.fallbackHot(h, reqs[h.req:h.req+1], res[h.req:h.req+1])
	return false
}

// denial is a hot key's last denial, from which later calls are denied
// here until the soonest a sub-bucket can have their cost: the
// sub-buckets only lose tokens to other calls, never gain, so none could
// have been allowed.
type denial struct {
	// seen is the split's sub-buckets, as its state holds them: its name
	// alone does not tell them, since a marker forged through passthrough
	// may keep it with other tags, whose sub-buckets did not deny.
	seen *subSeen
	iv   bucket.Interval
	cost int64
	res  bucket.Result // the whole bucket's reply, at
	at   int64         // µs
}

// denied answers r without a step when the key's last denial says it
// must be denied: same split, same limit, at least that cost, before the
// soonest tokens and while the split holds or is held through an outage
// of the parent's shard (a reset elsewhere is seen when it lapses).
func (hk *hotKey) denied(st *splitState, r *Request) (bucket.Result, bool) {
	d := hk.deny.Load()
	if d == nil || d.seen != st.seen || d.iv != r.Interval || r.Cost < d.cost {
		return bucket.Result{}, false
	}
	now := time.Now().UnixMicro()
	gone := now - d.at
	if gone >= d.res.RetryAfter || (now >= st.until/1000 && !hk.held.Load()) {
		return bucket.Result{}, false
	}
	out := d.res
	out.RetryAfter -= gone
	out.ResetAfter = max(out.ResetAfter-gone, 0)
	// The sub-buckets as last seen (every one was, for a denial to be
	// kept): refilled since d, and taken from by cheaper calls, which
	// went on to the shards.
	parts, fill := hk.partsFor(st, r.Interval), fillTime(r.Interval)
	var have int64
	for j, part := range parts {
		t, _ := st.seen.tokens(j, part, fill, now)
		have += t
		out.ResetAfter = max(out.ResetAfter, st.seen.fullAt[j].Load()-now)
	}
	out.Remaining = min(have, r.Cost-1)
	if r.Cost > r.Interval.Capacity {
		out.RetryAfter = -1
	} else {
		// d's wait is for its own cost and the state it saw: a larger
		// cost, or sub-buckets emptied since, wait longer.
		wait := st.wait(parts, -1, r, now)
		if wait < 0 {
			wait = st.lapseWait(r, have, now)
		}
		out.RetryAfter = max(out.RetryAfter, wait)
	}
	return out, true
}

// wait is how long, in µs from now, until the soonest of st's sub-buckets
// but skip was seen to hold r's cost (at least 1); -1 when none was seen
// that can ever hold it.
func (st *splitState) wait(parts []bucket.Interval, skip int, r *Request, now int64) int64 {
	fill, out := fillTime(r.Interval), int64(-1)
	for j, part := range parts {
		at := st.seen.fullAt[j].Load()
		if j == skip || at == 0 || r.Cost > part.Capacity {
			continue
		}
		wait := max(at-now-mulDiv(part.Capacity-r.Cost, fill, part.Capacity), 1)
		if out < 0 || wait < out {
			out = wait
		}
	}
	return out
}

// lapseWait is how long, in µs from now, a call whose cost no sub-bucket
// of st can hold, but the whole bucket can, waits: until the split lapses
// (or past its end, while it is held) and the whole bucket, with remaining
// tokens now, has the cost; the next split leaves room for it.
func (st *splitState) lapseWait(r *Request, remaining, now int64) int64 {
	wait := st.until/1000 - now
	if short := r.Cost - remaining; short > 0 {
		wait = max(wait, mulDiv(short, fillTime(r.Interval), r.Interval.Capacity)+1)
	}
	return max(wait, 1)
}

// sibling is the sub-bucket not yet tried by h most likely to have the
// cost, and only when it seems to have it; -1 when none does. (One whose shard
// is down is decided by its stand-in.) Siblings' retries are batched like first calls, so under a
// sustained overload they cost a script a round trip, not one a call.
func (h *hotCall) sibling(r *Request, now int64) int {
	fill := fillTime(r.Interval)
	pick, best := -1, int64(-1)
	for j, part := range h.parts {
		if j == h.sub || h.tried&(1<<j) != 0 {
			continue
		}
		t, ok := h.st.seen.tokens(j, part, fill, now)
		if !ok {
			t = part.Capacity // never seen here: worth a try
		}
		if t >= max(r.Cost, 1) && t > best {
			pick, best = j, t
		}
	}
	return pick
}

// logical turns a sub-bucket's result into the whole bucket's: remaining
// over all sub-buckets (those not asked now estimated from when they were
// last seen), retry after from the soonest sibling, reset after from the
// last one to be full. known is false when some sub-bucket was never seen
// here, so that the figures are guesses.
func (h *hotCall) logical(br bucket.Result, r *Request, now int64) (out bucket.Result, known bool) {
	cost, fill := r.Cost, fillTime(r.Interval)
	out, known = br, true
	for j, part := range h.parts {
		if j == h.sub {
			continue
		}
		t, ok := h.st.seen.tokens(j, part, fill, now)
		if !ok {
			// Never seen here: as full as the one just asked was before
			// this call took its cost, which the sibling did not pay (a
			// fresh split of 10 in three, asked once, has 9 left, not 7).
			before := br.Remaining
			if !br.Limited {
				before += cost
			}
			out.Remaining += mulDiv(before, part.Capacity, h.parts[h.sub].Capacity)
			known = false
			continue
		}
		out.Remaining += t
		out.ResetAfter = max(out.ResetAfter, h.st.seen.fullAt[j].Load()-now)
	}
	if out.Limited {
		if wait := h.st.wait(h.parts, h.sub, r, now); wait >= 0 && (out.RetryAfter < 0 || wait < out.RetryAfter) {
			out.RetryAfter = wait
		}
		if out.RetryAfter < 0 && cost <= r.Interval.Capacity {
			// Too much for any sub-bucket, not for the bucket: possible
			// once the split closes and the next one leaves room for it.
			out.RetryAfter = h.st.lapseWait(r, out.Remaining, now)
		}
		// As one bucket would say: a denied call had fewer than its cost
		// (README: "fewer than the cost, nothing was taken"). The tokens
		// beyond are spread over sub-buckets none of which holds it.
		out.Remaining = min(out.Remaining, cost-1)
	}
	return out, known
}

// fillTime is how long iv's bucket takes to fill from empty, in µs; every
// part of a split takes the same.
func fillTime(iv bucket.Interval) int64 {
	return (iv.Capacity*iv.U + iv.V - 1) / iv.V
}

// mulDiv is a*b/c, rounded down, for 0 <= a, 0 <= b and 0 < c with a
// quotient below 2^63 (as when a <= c), without overflow: tokens x a fill
// time can pass 2^63 for limits in range (3 x 2^18 tokens at 50 an hour),
// while the quotient, at most a fill time, cannot.
func mulDiv(a, b, c int64) int64 {
	hi, lo := bits.Mul64(uint64(a), uint64(b))
	q, _ := bits.Div64(hi, lo, uint64(c))
	return int64(q)
}

// coalescer turns the concurrent calls on one hot key into one Lua step
// at a time: while a step is in flight, calls queue, and the next step
// decides them all, on the next sub-bucket round-robin (one script per
// run of calls of one limit and cost, in their order). A hot key then
// costs its shards a script per round trip, not per call, the scripts
// spread evenly over them; and it costs this process one write and one
// read.
type coalescer struct {
	mu    sync.Mutex // guards busy, ahead and queue
	busy  bool       // a flush goroutine is running
	ahead []*waiter  // calls sent on, before queue
	queue []*waiter
}

// waiter is one call queued on a coalescer.
type waiter struct {
	st    *splitState
	parts []bucket.Interval
	cost  int64
	sub   int    // the sub-bucket it must go to, or -1; then the one it went to
	at    int    // the sub-bucket on whose shard sub was decided (see place)
	sent  int64  // ns: when its step was sent
	then  func() // called once sub, sent, res and err are set
	res   bucket.Result
	err   error
	h     *hotCall // whose step it is
}

// submit queues w; the first call on an idle key starts the goroutine
// that flushes it until it is idle again.
func (c *Cluster) submit(hk *hotKey, w *waiter, ahead bool) {
	co := &hk.batch
	co.mu.Lock()
	if ahead {
		co.ahead = append(co.ahead, w)
	} else {
		co.queue = append(co.queue, w)
	}
	start := !co.busy
	co.busy = true
	co.mu.Unlock()
	if start {
		go c.flush(hk)
	}
}

func (c *Cluster) flush(hk *hotKey) {
	co := &hk.batch
	for {
		co.mu.Lock()
		batch := nextBatch(&co.ahead, &co.queue)
		if len(batch) == 0 {
			co.busy = false
			co.mu.Unlock()
			return
		}
		co.mu.Unlock()
		c.step(hk, batch)
	}
}

// nextBatch takes a key's next batch off the calls sent on (ahead) and
// those queued after them, in that order. It ends before a call on a
// split that follows one still headed for the key's own bucket: that one
// may be answered "split" and sent on, and must still be decided first.
func nextBatch(ahead, queue *[]*waiter) []*waiter {
	ws := *queue
	if len(*ahead) > 0 {
		ws = append(*ahead, ws...)
	}
	n := len(ws)
	if i := slices.IndexFunc(ws, func(w *waiter) bool { return w.st == nil }); i >= 0 {
		if j := slices.IndexFunc(ws[i:], func(w *waiter) bool { return w.st != nil }); j >= 0 {
			n = i + j
		}
	}
	*ahead, *queue = nil, nil
	if n < len(ws) {
		*queue = slices.Clip(ws[n:])
	}
	return ws[:n]
}

// group is waiters of one batch that share a sub-bucket, limit and cost
// with no call of another limit or cost on that sub-bucket between them,
// in their order.
type group struct {
	vb    *viaBatch // on a loop's pipes; nil: the coalescer's
	key   string
	base  string
	owner *shard
	iv    bucket.Interval
	cost  int64
	ws    []*waiter
}

// step decides one batch: the calls free to go anywhere on the next
// sub-bucket on a healthy shard, siblings' retries on theirs; one Lua call
// per group, each shard's pipelined, bounded by the backend timeout.
func (c *Cluster) step(hk *hotKey, batch []*waiter) {
	cl := c.client.Load()
	if cl == nil {
		for _, w := range batch {
			w.err = errShardDown
			w.then()
		}
		return
	}
	groups, alone := c.groupHot(hk, batch, c.topo.Load())
	perShard(groups, func(g **group) *shard { return (*g).owner }, func(owner *shard, idx []int) {
		gs := make([]*group, len(idx))
		for k, j := range idx {
			gs[k] = groups[j]
		}
		c.stepShard(owner, gs, *cl)
	})
	thenAll(alone, groups)
}

// thenAll reports a batch's calls: those decided without a script, then
// group by group, in the order the shards ran them, so that the last
// answer stored of a sub-bucket is its latest state, not that of an
// earlier group of another cost or limit.
func thenAll(alone []*waiter, groups []*group) {
	for _, w := range alone {
		w.then()
	}
	for _, g := range groups {
		for _, w := range g.ws {
			w.then()
		}
	}
}

// groupHot places batch's calls: each on its sub-bucket (the calls free
// to go anywhere on the next one, round-robin) and into the group of its
// bucket, limit and cost; alone are those no shard can decide (fallback).
func (c *Cluster) groupHot(hk *hotKey, batch []*waiter, topo *topology) (groups []*group, alone []*waiter) {
	// The sub-bucket of this batch's free calls, one per split and number
	// of parts (calls of other limits or costs may use fewer), round-robin.
	// A split is its seen, shared by its readings: calls answered "split"
	// each store one, and told apart, a batch's calls went to as many
	// sub-buckets, decided (on a loop's pipes, settled) in no order.
	type choice struct {
		seen   *subSeen
		n, sub int
	}
	var chosen []choice
	sent := time.Now().UnixNano()
	for _, w := range batch {
		w.sent = sent
		if w.st == nil {
			// The key's own bucket.
			groups = addTo(groups, w, hk.parent, "", topo.ownerOf(hk.parent), w.parts[0])
			continue
		}
		if w.sub < 0 {
			i := slices.IndexFunc(chosen, func(x choice) bool { return x.seen == w.st.seen && x.n == len(w.parts) })
			if i < 0 {
				chosen = append(chosen, choice{w.st.seen, len(w.parts), int(hk.next.Add(1) % uint32(len(w.parts)))})
				i = len(chosen) - 1
			}
			w.sub = chosen[i].sub
		}
		key, owner, at, ok := w.st.place(hk, w.sub, topo)
		if w.at = at; !ok {
			w.err = errShardDown // no shard of the split is healthy: fallback
			alone = append(alone, w)
			continue
		}
		// Whatever reading of its split w holds: readings of one split
		// share what was seen of it, and a step that moves a sub-bucket
		// without its state would grant it again.
		base := hk.baseAt(w.st, w.sub, at, sent/1000)
		groups = addTo(groups, w, key, base, owner, w.parts[w.sub])
	}
	return groups, alone
}

// addTo adds w to the group of its bucket, limit and cost when that is
// the bucket's last group: joining an earlier one would decide w before
// the calls of another limit or cost that came between, and a client's
// pipeline on one key must be decided in its order.
func addTo(groups []*group, w *waiter, key, base string, owner *shard, iv bucket.Interval) []*group {
	for _, g := range slices.Backward(groups) {
		if g.key != key {
			continue
		}
		if g.iv == iv && g.cost == w.cost {
			g.ws = append(g.ws, w)
			return groups
		}
		break
	}
	return append(groups, &group{key: key, base: base, owner: owner, iv: iv, cost: w.cost, ws: []*waiter{w}})
}

// stepShard runs one shard's groups as one pipeline.
func (c *Cluster) stepShard(owner *shard, gs []*group, client rueidis.Client) {
	if owner != nil && !owner.healthy.Load() {
		for _, g := range gs {
			for _, w := range g.ws {
				w.err = errShardDown
			}
		}
		return
	}
	calls := make([]lua.Call, len(gs))
	for i, g := range gs {
		calls[i] = g.call()
	}
	res, taken, errs := make([]lua.Result, len(calls)), make([]int64, len(calls)), make([]error, len(calls))
	ctx, cancel := context.WithTimeout(c.ctx, c.cfg.Timeout)
	c.throttle.DoBatch(ctx, c.nodeOr(owner, client), calls, res, taken, errs)
	if again := c.redirected(errs); len(again) > 0 {
		re := make([]lua.Call, len(again))
		for j, i := range again {
			re[j] = calls[i]
		}
		rres, rtaken, rerrs := make([]lua.Result, len(re)), make([]int64, len(re)), make([]error, len(re))
		c.throttle.DoBatch(ctx, client, re, rres, rtaken, rerrs)
		for j, i := range again {
			res[i], taken[i], errs[i] = rres[j], rtaken[j], rerrs[j]
		}
	}
	cancel()
	for i, g := range gs {
		c.store(g, res[i], taken[i], errs[i])
	}
}

// call is g's Lua step: its calls decided at once, in order.
func (g *group) call() lua.Call {
	cl := step(g.key, g.iv, g.cost)
	cl.Base, cl.N = g.base, int64(len(g.ws))
	return cl
}

// store gives g's waiters their outcomes from its step's.
func (c *Cluster) store(g *group, br lua.Result, taken int64, err error) {
	if err != nil {
		c.failed(g.owner, err)
		for _, w := range g.ws {
			w.err = err
		}
		return
	}
	g.spread(bucket.Result(br), taken)
}

// spread gives each waiter of g its own outcome from the batch's: the
// first k took their cost, each seeing the tokens the later ones then
// took; the rest were denied with the state the batch left.
func (g *group) spread(last bucket.Result, k int64) {
	for i, w := range g.ws {
		later := k - 1 - int64(i)
		if later < 0 {
			w.res = last
			continue
		}
		w.res = bucket.Result{
			Remaining:  last.Remaining + later*g.cost,
			RetryAfter: -1,
			// The later calls' refill time taken whole, not as many
			// times one call's rounded down: that drifts a µs a call.
			ResetAfter: max(last.ResetAfter-mulDiv(later*g.cost, g.iv.U, g.iv.V), 0),
		}
	}
}
