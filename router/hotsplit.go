// A hot key's split over time: made, renewed and ended by the instance
// that found the key hot.

package router

import (
	"context"
	"errors"
	"math"
	"math/bits"
	"sync"
	"time"

	"github.com/redis/rueidis"
	"go.uber.org/zap"

	"github.com/sluice-rl/sluice/lua"
)

// tendHotKeys splits the keys found hot and renews their markers, cools
// those that stayed under the threshold for the cool-down, takes up the
// followed splits held through an outage of their parent's shard once it
// is back, and forgets followed splits that lapsed.
func (c *Cluster) tendHotKeys(ctx context.Context, now time.Time) {
	ns := now.UnixNano()
	topo := c.topo.Load()
	var wg sync.WaitGroup
	for _, hk := range *c.hot.keys.Load() {
		hk.rate.Store(math.Float64bits(c.hot.counter.Rate(hk.key, ns)))
		if !hk.detected.Load() {
			o := topo.ownerOf(hk.parent)
			switch st := hk.split.Load(); {
			case hk.held.Load():
				if (o == nil || o.healthy.Load()) && hk.renewing.CompareAndSwap(false, true) {
					wg.Go(func() { c.renew(ctx, hk) })
				}
			case st != nil && st.until > ns && st.until-ns <= int64(c.hot.ttl/4) && (o == nil || o.healthy.Load()) &&
				hk.renewing.CompareAndSwap(false, true):
				wg.Go(func() { c.reread(ctx, hk, st) })
			}
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
	// inForce, not live: a followed split that ran out during an outage
	// of its parent's shard is held, which only a call would otherwise
	// notice; forgotten first, the key would go to fallback until the
	// shard is back.
	c.hot.drop(func(hk *hotKey) bool { return hk.detected.Load() || hk.inForce(topo, ns) != nil })
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
	ttf, full := c.readTTF(ctx, *cl, topo, hk, st)
	if ttf < 0 {
		return // the split lapses at its last renewal's state
	}
	ctx, cancel := context.WithTimeout(ctx, c.cfg.Timeout)
	defer cancel()
	ended, err := c.splitter.End(ctx, c.nodeOr(topo.ownerOf(hk.parent), *cl), hk.parent, st.gen, ttf, full)
	if c.redirected([]error{err}) != nil {
		ended, err = c.splitter.End(ctx, *cl, hk.parent, st.gen, ttf, full)
	}
	if err != nil {
		c.log.Debug("hot key split not ended", zap.String("key", hk.key), zap.Error(err))
	}
	if ended {
		c.log.Log(hk.logLevel(), "hot key cooled: one bucket again when its split lapses", zap.String("key", hk.key),
			zap.Duration("lapses_in", time.Duration(max(st.until-time.Now().UnixNano(), 0))))
	}
}

// readTTF reads a split's sub-buckets in use (inUse) where they are
// decided now (a stand-in for one whose shard is down), within the
// backend timeout, and returns their time until full for the bucket the
// split lapses into and the fullest one's, each as throttle.lua sees it
// (never fuller than the base, a missing one at the base); -1 when none
// answers. The first is the mean over the sub-buckets of each limit the
// key was asked with, the emptiest of those means: a key asked with a
// limit held whole by the first sub-bucket and one split over all three
// lapses no fuller than the first, or the first limit gets back what the
// others' never taken tokens add to the mean (two thirds of it).
// Other instances' calls count too, which an estimate from this
// instance's own replies would miss. Each is read by a peek, so that its
// TAT is set against its own shard's clock in the script that reads it:
// against sluice's, a skew or the time the read waited on the shard
// would count a sub-bucket emptier or fuller than it is, and the split's
// next state (or the bucket it lapses into) with it. A peek's time until
// full is its TAT's distance from now whatever the limit: the smallest
// limit asks it.
func (c *Cluster) readTTF(ctx context.Context, client rueidis.Client, topo *topology, hk *hotKey, st *splitState) (mean, fullest time.Duration) {
	ctx, cancel := context.WithTimeout(ctx, c.cfg.Timeout)
	defer cancel()
	uses := hk.inUse(st)
	var calls []lua.Call
	var subs []int // the sub-bucket of each call
	for j := range bits.Len32(uses) {
		if k, _, _, ok := st.place(hk, j, topo); ok {
			calls = append(calls, lua.Call{Key: k, Capacity: 1, U: 1, V: 1, Base: st.base})
			subs = append(subs, j)
		}
	}
	if len(calls) == 0 {
		return -1, -1
	}
	res, errs := make([]lua.Result, len(calls)), make([]error, len(calls))
	c.throttle.Do(ctx, client, calls, res, errs)
	var sum, n int64
	emptiest, least := int64(-1), int64(math.MaxInt64)
	for i := range calls {
		// A sub-bucket whose shard is down is not read: the others tell.
		if errs[i] == nil {
			sum += res[i].ResetAfter
			least = min(least, res[i].ResetAfter)
			n++
		}
		// The last of a limit's sub-buckets: their mean is known.
		if uses>>subs[i]&1 == 1 && n > 0 {
			emptiest = max(emptiest, sum/n)
		}
	}
	if n == 0 {
		return -1, -1
	}
	return time.Duration(emptiest) * time.Microsecond, time.Duration(least) * time.Microsecond
}

// reread reads again the marker of a split hk follows, a quarter of its
// time before it ends (its maker renews it at half), and so extends it. A
// follower that waited for it to lapse would find it lapsed in the moment
// between a kill of the parent's primary and sluice seeing it, and then
// not be allowed to hold it through the outage (held needs the split live
// when the shard went down): its calls would all go to fallback. A peek
// on the parent, which writes nothing, answers the marker; any other
// answer (a different split, the bucket it lapsed into) is left to the
// next call, as before.
func (c *Cluster) reread(ctx context.Context, hk *hotKey, st *splitState) {
	defer hk.renewing.Store(false)
	p, cl := hk.parts.Load(), c.client.Load()
	if p == nil || cl == nil {
		return
	}
	owner := c.topo.Load().ownerOf(hk.parent)
	ctx, cancel := context.WithTimeout(ctx, c.cfg.Timeout)
	defer cancel()
	calls := []lua.Call{{Key: hk.parent, Capacity: p.whole.Capacity, U: p.whole.U, V: p.whole.V}}
	res, errs := make([]lua.Result, 1), make([]error, 1)
	sent := time.Now().UnixNano()
	c.throttle.Do(ctx, c.nodeOr(owner, *cl), calls, res, errs)
	if c.redirected(errs) != nil {
		c.throttle.Do(ctx, *cl, calls, res, errs)
	}
	se := lua.SplitOf(errs[0])
	switch {
	case se != nil:
		if cur := hk.split.Load(); cur != nil && cur.gen == st.gen {
			hk.extendSplit(cur, se.Split, sent)
		}
	default:
		c.failed(owner, errs[0])
	}
}

// renew writes hk's split marker, or extends it. A new split takes the
// current topology's first tags, as many as this instance splits a key
// into (no more than leave each sub-bucket the largest cost seen on the
// key); a live one keeps its own number, which its maker chose, as long as
// it leaves room for that cost. The first split keeps the bucket's state
// for the sub-buckets; a renewal records theirs, read from them. A split
// held through an outage of the parent's shard is taken up again as it
// was, if nothing replaced it meanwhile; an instance that did not make
// the split (hk not detected) does only that.
func (c *Cluster) renew(ctx context.Context, hk *hotKey) {
	defer hk.renewing.Store(false)
	topo, cl := c.topo.Load(), c.client.Load()
	if topo == nil || cl == nil {
		return
	}
	old := hk.split.Load()
	r := lua.Renewal{TTL: c.hot.ttl, TTF: -1}
	if hk.detected.Load() {
		r.Tags = topo.tags[:min(len(topo.tags), int(hk.maxParts.Load()))]
		r.N = min(topo.split, len(r.Tags))
	}
	if r.N < 2 {
		// Not a key this instance splits: it only takes up the split it
		// held.
		if old == nil || !hk.held.Load() {
			hk.held.Store(false)
			return
		}
		r.Tags, r.N = old.tags, -1
	}
	owner := topo.ownerOf(hk.parent)
	if owner != nil && !owner.healthy.Load() {
		return
	}
	held := hk.held.Load()
	if old != nil {
		r.Gen = old.gen
		var fullest time.Duration
		r.TTF, fullest = c.readTTF(ctx, *cl, topo, hk, old)
		r.Spread = r.TTF - fullest
	}
	// A time of its own: a sub-bucket's hung shard must not use it up and
	// get the parent's shard marked unhealthy.
	ctx, cancel := context.WithTimeout(ctx, c.cfg.Timeout)
	defer cancel()
	sent := time.Now().UnixNano()
	sp, err := c.splitter.Renew(ctx, c.nodeOr(owner, *cl), hk.parent, r)
	if c.redirected([]error{err}) != nil {
		sp, err = c.splitter.Renew(ctx, *cl, hk.parent, r)
	}
	switch {
	case err == nil:
	case errors.Is(err, lua.ErrNotSplit):
		// The split held through the outage lapsed for good, or another
		// replaced it: the parent's bucket tells.
		hk.split.Store(nil)
		hk.held.Store(false)
		return
	case c.failed(owner, err):
		return
	default:
		// The key holds something that is not a bucket, or its node
		// refused the write (OOM): leave it alone for a cool-down.
		hk.noSplit.Store(time.Now().Add(c.cfg.HotCooldown).UnixNano())
		hk.held.Store(false)
		c.log.Warn("hot key cannot be split", zap.String("key", hk.key), zap.Error(err))
		return
	}
	hk.setSplit(sp, sent)
	hk.held.Store(false)
	if r.N > 0 {
		hk.renewed.Store(&sp.Gen)
	}
	switch {
	case old == nil:
		c.log.Log(hk.logLevel(), "hot key split", zap.String("key", hk.key), zap.Int("sub_buckets", len(sp.Tags)),
			zap.Strings("tags", sp.Tags), zap.Float64("decisions_per_sec", hk.rateNow()))
	case held:
		c.log.Log(hk.logLevel(), "hot key split taken up after its parent's shard came back", zap.String("key", hk.key),
			zap.Bool("same_split", sp.Gen == old.gen))
	case sp.Gen != old.gen:
		// The split closed (a resharding moved a tag, a call needed fewer
		// sub-buckets) or lapsed and was replaced: the key is counted in
		// other sub-buckets, which the first line no longer tells.
		c.log.Log(hk.logLevel(), "hot key split anew", zap.String("key", hk.key), zap.Int("sub_buckets", len(sp.Tags)),
			zap.Strings("tags", sp.Tags), zap.Strings("previous_tags", old.tags), zap.Float64("decisions_per_sec", hk.rateNow()))
	}
}
