package proxy

import (
	"math"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

// durations, given n observations at once, exports what a Prometheus
// histogram given them one by one does: the same buckets (a value on a
// bound counts in that bound's bucket), count and sum.
func TestDurationsAsPrometheusHistogram(t *testing.T) {
	bounds := prometheus.ExponentialBuckets(25e-6, 2, 16)
	ref := prometheus.NewHistogram(prometheus.HistogramOpts{Name: "d", Help: "h", Buckets: bounds})
	got := newDurations(prometheus.NewDesc("d", "h", nil, nil), bounds)
	for _, o := range []struct {
		v float64
		n uint64
	}{{0, 1}, {25e-6, 3}, {26e-6, 2}, {1e-3, 16}, {bounds[5], 4}, {bounds[15], 1}, {0.9, 1}, {2, 5}} {
		got.observe(o.v, o.n)
		for range o.n {
			ref.Observe(o.v)
		}
	}
	hist := func(c prometheus.Collector) (count uint64, sum float64, buckets []uint64) {
		reg := prometheus.NewRegistry()
		reg.MustRegister(c)
		mfs, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		h := mfs[0].GetMetric()[0].GetHistogram()
		for _, b := range h.GetBucket() {
			buckets = append(buckets, b.GetCumulativeCount())
		}
		return h.GetSampleCount(), h.GetSampleSum(), buckets
	}
	wc, ws, wb := hist(ref)
	gc, gs, gb := hist(got)
	if gc != wc || math.Abs(gs-ws) > 1e-12 {
		t.Errorf("count %d, sum %g; want %d, %g", gc, gs, wc, ws)
	}
	if len(gb) != len(wb) {
		t.Fatalf("%d buckets, want %d", len(gb), len(wb))
	}
	for i := range wb {
		if gb[i] != wb[i] {
			t.Errorf("bucket le=%g: %d, want %d", bounds[i], gb[i], wb[i])
		}
	}
}
