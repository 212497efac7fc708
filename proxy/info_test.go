package proxy

import (
	"strings"
	"testing"
	"time"

	"github.com/sluice-rl/sluice/router"
)

// INFO renders a backend's typed stats, one field:value line each, with a
// caller's key escaped so that it cannot break its line.
func TestWriteStats(t *testing.T) {
	since := time.Date(2026, 12, 3, 10, 0, 0, 0, time.UTC)
	st := &router.ClusterStats{
		Connected: true, Fallback: router.FallbackOpen, Share: 0.5, Instances: 2, LocalBuckets: 7,
		Split: 3, DeniedHere: 1,
		Shards: []router.ShardStats{
			{Addr: "127.0.0.1:7000", Healthy: true, Since: since},
			{Addr: "127.0.0.1:7001", Since: since, Errors: 4, LastError: "i/o timeout,\r\nagain"},
		},
		HotThreshold: 2000, HotKeys: 1,
		Hot: []router.HotKeyStats{{Key: "a,b\n", State: "detected", SubBuckets: 3, Rate: 2500.4, SplitLeft: 1500 * time.Millisecond}, {Key: "b", State: "following", SubBuckets: 2, Held: true}},
	}
	st.Decisions[router.SourceCluster] = 10
	st.Decisions[router.SourceOpen] = 2
	var b strings.Builder
	writeStats(&b, router.Stats{Cluster: st})
	want := strings.Join([]string{
		"cluster_connected:1", "fallback_policy:open", "fallback_share:0.5000", "sluice_instances:2", "local_buckets:7",
		"decisions_cluster:10", "decisions_local:0", "decisions_open:2", "decisions_closed:0",
		"decisions_split:3", "decisions_split_denied_here:1",
		"shard0:addr=127.0.0.1:7000,state=healthy,since=2026-12-03T10:00:00Z,errors=0,last_error=",
		"shard1:addr=127.0.0.1:7001,state=unhealthy,since=2026-12-03T10:00:00Z,errors=4,last_error=i/o timeout;  again",
		"hot_threshold:2000", "hot_keys:1",
		`hot0:key=a\x2cb\n,state=detected,split=3,rate=2500,split_ms_left=1500,held=0`,
		`hot1:key=b,state=following,split=2,rate=0,split_ms_left=0,held=1`,
	}, "\r\n") + "\r\n"
	if got := b.String(); got != want {
		t.Fatalf("got\n%q\nwant\n%q", got, want)
	}
	b.Reset()
	writeStats(&b, router.Stats{Embedded: &router.MemoryStats{Buckets: 5}})
	if got := b.String(); got != "embedded_buckets:5\r\n" {
		t.Fatalf("embedded: got %q", got)
	}
}

// INFO's Keyspace section weighs each primary's avg_ttl by its keys with a
// TTL: keys of long TTLs, many of them, must not overflow the sum.
func TestKeyspaceAvgTTLOfManyLongTTLs(t *testing.T) {
	// Ten years in ms, on 500 million keys with a TTL per primary.
	part := "$60\r\n# Keyspace\r\ndb0:keys=500000000,expires=500000000,avg_ttl=315360000000\r\n\r\n"
	it := &fwdItem{}
	got := string(it.keyspace([][]byte{[]byte(part), []byte(part)}))
	if want := "db0:keys=1000000000,expires=1000000000,avg_ttl=315360000000\r\n"; !strings.Contains(got, want) {
		t.Fatalf("got %q, want %q", got, want)
	}
}

// A primary whose avg_ttl is 0 has keys with a TTL it has not sampled yet:
// the mean is of those that have, not pulled toward 0 by it.
func TestKeyspaceAvgTTLLeavesOutUnsampledPrimaries(t *testing.T) {
	sampled := "$60\r\n# Keyspace\r\ndb0:keys=10,expires=10,avg_ttl=5000\r\n\r\n"
	unsampled := "$60\r\n# Keyspace\r\ndb0:keys=30,expires=30,avg_ttl=0\r\n\r\n"
	it := &fwdItem{}
	got := string(it.keyspace([][]byte{[]byte(sampled), []byte(unsampled)}))
	if want := "db0:keys=40,expires=40,avg_ttl=5000\r\n"; !strings.Contains(got, want) {
		t.Fatalf("got %q, want %q", got, want)
	}
}

// instantaneous_ops_per_sec is the mean of the last 16 samples' rates, as
// Redis's: one sample of 100 commands in 100 ms is 1000/s among fifteen of
// none; the rest of a second of them, and it is 1000/s; none since, and
// it falls back to 0.
func TestOpsRate(t *testing.T) {
	var o opsRate
	t0 := time.Unix(1_000_000, 0)
	o.sample(t0, 0)
	o.sample(t0.Add(opsEvery), 100)
	if got := o.perSecond(); got != 1000/16 {
		t.Fatalf("one sample of 1000/s: %d, want %d", got, 1000/16)
	}
	for i := 2; i <= 16; i++ {
		o.sample(t0.Add(time.Duration(i)*opsEvery), int64(i*100))
	}
	if got := o.perSecond(); got != 1000 {
		t.Fatalf("16 samples of 1000/s: %d, want 1000", got)
	}
	for i := 17; i <= 32; i++ {
		o.sample(t0.Add(time.Duration(i)*opsEvery), 1600)
	}
	if got := o.perSecond(); got != 0 {
		t.Fatalf("16 samples of none: %d, want 0", got)
	}
}
