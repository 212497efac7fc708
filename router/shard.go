// The shard map and shard health: one reading of the slot map, each
// primary's state, the one classifier of call errors, and the probes.

package router

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/rueidis"
	"go.uber.org/zap"

	"github.com/sluice-rl/sluice/lua"
	"github.com/sluice-rl/sluice/router/slot"
)

// topologyEvery is how often the slot map is read again while nothing
// suggests it changed.
const topologyEvery = time.Second

// topologyEvery is ClusterConfig.TopologyInterval with its default.
func (c *Cluster) topologyEvery() time.Duration {
	if c.cfg.TopologyInterval > 0 {
		return c.cfg.TopologyInterval
	}
	return topologyEvery
}

// topology is one reading of the slot map.
type topology struct {
	// owners are each slot's primary, as an index into shards (0 for
	// none): 2 bytes a slot, 32 KiB, where pointers took 128 KiB. Every
	// command reads it at a slot of its own; profiles at -P 16 put 5 to 8%
	// of sluice's CPU on that one read of the larger table, missing the
	// caches the servers on the same cores share.
	owners [slot.Count]uint16
	shards []*shard
	// tags are the hash tags a hot key's sub-buckets may take, MaxSplit of
	// them, tag i on the i-th primary in turn: the first k of them are the
	// best k whatever k, so instances that want different numbers still
	// agree on the first ones.
	tags []string
	// split is how many of tags a split made here takes: --hot-split, or
	// one per primary.
	split int
	// replicas are each primary's replicas, by address, for forwarded
	// reads with ClusterConfig.ReadFromReplicas.
	replicas map[string][]string
	// primaries are the shards, by address: keyless commands go to one.
	primaries []*shard
	// lowest is each primary's lowest slot: a keyless command that needs
	// a primary goes to one by a slot of it (Forward.Primary).
	lowest map[*shard]int
	// gen counts the slot maps that moved a slot to another primary: a
	// command routed by an older one may be redirected, and overtaken by
	// one routed by this (Route).
	gen uint64
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
	// downSince is when it last became unhealthy (ns): a hot key's split
	// live then is held on to through the outage.
	downSince atomic.Int64
	out       shardQueue

	mu        sync.Mutex       // guards the fields below
	since     time.Time        // of the current state
	errors    int64            // faults seen since start
	kinds     map[string]int64 // of errors, by errorKind
	lastErr   string
	nextProbe time.Time
	backoff   time.Duration
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

// owner is slot sl's primary, nil without one. Index 0 is no owner
// whether or not shards holds its nil: a map in which no slot has an
// owner (a cluster not yet given its slots answers CLUSTER SLOTS with
// none) never called setOwners, and its shards is empty.
func (t *topology) owner(sl int) *shard {
	if t == nil {
		return nil
	}
	if i := t.owners[sl]; i != 0 {
		return t.shards[i]
	}
	return nil
}

// setOwners makes s the owner of slots lo to hi.
func (t *topology) setOwners(lo, hi int, s *shard) {
	if len(t.shards) == 0 {
		t.shards = []*shard{nil}
	}
	i := slices.Index(t.shards, s)
	if i < 0 {
		i = len(t.shards)
		t.shards = append(t.shards, s)
	}
	for sl := lo; sl <= hi; sl++ {
		t.owners[sl] = uint16(i)
	}
}

// sameOwners reports whether t and u give every slot the same primary.
func (t *topology) sameOwners(u *topology) bool {
	for sl := range slot.Count {
		if t.owner(sl) != u.owner(sl) {
			return false
		}
	}
	return true
}

// failed is the one classifier of a call's error: it reports whether err
// is s's failure, which the call's key must not wait for (fallback), after
// recording it: a redirect means sluice's slot map is behind, anything
// else marks s unhealthy. nil and answers for the caller (WRONGTYPE, a
// split) are not failures.
func (c *Cluster) failed(s *shard, err error) bool {
	if err == nil || !isFault(err) {
		return false
	}
	if isRedirect(err) {
		// The slot moved before sluice's map did: not the shard's fault.
		c.stale.Store(true)
	} else {
		c.fault(s, err)
	}
	return true
}

// errBackendTimeout is the cause of a call's context ending at the backend
// timeout: the shard's fault, as no other end of that context is.
var errBackendTimeout = errors.New("router: no reply within the backend timeout")

// errCallerGone stands for a call's context error when the caller's own
// context ended first (cancelled, or past a deadline of its own): the
// caller went away, which is no fault of the shard's.
var errCallerGone = fmt.Errorf("router: the caller went away: %w", context.Canceled)

// callerGone is err, or errCallerGone when err is the end of ctx (made by
// context.WithTimeoutCause with errBackendTimeout, and not yet cancelled)
// and the backend timeout is not what ended it. Called before ctx's
// cancel, which would read as the caller's.
func callerGone(ctx context.Context, err error) error {
	if err == nil || ctx.Err() == nil || errors.Is(context.Cause(ctx), errBackendTimeout) {
		return err
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return errCallerGone
	}
	return err
}

// isFault tells a shard's failure (it cannot decide now) from an error in
// the request itself, such as WRONGTYPE, which the caller must see.
func isFault(err error) bool {
	var se *lua.SplitError
	if errors.As(err, &se) {
		return false // an answer: the bucket is split
	}
	var le *lua.Error
	if errors.As(err, &le) {
		// One bucket's error in a many-bucket step.
		return le.IsClusterDown() || le.IsNotLocal() || le.IsTryAgain() || le.IsLoading() || le.IsBusy() ||
			strings.HasPrefix(le.Msg, "MASTERDOWN") || strings.HasPrefix(le.Msg, "READONLY")
	}
	re, ok := rueidis.IsRedisErr(err)
	if !ok {
		// Timeouts, EOF, refused and reset connections, a closing client.
		return true
	}
	// BUSY: a script or function runs past busy-reply-threshold, and
	// the node answers nothing else until it ends (or is killed).
	// WRONGPASS and NOAUTH: the node refused a new connection's
	// authentication (its password changed under sluice); no call of
	// sluice's answers them otherwise, and they are not the caller's.
	return re.IsClusterDown() || re.IsTryAgain() || re.IsLoading() || isRedirect(err) ||
		strings.HasPrefix(re.Error(), "BUSY ") || strings.HasPrefix(re.Error(), "MASTERDOWN") || strings.HasPrefix(re.Error(), "READONLY") ||
		isAuthRefused(re.Error())
}

// isAuthRefused reports a node's refusal of sluice's credentials.
func isAuthRefused(msg string) bool {
	return strings.HasPrefix(msg, "WRONGPASS") || strings.HasPrefix(msg, "NOAUTH")
}

// redirected is the indexes of errs that are a MOVED or an ASK, which a
// shard's own node client does not follow. The node ran nothing for
// them: they go again through the cluster client, which follows them
// (ASKING first), as a cluster client does. An ASK lasts as long as the
// resharding of its slot, which sluice's slot map does not show (the slot
// is the old owner's until it ends): without this the calls would fail,
// or go to the fallback, that long. A MOVED also asks for the slot map.
func (c *Cluster) redirected(errs []error) []int {
	var idx []int
	for i, err := range errs {
		if isRedirect(err) {
			idx = append(idx, i)
		}
	}
	if len(idx) > 0 {
		c.stale.Store(true)
	}
	return idx
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

// errorKind names the kind of a shard's fault for metrics: a bounded set,
// never the message itself.
func errorKind(err error) string {
	var ne net.Error
	switch msg := err.Error(); {
	case errors.Is(err, context.DeadlineExceeded), errors.As(err, &ne) && ne.Timeout(), strings.Contains(msg, "within the timeout"):
		return "timeout"
	case strings.Contains(msg, "CLUSTERDOWN"), strings.Contains(msg, "cluster is down"):
		return "clusterdown"
	case strings.Contains(msg, "TRYAGAIN"):
		return "tryagain"
	case strings.Contains(msg, "LOADING"):
		return "loading"
	case strings.Contains(msg, "BUSY "):
		return "busy"
	case strings.Contains(msg, "MASTERDOWN"), strings.Contains(msg, "READONLY"):
		return "replica"
	case strings.Contains(msg, "non local key"), strings.Contains(msg, "MOVED"), strings.Contains(msg, "ASK "):
		return "redirect"
	case isAuthRefused(msg):
		return "auth"
	case errors.As(err, &ne), errors.Is(err, io.EOF), strings.Contains(msg, "connection"), strings.Contains(msg, "closed"):
		return "connection"
	}
	return "other"
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
	err = c.noReply(err)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.errors++
	if s.kinds == nil {
		s.kinds = map[string]int64{}
	}
	s.kinds[errorKind(err)]++
	s.lastErr = err.Error()
	now := time.Now()
	if s.healthy.Load() {
		// Before it reads unhealthy: a split that ran out before now is
		// never held on to (see hotKey.inForce).
		s.downSince.Store(now.UnixNano())
	}
	if !s.healthy.Swap(false) {
		return
	}
	s.since = now
	s.backoff = c.cfg.ProbeInterval
	s.nextProbe = s.since.Add(s.backoff)
	c.log.Warn("shard unhealthy: deciding its keys by fallback", zap.String("shard", s.addr),
		zap.String("fallback", c.cfg.Fallback.String()), zap.Error(err))
}

// noReply is err as a shard's error: the goroutine path's deadline (a
// call's or a probe's, both the backend timeout), in the loops' words,
// with the timeout. A dial's timeout, which errors.Is takes for a
// context's, had its own bound, and names its address.
func (c *Cluster) noReply(err error) error {
	if errors.Is(err, context.DeadlineExceeded) && !errors.As(err, new(*net.OpError)) {
		return fmt.Errorf("no reply within the timeout (%v)", c.cfg.Timeout)
	}
	return err
}

// maxForgotten bounds Cluster.forgotten.
const maxForgotten = 256

// faults are what a forgotten shard's counters held.
type faults struct {
	errors  int64
	kinds   map[string]int64
	lastErr string
	at      time.Time // when it was forgotten
}

// forget keeps s's counters for when its address is a primary again,
// dropping the longest forgotten past maxForgotten. c.mu is held.
func (c *Cluster) forget(s *shard) {
	s.mu.Lock()
	c.forgotten[s.addr] = faults{s.errors, maps.Clone(s.kinds), s.lastErr, time.Now()}
	down := time.Since(s.since)
	s.mu.Unlock()
	if !s.healthy.Load() {
		// Its "healthy again" never comes: this is the end of the outage
		// it logged, for its keys.
		c.log.Info("unhealthy shard no longer owns slots: its keys are decided by their new primary",
			zap.String("shard", s.addr), zap.Duration("after", down))
	}
	for len(c.forgotten) > maxForgotten {
		oldest := ""
		for addr, f := range c.forgotten {
			if oldest == "" || f.at.Before(c.forgotten[oldest].at) {
				oldest = addr
			}
		}
		delete(c.forgotten, oldest)
	}
}

// refreshTopology reads CLUSTER SLOTS and points every slot at its
// primary's shard. A shard new to this instance starts healthy.
func (c *Cluster) refreshTopology(ctx context.Context) {
	client := *c.client.Load()
	ctx, cancel := context.WithTimeout(ctx, 4*c.cfg.Timeout+100*time.Millisecond)
	defer cancel()
	nodes := client.Nodes()
	down := map[string]bool{}
	c.mu.Lock()
	for addr, s := range c.shards {
		if !s.healthy.Load() {
			down[addr] = true
		}
	}
	c.mu.Unlock()
	topo := c.topo.Load()
	ranges, from, err := readSlots(ctx, client, nodes, func(addr string) bool { return !topo.gone(addr) }, down, c.cfg.Timeout)
	if err != nil {
		c.stale.Store(true)
		return
	}
	var gone []net.Conn
	defer func() { // after c.mu is let go
		for _, conn := range gone {
			conn.Close()
		}
	}()
	// A node without an endpoint (a null one: the cluster's
	// cluster-preferred-endpoint-type is unknown-endpoint) is reached at
	// the host that answered, on its own port, as Redis's CLUSTER SLOTS
	// documents and cluster clients do: ":port" would dial this host.
	fromHost, _, _ := net.SplitHostPort(from)
	t := &topology{replicas: map[string][]string{}, lowest: map[*shard]int{}}
	owning := map[*shard]bool{}
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, rg := range ranges {
		v, lo, hi, ok := slotRange(rg)
		if !ok {
			continue
		}
		node, err := v[2].ToArray()
		if err != nil || len(node) < 2 {
			continue
		}
		host, _ := node[0].ToString()
		if host == "" {
			host = fromHost
		}
		port, _ := node[1].AsInt64()
		addr := net.JoinHostPort(host, strconv.FormatInt(port, 10))
		s := c.shards[addr]
		if s == nil {
			s = &shard{addr: addr, since: time.Now()}
			s.healthy.Store(true)
			if old, ok := c.forgotten[addr]; ok {
				s.errors, s.kinds, s.lastErr = old.errors, old.kinds, old.lastErr
				delete(c.forgotten, addr)
			}
			c.shards[addr] = s
		}
		s.probe = probePrefix + "{" + c.tags[lo] + "}"
		if n, ok := nodes[addr]; ok {
			s.node.Store(&n)
		} else {
			s.node.Store(nil)
		}
		owning[s] = true
		if at, ok := t.lowest[s]; !ok || int(lo) < at {
			t.lowest[s] = int(lo)
		}
		if len(t.replicas[addr]) == 0 {
			for _, r := range v[3:] {
				if rn, err := r.ToArray(); err == nil && len(rn) >= 2 {
					rh, _ := rn[0].ToString()
					if rh == "" {
						rh = fromHost
					}
					rp, _ := rn[1].AsInt64()
					t.replicas[addr] = append(t.replicas[addr], net.JoinHostPort(rh, strconv.FormatInt(rp, 10)))
				}
			}
		}
		t.setOwners(int(lo), int(hi), s)
	}
	// A primary that lost its slots (failed over, or moved away) is
	// forgotten; if it comes back as a primary it starts healthy, with the
	// faults it had.
	for addr, s := range c.shards {
		if !owning[s] {
			delete(c.shards, addr)
			c.forget(s)
		}
	}
	for s := range owning {
		t.primaries = append(t.primaries, s)
	}
	slices.SortFunc(t.primaries, func(a, b *shard) int { return strings.Compare(a.addr, b.addr) })
	t.tags = splitTags(t, c.tags, c.byLength, MaxSplit)
	t.split = c.cfg.HotSplit
	if t.split <= 0 {
		t.split = len(owning)
	}
	t.split = min(t.split, len(t.tags))
	if old := c.topo.Load(); old != nil {
		t.gen = old.gen
		if !old.sameOwners(t) {
			t.gen++
			// A slot changed owner (a replica promoted): the cluster may
			// be whole again, so the shards that failed with it (a
			// cluster down answers every key CLUSTERDOWN) are probed one
			// first backoff after their last probe (nextProbe - backoff),
			// not after the one the outage grew (up to 8 intervals). Not
			// sooner: maps that change at every reading (a resharding)
			// would have a hung primary probed, and waited for, at every
			// tick.
			for s := range owning {
				s.mu.Lock()
				if !s.healthy.Load() {
					last := s.nextProbe.Add(-s.backoff)
					s.backoff = c.cfg.ProbeInterval
					s.nextProbe = last.Add(s.backoff)
				}
				s.mu.Unlock()
			}
		}
	}
	c.topo.Store(t)
	gone = c.dropGone(t)
}

// Route points each of cmds at its slot's primary now (Forward.Addr), by
// one slot map, and returns that map's generation, which changes when a
// map moves a slot to another primary.
func (c *Cluster) Route(cmds []Forward) uint64 {
	t := c.topo.Load()
	if t == nil {
		return 0
	}
	for i := range cmds {
		if cmds[i].Slot != AnySlot {
			cmds[i].Addr = c.addrOf(t, cmds[i].Slot)
		}
	}
	return t.gen
}

// SlotMap is one of the cluster's slot maps, as Map read it: a round of
// bucket calls is routed by the map its takes were checked against
// (SubmitVia), not by one read later.
type SlotMap struct{ t *topology }

// Map is the slot map now.
func (c *Cluster) Map() SlotMap { return SlotMap{c.topo.Load()} }

// Gen is m's generation, as Route returns it: 0 before any map.
func (m SlotMap) Gen() uint64 {
	if m.t == nil {
		return 0
	}
	return m.t.gen
}

// Gone reports whether m, a map that names primaries, names the node at
// addr neither as a primary nor as a replica: sluice's connections to it
// are no longer needed. False before any map, and for one that names
// nothing (a cluster forming).
func (m SlotMap) Gone(addr string) bool { return m.t.gone(addr) }

func (t *topology) gone(addr string) bool {
	if t == nil || len(t.primaries) == 0 {
		return false
	}
	for _, s := range t.primaries {
		if s.addr == addr {
			return false
		}
	}
	for _, rs := range t.replicas {
		if slices.Contains(rs, addr) {
			return false
		}
	}
	return true
}

// readSlots reads CLUSTER SLOTS from one of nodes (the cluster client's,
// by address), picked as the cluster client picks one for a keyless
// command, the next if it fails, and reports the address it came from:
// the one its null endpoints stand for. The nodes the last map named
// (named; nil: every node) are asked first: the cluster client keeps a
// node taken out of the cluster until its own next refresh, and its
// address may by then be another cluster's node, whose whole map would
// be taken for this one's, sending keys to the wrong cluster. The nodes
// in down are asked after the others, and each node but the last asked has each to answer: a hung
// node (its socket open, never answering) would otherwise hold the whole
// of ctx, and the loop that probes and renews hot keys with it.
// The last keeps what is left of ctx, so a cluster slow to answer every
// node is still read, unless a map was read already. Without nodes the
// cluster client asks, and from is empty.
func readSlots(ctx context.Context, client rueidis.Client, nodes map[string]rueidis.Client, named func(addr string) bool, down map[string]bool, each time.Duration) (ranges []rueidis.RedisMessage, from string, err error) {
	if len(nodes) == 0 {
		ranges, err = client.Do(ctx, client.B().ClusterSlots().Build()).ToArray()
		return ranges, "", err
	}
	order := make([]string, 0, len(nodes))
	for _, ask := range []func(addr string) bool{
		func(addr string) bool { return !down[addr] && (named == nil || named(addr)) },
		func(addr string) bool { return !down[addr] && named != nil && !named(addr) },
		func(addr string) bool { return down[addr] },
	} {
		for addr := range nodes {
			if ask(addr) {
				order = append(order, addr)
			}
		}
	}
	var failed error
	var best []rueidis.RedisMessage
	bestFrom, bestCovered := "", -1
	for i, addr := range order {
		if bestCovered > 0 && down[addr] {
			// A map is read: an unhealthy node (a hung one) is not waited
			// for in the hope of a more whole one.
			break
		}
		n, actx, cancel := nodes[addr], ctx, context.CancelFunc(func() {})
		if i < len(order)-1 || bestCovered >= 0 {
			actx, cancel = context.WithTimeout(ctx, each)
		}
		// rueidis holds a call to a node another call is redialing until
		// that dial ends (1s, on no deadline), whatever this one's: a
		// node that hangs unknown to be down would hold the loop.
		answer := make(chan rueidis.RedisResult, 1)
		cmd := n.B().ClusterSlots().Build()
		go func() { answer <- n.Do(actx, cmd) }()
		select {
		case r := <-answer:
			ranges, err = r.ToArray()
		case <-actx.Done():
			ranges, err = nil, actx.Err()
		}
		cancel()
		if err == nil {
			// A map that leaves slots out may be one node's view of a
			// moment, not the cluster's: one that hears a primary call
			// itself a replica (a failover) drops its slots until the new
			// primary's claim comes, and a node taken out of the cluster
			// (del-node resets it, it runs on) owns no slot and knows no
			// other node, yet stays among the cluster client's nodes. The
			// others are asked; the most whole map is believed, an empty
			// one only when no node failed (one that failed may hold the
			// map).
			covered := slotsCovered(ranges)
			if covered > bestCovered {
				best, bestFrom, bestCovered = ranges, addr, covered
			}
			if covered == slot.Count || ctx.Err() != nil {
				break
			}
			continue
		}
		if ctx.Err() != nil {
			if bestCovered < 0 {
				return nil, addr, err
			}
			break
		}
		failed = err
	}
	if bestCovered > 0 || (bestCovered == 0 && failed == nil) {
		return best, bestFrom, nil
	}
	return nil, "", failed
}

// slotsCovered is how many slots a CLUSTER SLOTS reply gives an owner.
func slotsCovered(ranges []rueidis.RedisMessage) int {
	n := 0
	for _, rg := range ranges {
		if _, lo, hi, ok := slotRange(rg); ok {
			n += int(hi - lo + 1)
		}
	}
	return n
}

// slotRange reads one range of a CLUSTER SLOTS reply: its elements (the
// owner's at 2, then its replicas'), and its first and last slot.
func slotRange(rg rueidis.RedisMessage) (v []rueidis.RedisMessage, lo, hi int64, ok bool) {
	v, err := rg.ToArray()
	if err != nil || len(v) < 3 {
		return nil, 0, 0, false
	}
	lo, err1 := v[0].AsInt64()
	hi, err2 := v[1].AsInt64()
	return v, lo, hi, err1 == nil && err2 == nil && 0 <= lo && lo <= hi && hi < slot.Count
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

// ownersHealthy reports whether every shard that owns slots in the slot
// map is healthy: a failed primary that a replica replaced may stay
// unhealthy for long (killed, or a replica now), and owns nothing.
func (c *Cluster) ownersHealthy() bool {
	t := c.topo.Load()
	if t == nil {
		return false
	}
	for _, s := range t.shards {
		if s != nil && !s.healthy.Load() {
			return false
		}
	}
	return true
}

// probe sends one cheap keyed command (EXISTS of a key in one of its
// slots) to each unhealthy shard whose probe is due: to its node itself,
// as sluice's slot map names it, else through the cluster client by the
// key's slot. A promoted replica needs none: the slot map that shows it
// makes it a shard of its own, healthy, and forgets the one it replaced.
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
	type probed struct {
		i   int
		err error
	}
	answers := make(chan probed, len(due))
	for i, s := range due {
		to := client
		if n := s.node.Load(); n != nil {
			to = *n
		}
		// Built here: a probe left behind may still run when the slot map
		// next changes s.probe.
		cmd := to.B().Exists().Key(s.probe).Build()
		go func() { answers <- probed{i, to.Do(ctx, cmd).Error()} }()
	}
	// rueidis holds a call to a node it is redialing until the dial ends,
	// on its own dial timeout (1s), whatever the call's deadline; a hung
	// node is redialed again after each failure. A probe not answered
	// within the deadline has failed, and the loop moves on.
	errs := make([]error, len(due))
	for i := range errs {
		errs[i] = context.DeadlineExceeded
	}
wait:
	for range due {
		select {
		case a := <-answers:
			errs[a.i] = a.err
		case <-ctx.Done():
			break wait
		}
	}
	for i, s := range due {
		s.mu.Lock()
		// An error that is no fault (NOPERM, of a cluster user allowed
		// only the buckets' keys) is the shard answering: healthy.
		if err := errs[i]; err != nil && isFault(err) {
			s.lastErr = c.noReply(err).Error()
			s.backoff = min(2*s.backoff, 8*c.cfg.ProbeInterval)
			s.nextProbe = time.Now().Add(s.backoff)
			c.stale.Store(true)
		} else {
			down := time.Since(s.since)
			s.since = time.Now()
			s.healthy.Store(true)
			c.log.Info("shard healthy again: deciding its keys in the cluster", zap.String("shard", s.addr), zap.Duration("after", down))
		}
		s.mu.Unlock()
	}
}

// releaseFallback lets the outage's fallback buckets go once every primary
// that owns slots decides its keys again, each as it is full (they are
// swept only by the decisions they take, which no longer come). One not
// yet full is kept for the next outage: a shard that flaps would
// otherwise grant each key a fresh share of its limit at every failure.
func (c *Cluster) releaseFallback() {
	if c.local.Len() > 0 && c.ownersHealthy() {
		c.local.settle(c.local.now())
	}
}
