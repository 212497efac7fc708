package router

import (
	"cmp"
	"math"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluice-rl/sluice/router/glob"
	"go.uber.org/zap/zapcore"

	"github.com/sluice-rl/sluice/lua"
	"github.com/sluice-rl/sluice/router/bucket"
	"github.com/sluice-rl/sluice/router/hotkey"
	"github.com/sluice-rl/sluice/router/slot"
)

// MaxSplit is the most sub-buckets one hot key is split into.
const MaxSplit = lua.MaxTags

// maxHotKeys bounds the hot keys an instance tracks at once, its own and
// those it follows from another instance's split marker.
const maxHotKeys = 1024

// hotSet finds this instance's hot keys and remembers the splits it uses.
type hotSet struct {
	counter   *hotkey.Counter
	threshold float64 // decisions/s; <= 0 turns detection off
	patterns  []string
	ttl       time.Duration // of a split marker

	mu   sync.Mutex // serializes writers of keys
	keys atomic.Pointer[map[string]*hotKey]
}

// hotKey is one hot key: split by this instance (detected or declared),
// or followed from another instance's marker.
type hotKey struct {
	key      string
	parent   string // its bucket's Redis key
	declared bool   // matched a configured pattern

	detected atomic.Bool  // this instance splits it and renews the marker
	lastHot  atomic.Int64 // ns: last seen over the threshold (declared: last seen)
	rate     atomic.Uint64
	renewing atomic.Bool  // a split call is in flight
	noSplit  atomic.Int64 // ns: not split again before (its key is not a bucket)
	// maxParts is the most sub-buckets that leave every call seen on the
	// key its cost: a split never has more, so that one split's
	// sub-buckets serve every call.
	maxParts atomic.Int64

	split atomic.Pointer[splitState] // nil until the marker is known
	// renewed names the last split this instance renewed as a key it
	// found hot: once the key cools, INFO still tells that split, until
	// it lapses, from another instance's.
	renewed atomic.Pointer[string]
	// held: the split is in use past its end, because the parent's shard
	// was down when it was to be renewed; until the shard is back and the
	// split taken up again (or found replaced), no call goes to the parent.
	held  atomic.Bool
	next  atomic.Uint32              // round-robin over the sub-buckets
	parts atomic.Pointer[splitParts] // the last limit's sub-bucket limits
	batch coalescer                  // its calls in flight and queued
	deny  atomic.Pointer[denial]     // its last denial
}

// splitState is one reading of a split marker.
type splitState struct {
	tags  []string
	gen   string
	keys  []string // the sub-buckets' Redis keys
	slots []int
	base  string
	until int64 // ns: when this instance stops using it
	// seen is what this instance saw of the sub-buckets: shared by every
	// reading of one split, new with each split, so that a late answer
	// of an old split never lands in a new one's.
	seen *subSeen
}

// subSeen is what an instance saw of a split's sub-buckets.
type subSeen struct {
	fullAt [MaxSplit]atomic.Int64 // µs: when sub-bucket i was last seen to be full again
	// placed[i] is 1 + the sub-bucket on whose shard sub-bucket i was last
	// decided here (its own, or a sibling's for its stand-in), 0 before:
	// a move carries its state to the new place.
	placed [MaxSplit]atomic.Int32
	// uses has bit k-1 set once a call of this instance took from the
	// first k sub-buckets, as its limit's parts do: a key asked with
	// several limits is read for each (inUse).
	uses atomic.Uint32
}

// splitParts are a limit's sub-bucket limits, cached per hot key since a
// key is usually asked with one limit.
type splitParts struct {
	whole bucket.Interval
	n     int // the sub-buckets asked for: parts has 1 when iv cannot be split
	parts []bucket.Interval
}

func newHotSet(cfg ClusterConfig) *hotSet {
	h := &hotSet{
		counter:   hotkey.New(time.Second),
		threshold: cfg.HotThreshold,
		patterns:  cfg.HotKeys,
		ttl:       min(2*time.Second, cfg.HotCooldown),
	}
	h.keys.Store(&map[string]*hotKey{})
	return h
}

// observe counts a decision on key and returns its hot-key entry, or nil
// for an ordinary key. A key over the threshold (or declared) is marked
// detected: the background work splits it.
func (h *hotSet) observe(key string, now int64) *hotKey {
	hk := (*h.keys.Load())[key]
	// A tracked key is counted with detection off too: INFO's rate of it,
	// and which keys it lists as the busiest, come from the count.
	var n float64
	if h.threshold > 0 || hk != nil {
		n = h.counter.Add(key, now)
	}
	over := h.threshold > 0 && n >= h.threshold
	if hk == nil {
		declared := h.declared(key)
		if !over && !declared {
			return nil
		}
		if hk = h.add(key, declared); hk == nil {
			return nil
		}
	}
	if over || hk.declared {
		// One store a millisecond at most: every decision of a hot key
		// passes here.
		if hk.lastHot.Load() < now-int64(time.Millisecond) {
			hk.lastHot.Store(now)
		}
		if !hk.detected.Load() {
			hk.detected.Store(true)
		}
	}
	return hk
}

func (h *hotSet) declared(key string) bool {
	for _, p := range h.patterns {
		if glob.Match(key, p) {
			return true
		}
	}
	return false
}

// add returns key's entry, made if there is room.
func (h *hotSet) add(key string, declared bool) *hotKey {
	h.mu.Lock()
	defer h.mu.Unlock()
	old := *h.keys.Load()
	if hk := old[key]; hk != nil {
		return hk
	}
	if len(old) >= maxHotKeys {
		return nil
	}
	hk := newHotKey(key, declared)
	m := make(map[string]*hotKey, len(old)+1)
	for k, v := range old {
		m[k] = v
	}
	m[key] = hk
	h.keys.Store(&m)
	return hk
}

// follow records a split marker read at sent (ns) for key and returns
// key's entry; without room for it, an entry that only this call uses.
func (h *hotSet) follow(key string, sp lua.Split, sent int64) *hotKey {
	hk := (*h.keys.Load())[key]
	if hk == nil {
		if hk = h.add(key, false); hk == nil {
			hk = newHotKey(key, false)
		}
	}
	hk.setSplit(sp, sent)
	return hk
}

// drop forgets the entries keep rejects.
func (h *hotSet) drop(keep func(*hotKey) bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	old := *h.keys.Load()
	m := make(map[string]*hotKey, len(old))
	for k, v := range old {
		if keep(v) {
			m[k] = v
		}
	}
	if len(m) != len(old) {
		h.keys.Store(&m)
	}
}

// logLevel is that of hk's lines when it splits, cools or is taken up
// after an outage: a detected key's are news; a pattern of --hot-keys may
// match a key per user, each split when first asked and cooled when left,
// a line each at info.
func (hk *hotKey) logLevel() zapcore.Level {
	if hk.declared {
		return zapcore.DebugLevel
	}
	return zapcore.InfoLevel
}

func newHotKey(key string, declared bool) *hotKey {
	hk := &hotKey{key: key, parent: KeyPrefix + key, declared: declared}
	hk.maxParts.Store(MaxSplit)
	return hk
}

// forget drops key's entry: its bucket was reset.
func (h *hotSet) forget(key string) {
	if (*h.keys.Load())[key] == nil {
		return
	}
	h.drop(func(hk *hotKey) bool { return hk.key != key })
}

// setSplit records a marker read at sent (ns). The marker's time is
// counted from sent, before the shard read it, so this instance stops
// using the split no later than the shard does. A reading of an older
// split than the one in force, sent while that one held, is a late
// answer (replies on different connections can cross) and is dropped:
// the split it names ended before the one in force was made. One sent
// after the split in force ended is taken whatever its name, so that a
// shard whose clock went back (a failover) cannot leave its next split
// unfollowed.
func (hk *hotKey) setSplit(sp lua.Split, sent int64) {
	for {
		old := hk.split.Load()
		if old != nil && genBefore(sp.Gen, old.gen) && sent < old.until {
			return
		}
		if hk.split.CompareAndSwap(old, hk.reading(old, sp, sent)) {
			return
		}
	}
}

// genBefore reports whether split a was made before split b: a split is
// named by its shard's clock in ms, in hex without leading zeros.
func genBefore(a, b string) bool {
	return len(a) < len(b) || len(a) == len(b) && a < b
}

// extendSplit records a reading of the split in force, old, only if it is
// still in force: a reading answered late must not put back a split that
// was replaced meanwhile.
func (hk *hotKey) extendSplit(old *splitState, sp lua.Split, sent int64) {
	if old.gen == sp.Gen {
		hk.split.CompareAndSwap(old, hk.reading(old, sp, sent))
	}
}

// reading is the state of marker sp read at sent, after old.
func (hk *hotKey) reading(old *splitState, sp lua.Split, sent int64) *splitState {
	// A marker may hold until 2286 (13 digits of ms), past what sent +
	// TTL can hold in ns: such a split holds for good here, not for a
	// negative time, which would send its calls to the fallback.
	until := sent + int64(sp.TTL)
	if sp.TTL > 0 && until < sent {
		until = math.MaxInt64
	}
	st := &splitState{tags: sp.Tags, gen: sp.Gen, base: sp.Base, until: until}
	// Same name, other tags: a marker forged through passthrough (a
	// split's tags never change). Its sub-buckets are its own tags', or
	// one past the keys read before would be indexed.
	if old != nil && old.gen == sp.Gen && slices.Equal(old.tags, sp.Tags) {
		// A split's end on its shard only ever moves later: a reading
		// answered late must not bring it forward (a split ended early
		// here is not held through an outage of its parent's shard).
		st.until = max(st.until, old.until)
		st.keys, st.slots, st.seen = old.keys, old.slots, old.seen
		return st
	}
	for i, tag := range sp.Tags {
		st.keys = append(st.keys, sp.SubKey(i, hk.key))
		st.slots = append(st.slots, slot.Of("{"+tag+"}"))
	}
	st.seen = new(subSeen)
	return st
}

// live is the split in force at now (ns), or nil.
func (hk *hotKey) live(now int64) *splitState {
	if st := hk.split.Load(); st != nil && now < st.until {
		return st
	}
	return nil
}

// inForce is the split hk's calls use at now (ns): the live one, or one
// past its end that was live when the parent's shard went down (its
// renewals could not reach the marker), for as long as the outage lasts
// and until the split is taken up again. Its sub-buckets on healthy
// shards decide better than any fallback, and the parent's bucket cannot
// take from the key meanwhile. nil: none.
func (hk *hotKey) inForce(topo *topology, now int64) *splitState {
	st := hk.split.Load()
	switch {
	case st == nil:
		return nil
	case now < st.until || hk.held.Load():
		return st
	}
	if o := topo.ownerOf(hk.parent); o != nil && !o.healthy.Load() && st.until > o.downSince.Load() {
		hk.held.Store(true)
		return st
	}
	return nil
}

// place is where sub-bucket i of st is decided now: its own key when its
// shard is healthy, else its stand-in on the shard of the first sibling
// after it that is (every instance that sees the same shards down puts it
// in the same place), so that its share of the limit stays in the
// cluster. at is the sub-bucket whose shard that is; ok is false when
// none of the split's shards is healthy.
func (st *splitState) place(hk *hotKey, i int, topo *topology) (key string, owner *shard, at int, ok bool) {
	n := len(st.keys)
	for k := range n {
		j := (i + k) % n
		o := topo.owner(st.slots[j])
		if o != nil && !o.healthy.Load() {
			continue
		}
		if j == i {
			return st.keys[i], o, i, true
		}
		sp := lua.Split{Tags: st.tags, Gen: st.gen}
		return sp.StandInKey(i, j, hk.key), o, j, true
	}
	return "", nil, -1, false
}

// placeable reports whether any of st's sub-buckets can be decided now.
func (st *splitState) placeable(topo *topology) bool {
	for _, sl := range st.slots {
		if o := topo.owner(sl); o == nil || o.healthy.Load() {
			return true
		}
	}
	return false
}

// baseAt is the base of a step of sub-bucket i decided on sub-bucket at's
// shard: the split's, or, when i was last decided elsewhere, the state it
// was last seen in there, as a time from now (the shard's clock adds it),
// so that the move neither loses nor grants the tokens it had. now in µs.
// Every step carries it until one is answered there (the script writes a
// carried state, taken from or not): a failed step, or one still in
// flight, may not have carried it, and the key there, refilled or expired
// meanwhile, must not be taken as it is. Carrying twice is harmless,
// since a base only ever empties a bucket.
func (hk *hotKey) baseAt(st *splitState, i, at int, now int64) string {
	prev := st.seen.placed[i].Load()
	if prev == 0 || prev == int32(at+1) {
		return st.base
	}
	full := st.seen.fullAt[i].Load()
	if full == 0 {
		return st.base
	}
	return "+" + strconv.FormatInt(max(full-now, 0), 10)
}

// partsFor returns the sub-bucket limits for a call on iv: one per
// sub-bucket of the split, whatever the call's cost, since one key's
// sub-buckets must mean one thing to every call (a call costing more
// than its sub-bucket holds is denied). A limit smaller than the split
// uses its first C sub-buckets, one token each; one that cannot be split
// exactly is the whole limit on the first.
func (hk *hotKey) partsFor(st *splitState, iv bucket.Interval) []bucket.Interval {
	n := int(min(int64(len(st.tags)), iv.Capacity))
	if p := hk.parts.Load(); p != nil && p.whole == iv && p.n == n {
		return p.parts
	}
	parts, err := iv.Split(n)
	if err != nil {
		// Kept too: inUse reads it.
		parts = []bucket.Interval{iv}
	}
	hk.parts.Store(&splitParts{whole: iv, n: n, parts: parts})
	return parts
}

// inUse is which of st's sub-buckets the key's calls take from, as bit
// k-1 for the first k: those of each limit this instance asked st with
// (the first C of a limit of C tokens, fewer than the sub-buckets; only
// the first of one that cannot be split; else all of them); before any,
// the last limit's, or all of them. The others stay as they were made,
// at the base: read with the rest, they would count as tokens the key
// holds (a split of a limit of 100,000 tokens an hour, held whole by its
// first sub-bucket, lapsed two thirds full once that one was empty).
func (hk *hotKey) inUse(st *splitState) uint32 {
	if m := st.seen.uses.Load(); m != 0 {
		return m
	}
	if p := hk.parts.Load(); p != nil {
		return 1 << (len(hk.partsFor(st, p.whole)) - 1)
	}
	return 1 << (len(st.keys) - 1)
}

// use records a call on the first n sub-buckets. One store per number
// of them a split's calls use: every call of a hot key passes here.
func (s *subSeen) use(n int) {
	if bit := uint32(1) << (n - 1); s.uses.Load()&bit == 0 {
		s.uses.Or(bit)
	}
}

// seeCost records a call of cost on iv: the split keeps room for it. A
// cost over the capacity is denied split or not, so it asks for no room:
// counted, it would leave none (0 parts) and the key would never be split
// again.
func (hk *hotKey) seeCost(iv bucket.Interval, cost int64) {
	if cost > iv.Capacity {
		return
	}
	parts := iv.Capacity / max(cost, 1)
	for {
		old := hk.maxParts.Load()
		if parts >= old || hk.maxParts.CompareAndSwap(old, parts) {
			return
		}
	}
}

// tokens estimates sub-bucket i's whole tokens at now (µs), from when it
// was last seen to be full again; fill is the time a part takes to fill
// from empty, the same for every part. ok is false when it was never seen.
func (s *subSeen) tokens(i int, part bucket.Interval, fill, now int64) (n int64, ok bool) {
	at := s.fullAt[i].Load()
	if at == 0 {
		return 0, false
	}
	if at <= now {
		return part.Capacity, true
	}
	missing := math.Ceil(float64(part.Capacity) * float64(at-now) / float64(fill))
	return max(part.Capacity-int64(missing), 0), true
}

// splitTags picks n hash tags for the sub-buckets of a split: tag i on the
// i-th primary (mod their number) in slot order, the shortest tags first,
// so that every instance reading the same slot map picks the same tags.
func splitTags(t *topology, tags *slot.Tags, byLength []int, n int) []string {
	var primaries []*shard
	seen := map[*shard]int{}
	for sl := range slot.Count {
		if s := t.owner(sl); s != nil {
			if _, ok := seen[s]; !ok {
				seen[s] = len(primaries)
				primaries = append(primaries, s)
			}
		}
	}
	if len(primaries) == 0 || n < 1 {
		return nil
	}
	// Each primary's first n slots, the shortest tags first; then tag i
	// from the i-th primary in turn that still has one.
	slots := make([][]int, len(primaries))
	for _, sl := range byLength {
		if s := t.owner(sl); s != nil {
			if p := seen[s]; len(slots[p]) < n {
				slots[p] = append(slots[p], sl)
			}
		}
	}
	out := make([]string, 0, n)
	for round := 0; len(out) < n; round++ {
		took := false
		for p := range primaries {
			if len(out) < n && round < len(slots[p]) {
				out = append(out, tags[slots[p][round]])
				took = true
			}
		}
		if !took {
			break // fewer slots than sub-buckets wanted
		}
	}
	return out
}

// slotsByTagLength lists every slot, those with the shortest tags first.
func slotsByTagLength(tags *slot.Tags) []int {
	order := make([]int, slot.Count)
	for i := range order {
		order[i] = i
	}
	slices.SortFunc(order, func(a, b int) int {
		return cmp.Or(cmp.Compare(len(tags[a]), len(tags[b])), cmp.Compare(tags[a], tags[b]))
	})
	return order
}

func (hk *hotKey) rateNow() float64 { return math.Float64frombits(hk.rate.Load()) }
