package proxy

import (
	"math"
	"net/http"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/sluice-rl/sluice/router"
)

// metrics are what a Server exports to Prometheus. The hot path only adds
// to atomics and one histogram; the rest is read at scrape time from the
// counters INFO reads and from the backend's typed snapshot. Nothing is
// labelled by key: a label per key would grow without bound.
type metrics struct {
	// decisions by source and result (0 allowed, 1 limited).
	decisions [router.NumSources][2]atomic.Int64
	latency   *durations

	mu sync.RWMutex // guards policies
	// policies are the named policies' counters by name, kept across
	// reloads (a counter never goes back) for every name ever configured,
	// which bounds them.
	policies map[string]*policyCounts
}

func newMetrics() *metrics {
	return &metrics{
		latency: newDurations(prometheus.NewDesc("sluice_decision_duration_seconds",
			"Time from reading a THROTTLE to its decision, in seconds.", nil, nil),
			// 25 µs to about 0.8 s: a local decision to a backend timeout
			// several times over.
			prometheus.ExponentialBuckets(25e-6, 2, 16)),
		policies: map[string]*policyCounts{},
	}
}

// decided counts one decision, made by pol (nil: inline), as the bucket
// made it: a shadow policy's limited decision counts as limited here,
// whatever its reply says.
func (m *metrics) decided(pol *policy, res *router.Result) {
	if int(res.Source) >= len(m.decisions) {
		return
	}
	if pol == nil {
		m.decisions[res.Source][btoi(res.Limited)].Add(1)
		return
	}
	pol.counts.decisions[res.Source][btoi(res.Limited)].Add(1)
	if pol.shadow && res.Limited {
		pol.counts.shadowed.Add(1)
	}
}

// policyCounts are the counters of the policy named name, made on first
// use.
func (m *metrics) policyCounts(name string) *policyCounts {
	m.mu.Lock()
	defer m.mu.Unlock()
	c := m.policies[name]
	if c == nil {
		c = new(policyCounts)
		m.policies[name] = c
	}
	return c
}

// observe records how long decisions took, from start, n of them.
func (m *metrics) observe(start, now time.Time, n int) {
	m.latency.observe(now.Sub(start).Seconds(), uint64(n))
}

// durations is a histogram that takes n observations of one value at
// once. A round's decisions are timed together: prometheus.Histogram
// would take each on its own, three atomic adds and a compare-and-swap
// apiece, about 2% of sluice's CPU at redis-benchmark -P 16.
type durations struct {
	desc   *prometheus.Desc
	bounds []float64       // each bucket's upper bound, ascending
	counts []atomic.Uint64 // by bucket; the last is past every bound
	sum    atomic.Uint64   // the float64's bits
}

func newDurations(desc *prometheus.Desc, bounds []float64) *durations {
	return &durations{desc: desc, bounds: bounds, counts: make([]atomic.Uint64, len(bounds)+1)}
}

func (h *durations) observe(v float64, n uint64) {
	// A bucket's bound is inclusive (le), as Prometheus's.
	h.counts[sort.SearchFloat64s(h.bounds, v)].Add(n)
	for {
		old := h.sum.Load()
		if h.sum.CompareAndSwap(old, math.Float64bits(math.Float64frombits(old)+v*float64(n))) {
			return
		}
	}
}

func (h *durations) Describe(ch chan<- *prometheus.Desc) { ch <- h.desc }

// Collect counts as many observations as its buckets hold, read one by
// one: an observation made meanwhile may be in the sum but in no bucket,
// never in a bucket but not the count.
func (h *durations) Collect(ch chan<- prometheus.Metric) {
	buckets := make(map[float64]uint64, len(h.bounds))
	var count uint64
	for i, b := range h.bounds {
		count += h.counts[i].Load()
		buckets[b] = count
	}
	count += h.counts[len(h.bounds)].Load()
	ch <- prometheus.MustNewConstHistogram(h.desc, count, math.Float64frombits(h.sum.Load()), buckets)
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// MetricsHandler serves the server's metrics in Prometheus's text format.
func (s *Server) MetricsHandler() http.Handler {
	reg := prometheus.NewRegistry()
	reg.MustRegister(s.metrics.latency, &collector{s: s})
	return promhttp.HandlerFor(reg, promhttp.HandlerOpts{})
}

var (
	descDecisions = prometheus.NewDesc("sluice_decisions_total",
		"THROTTLE, CL.THROTTLE and GCRA decisions by result (as the bucket decided: a shadow policy's limited ones were allowed), by what made them, and by policy (inline: the limit came with the call).",
		[]string{"result", "source", "policy"}, nil)
	descShadowed = prometheus.NewDesc("sluice_shadow_limited_total",
		"Decisions a shadow policy allowed that its limit would have denied.", []string{"policy"}, nil)
	descConnected = prometheus.NewDesc("sluice_connected_clients", "Clients connected now.", nil, nil)
	descAccepted  = prometheus.NewDesc("sluice_connections_total", "Client connections accepted since start.", nil, nil)
	descRejected  = prometheus.NewDesc("sluice_rejected_connections_total", "Client connections turned away at --maxclients.", nil, nil)
	descCommands  = prometheus.NewDesc("sluice_commands_total", "Commands read from clients.", nil, nil)
	descErrors    = prometheus.NewDesc("sluice_error_replies_total", "Error replies sent to clients.", nil, nil)
	descForwarded = prometheus.NewDesc("sluice_passthrough_commands_total", "Ordinary commands forwarded to the cluster, by command.", []string{"command"}, nil)
	descHealthy   = prometheus.NewDesc("sluice_shard_healthy", "1 while a primary decides its keys, 0 while they go to the fallback.", []string{"shard"}, nil)
	descShardErrs = prometheus.NewDesc("sluice_backend_errors_total", "Faults of a primary, by kind.", []string{"shard", "kind"}, nil)
	descFallback  = prometheus.NewDesc("sluice_fallback_buckets", "Local fallback buckets held.", nil, nil)
	descHotKeys   = prometheus.NewDesc("sluice_hot_keys", "Hot keys tracked: split here, declared or followed.", nil, nil)
	descHotSplit  = prometheus.NewDesc("sluice_hot_keys_split", "Tracked hot keys with a live split (of the busiest listed).", nil, nil)
	descClusterUp = prometheus.NewDesc("sluice_cluster_connected", "1 once the cluster has answered.", nil, nil)
	descBuckets   = prometheus.NewDesc("sluice_embedded_buckets", "Buckets held by the embedded backend.", nil, nil)
)

// collector reads the server's counters and the backend's snapshot at
// scrape time.
type collector struct{ s *Server }

func (c *collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descDecisions, descShadowed, descConnected, descAccepted, descRejected, descCommands,
		descErrors, descForwarded, descHealthy, descShardErrs, descFallback, descHotKeys, descHotSplit,
		descClusterUp, descBuckets} {
		ch <- d
	}
}

func (c *collector) Collect(ch chan<- prometheus.Metric) {
	s := c.s
	m := s.metrics
	for src := range m.decisions {
		for lim, result := range []string{"allowed", "limited"} {
			if n := m.decisions[src][lim].Load(); n > 0 {
				ch <- prometheus.MustNewConstMetric(descDecisions, prometheus.CounterValue, float64(n), result, router.Source(src).String(), inlinePolicy)
			}
		}
	}
	m.mu.RLock()
	for _, name := range sortedKeys(m.policies) {
		pc := m.policies[name]
		for src := range pc.decisions {
			for lim, result := range []string{"allowed", "limited"} {
				if n := pc.decisions[src][lim].Load(); n > 0 {
					ch <- prometheus.MustNewConstMetric(descDecisions, prometheus.CounterValue, float64(n), result, router.Source(src).String(), name)
				}
			}
		}
		// A shadow policy's series is there from the start, so that a
		// roll-out's dashboard shows 0 rather than nothing.
		if pc.wasShadow.Load() {
			ch <- prometheus.MustNewConstMetric(descShadowed, prometheus.CounterValue, float64(pc.shadowed.Load()), name)
		}
	}
	m.mu.RUnlock()
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	counter := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, v, labels...)
	}
	gauge(descConnected, float64(s.stats.connected.Load()))
	counter(descAccepted, float64(s.stats.connections.Load()))
	counter(descRejected, float64(s.stats.rejected.Load()))
	counter(descCommands, float64(s.stats.commands.Load()))
	counter(descErrors, float64(s.stats.errors.total.Load()))
	stats := s.cmdStats.all()
	for _, name := range sortedKeys(stats) {
		if n := stats[name].forwarded.Load(); n > 0 {
			counter(descForwarded, float64(n), name)
		}
	}
	st, ok := s.cfg.Decider.(statser)
	if !ok {
		return
	}
	snap := st.Stats()
	if e := snap.Embedded; e != nil {
		gauge(descBuckets, float64(e.Buckets))
	}
	cl := snap.Cluster
	if cl == nil {
		return
	}
	gauge(descClusterUp, float64(btoi(cl.Connected)))
	gauge(descFallback, float64(cl.LocalBuckets))
	gauge(descHotKeys, float64(cl.HotKeys))
	split := 0
	for _, h := range cl.Hot {
		if h.SubBuckets > 0 {
			split++
		}
	}
	gauge(descHotSplit, float64(split))
	for _, sh := range cl.Shards {
		gauge(descHealthy, float64(btoi(sh.Healthy)), sh.Addr)
		for kind, n := range sh.ErrorKinds {
			counter(descShardErrs, float64(n), sh.Addr, kind)
		}
	}
}
