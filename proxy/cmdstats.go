package proxy

import (
	"fmt"
	"maps"
	"math/bits"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
)

// cmdStat is one command's line of INFO commandstats, and of
// latencystats, and its count of sluice_passthrough_commands_total.
type cmdStat struct {
	calls, rejected, failed atomic.Int64
	ns                      atomic.Int64 // usec, in ns
	lat                     atomic.Pointer[latencies]
	// forwarded counts it sent to the cluster: a Prometheus counter,
	// which CONFIG RESETSTAT leaves as it is (a counter never goes back).
	forwarded atomic.Int64
}

// commandStats are INFO commandstats' counts, by the command's name as
// Redis names it (lower case, a subcommand as "client|list"). The names
// come from sluice's command table and the cluster's, never from what a
// client sends: an unknown command is counted nowhere, as in Redis.
type commandStats struct {
	by cowMap[string, cmdStat]
}

func (cs *commandStats) of(name string) *cmdStat {
	return cs.by.of(name, 0, newCmdStat)
}

func newCmdStat(string) *cmdStat { return new(cmdStat) }

// cowMap is a map every command reads and that gets a new key a few
// hundred times at most: it is copied on write, so that a read shares no
// lock, whose cache line every loop's CPU would take in turn.
type cowMap[K comparable, V any] struct {
	mu sync.Mutex // held to add a key
	by atomic.Pointer[map[K]*V]
}

// of is k's value, made by mk on first use. Past limit keys (0: none),
// the map starts again empty: the keys come and go (the specs of a
// command table read again), and those still used are made again.
func (m *cowMap[K, V]) of(k K, limit int, mk func(K) *V) *V {
	if by := m.by.Load(); by != nil {
		if v := (*by)[k]; v != nil {
			return v
		}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	var old map[K]*V
	if by := m.by.Load(); by != nil {
		old = *by
	}
	if v := old[k]; v != nil {
		return v
	}
	if limit > 0 && len(old) >= limit {
		old = nil
	}
	by := maps.Clone(old)
	if by == nil {
		by = map[K]*V{}
	}
	v := mk(k)
	by[k] = v
	m.by.Store(&by)
	return v
}

// all is every key's value.
func (m *cowMap[K, V]) all() map[K]*V {
	if by := m.by.Load(); by != nil {
		return *by
	}
	return nil
}

// all is every name's counts, for INFO.
func (cs *commandStats) all() map[string]*cmdStat {
	return cs.by.all()
}

// reset zeroes every command's counts in place and drops its latencies,
// as Redis's resetCommandTableStats: a command in flight keeps its line
// (slot.stat), and counts in it once answered.
func (cs *commandStats) reset() {
	for _, st := range cs.all() {
		st.calls.Store(0)
		st.rejected.Store(0)
		st.failed.Store(0)
		st.ns.Store(0)
		st.lat.Store(nil)
	}
}

// write renders INFO's commandstats, as Redis: a line for each command
// called or refused at least once (since CONFIG RESETSTAT), here in name
// order.
func (cs *commandStats) write(b *strings.Builder) {
	by := cs.all()
	for _, name := range slices.Sorted(maps.Keys(by)) {
		st := by[name]
		calls, usec := st.calls.Load(), st.ns.Load()/1000
		if calls == 0 && st.rejected.Load() == 0 && st.failed.Load() == 0 {
			continue
		}
		perCall := 0.0
		if calls > 0 {
			perCall = float64(usec) / float64(calls)
		}
		fmt.Fprintf(b, "cmdstat_%s:calls=%d,usec=%d,usec_per_call=%.2f,rejected_calls=%d,failed_calls=%d\r\n",
			infoSafe(name), calls, usec, perCall, st.rejected.Load(), st.failed.Load())
	}
}

// counted counts the command take just took from c, whose queue, replies
// and held replies were q0, out0 and held0 long before it. One answered
// now counts at once; one that waits for its answer (a decision, a node's
// reply) counts when it is answered (answered).
func (s *Server) counted(c *client, at int64, q0, out0, held0 int) {
	name := c.named
	if name == nil || c.queued {
		return
	}
	st := c.stat
	if st == nil {
		st = s.cmdStats.of(*name)
	}
	if c.refused {
		st.rejected.Add(1)
		return
	}
	if n := len(c.q); n > q0 && c.q[n-1].state == slotWaiting {
		c.q[n-1].stat, c.q[n-1].at = st, at
		if *name == "config|resetstat" {
			// What c sent after it waits until it is answered: counted
			// meanwhile (a PING answered at once, a refusal, a decision)
			// the reset would drop it, and a pipelined INFO would show
			// the counts from before.
			c.q[n-1].resets, c.drainFirst = true, true
		}
		return
	}
	reply := c.out.b[min(out0, len(c.out.b)):]
	if len(c.q) > q0 {
		reply = c.held.b[min(held0, len(c.held.b)):]
	}
	// Answered as it was read: no time of sluice's own is counted.
	st.answered(at, at, len(reply) > 0 && reply[0] == '-')
}

// answered counts a command read at at whose answer came now (ns).
func (st *cmdStat) answered(at, now int64, failed bool) {
	d := max(now-at, 0)
	st.ns.Add(d)
	lat := st.lat.Load()
	if lat == nil {
		// Made on a command's first answer: most of the table's commands
		// are never sent.
		st.lat.CompareAndSwap(nil, new(latencies))
		lat = st.lat.Load()
	}
	lat.record(d)
	st.calls.Add(1)
	if failed {
		st.failed.Add(1)
	}
}

// latencies count a command's answer times for INFO latencystats, in
// buckets of a log-linear scale over ns: exact below 16 ns, then 16 to
// each power of two, so a percentile is within 1/16 of the time (Redis's
// HDR histogram keeps 2 significant digits), in 8 KiB a command.
type latencies struct {
	counts [60 * 16]atomic.Int64
}

func (l *latencies) record(ns int64) { l.counts[latencyBucket(ns)].Add(1) }

// latencyBucket is ns's bucket: its top 5 bits, and where they are.
func latencyBucket(ns int64) int {
	if ns < 16 {
		return int(max(ns, 0))
	}
	shift := bits.Len64(uint64(ns)) - 5
	return (shift+1)*16 + int(ns>>shift&15)
}

// latencyTop is the longest time in bucket i, what Redis's percentiles
// report (hdr_value_at_percentile gives a bucket's highest value).
func latencyTop(i int) int64 {
	if i < 16 {
		return int64(i)
	}
	shift := i/16 - 1
	return (int64(16+i%16)+1)<<shift - 1
}

// latencyPercentiles are Redis's default
// latency-tracking-info-percentiles.
var latencyPercentiles = []struct {
	name string
	p    float64
}{{"50", 50}, {"99", 99}, {"99.9", 99.9}}

// write renders l's line of INFO latencystats, in µs as Redis gives them.
func (l *latencies) write(b *strings.Builder, name string) {
	var counts [len(latencies{}.counts)]int64
	var total int64
	for i := range l.counts {
		counts[i] = l.counts[i].Load()
		total += counts[i]
	}
	fmt.Fprintf(b, "latency_percentiles_usec_%s:", infoSafe(name))
	for k, pc := range latencyPercentiles {
		// As HDR counts to a percentile: rounded, and at least one.
		want := max(int64(pc.p/100*float64(total)+0.5), 1)
		var seen int64
		top := int64(0)
		for i, n := range counts {
			if seen += n; seen >= want {
				top = latencyTop(i)
				break
			}
		}
		if k > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(b, "p%s=%.3f", pc.name, float64(top)/1000)
	}
	b.WriteString("\r\n")
}

// writeLatencies renders INFO latencystats: a line for each command
// answered at least once, in name order.
func (cs *commandStats) writeLatencies(b *strings.Builder) {
	by := cs.all()
	for _, name := range slices.Sorted(maps.Keys(by)) {
		if lat := by[name].lat.Load(); lat != nil {
			lat.write(b, name)
		}
	}
}
