package proxy

import (
	"fmt"
	"math"
	"strings"
	"sync"
	"testing"
)

// A time's bucket holds it, and its top is within 1/16 of it: the
// percentiles latencystats gives are as close, over every int64.
func TestLatencyBuckets(t *testing.T) {
	prev := -1
	for _, ns := range []int64{-5, 0, 1, 15, 16, 17, 31, 32, 33, 1000, 1023, 1024, 123456789, 1 << 40, math.MaxInt64} {
		i := latencyBucket(ns)
		if i < prev || i >= len(latencies{}.counts) {
			t.Fatalf("%d ns: bucket %d after %d (of %d)", ns, i, prev, len(latencies{}.counts))
		}
		prev = i
		top := latencyTop(i)
		if top < ns || float64(top-max(ns, 0)) > float64(max(ns, 0))/16 {
			t.Errorf("%d ns: bucket %d's top %d", ns, i, top)
		}
		if i > 0 && latencyTop(i-1) >= max(ns, 0) {
			t.Errorf("%d ns: the bucket below %d holds it too (top %d)", ns, i, latencyTop(i-1))
		}
	}
}

// Percentiles as Redis reports them: the time by which that share of the
// answers came, in µs.
func TestLatencyPercentiles(t *testing.T) {
	var l latencies
	for range 98 {
		l.record(1000)
	}
	l.record(2_000_000)
	l.record(3_000_000)
	var b strings.Builder
	l.write(&b, "get")
	want := "latency_percentiles_usec_get:p50=1.023,p99=2031.615,p99.9=3014.655\r\n"
	if b.String() != want {
		t.Errorf("got %q, want %q", b.String(), want)
	}
}

// Loops and goroutines count at once: each name gets one cmdStat, and no
// count is lost while names are being added.
func TestCommandStatsConcurrent(t *testing.T) {
	var cs commandStats
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 1000 {
				cs.of(fmt.Sprintf("cmd%d", (i+g)%50)).calls.Add(1)
			}
		})
	}
	wg.Wait()
	var total int64
	for _, st := range cs.all() {
		total += st.calls.Load()
	}
	if len(cs.all()) != 50 || total != 8000 {
		t.Errorf("%d names, %d calls; want 50 and 8000", len(cs.all()), total)
	}
}

// A key keeps its value while the map holds it; past the limit the map
// starts again, so that the specs of command tables read again do not
// pile up, and a key used again gets a value again.
func TestCowMapKeepsValuesWithinItsLimit(t *testing.T) {
	var m cowMap[int, int]
	made := 0
	mk := func(k int) *int { made++; v := k * 10; return &v }
	first := m.of(1, 3, mk)
	if m.of(1, 3, mk) != first || made != 1 || *first != 10 {
		t.Fatalf("key 1 read again: made %d values", made)
	}
	m.of(2, 3, mk)
	m.of(3, 3, mk)
	if len(m.all()) != 3 || m.of(1, 3, mk) != first {
		t.Fatalf("within the limit: %d keys, key 1's value kept: %v", len(m.all()), m.of(1, 3, mk) == first)
	}
	m.of(4, 3, mk)
	if got := m.all(); len(got) != 1 || got[4] == nil {
		t.Fatalf("past the limit the map holds %v, want key 4 alone", got)
	}
	if again := m.of(1, 3, mk); again == first || *again != 10 {
		t.Fatalf("key 1 after the restart: same value %v, %d", again == first, *again)
	}
}
