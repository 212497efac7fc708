package proxy_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/sluice-rl/sluice/proxy"
	"github.com/sluice-rl/sluice/router"
	"github.com/sluice-rl/sluice/router/clustertest"
)

// A bucket overwritten through passthrough with a value that is not
// sluice's (a lapsed marker's shape with a lapse that is no bucket, a
// 19-digit number past int64's maximum, a key of another type) answers
// WRONGTYPE on THROTTLE, CL.THROTTLE, GCRA and THROTTLE.RESET, which
// leaves it as it is, on both serving paths; the shard stays healthy and
// nothing is decided by the fallback.
func TestForgedBucketIsWrongType(t *testing.T) {
	c := clustertest.New(t, clustertest.Config{Replicas: -1})
	eachIOConfig(t, proxy.Config{}, func(t *testing.T, cfg proxy.Config) {
		r := newForwarding(t, c)
		cfg.Decider, cfg.Forwarder = r, r
		conn := dialRaw(t, serveConfig(t, cfg))
		for i, set := range [][]string{
			{"SET", "", "~1:2:3:"},
			{"SET", "", "~0:2:0:g:{a}"},
			{"SET", "", "9999999999999999999"},
			{"SET", "", "9223372036854775808"},
			{"HSET", "", "f", "v"},
		} {
			key := fmt.Sprintf("{%s}forged%d", t.Name(), i)
			set[1] = router.KeyPrefix + key
			if got := conn.do(set...); got != "+OK\r\n" && got != ":1\r\n" {
				t.Fatalf("%q: %q", set, got)
			}
			for _, cmd := range [][]string{
				{"THROTTLE", key, "5", "1", "1d"},
				{"CL.THROTTLE", key, "4", "1", "86400"},
				{"GCRA", key, "4", "1", "86400"},
				{"THROTTLE.RESET", key},
			} {
				if got := conn.do(cmd...); len(got) < 10 || got[:10] != "-WRONGTYPE" {
					t.Errorf("%q on %q: %q, want WRONGTYPE", cmd, set, got)
				}
			}
			if got := conn.do("EXISTS", router.KeyPrefix+key); got != ":1\r\n" {
				t.Errorf("%q: THROTTLE.RESET deleted it", set)
			}
		}
		st := r.Stats()
		if local := st.Cluster.Decisions[router.SourceLocal]; local != 0 {
			t.Errorf("%d decisions by the local fallback, want none", local)
		}
		for _, s := range st.Cluster.Shards {
			if !s.Healthy {
				t.Errorf("shard %s unhealthy: %s", s.Addr, s.LastError)
			}
		}
	})
}

// A split marker in sluice's format that holds for centuries (until
// 9999999999999 ms: 2286) is followed, as any split: its calls are decided
// by its sub-bucket in the cluster, never by this instance's fallback,
// which would count the key apart from every other instance.
func TestForgedLongSplitIsFollowed(t *testing.T) {
	c := clustertest.New(t, clustertest.Config{Replicas: -1})
	eachIOConfig(t, proxy.Config{}, func(t *testing.T, cfg proxy.Config) {
		r := newForwarding(t, c)
		cfg.Decider, cfg.Forwarder = r, r
		conn := dialRaw(t, serveConfig(t, cfg))
		key := fmt.Sprintf("{%s}long", t.Name())
		if got := conn.do("SET", router.KeyPrefix+key, "~0:9999999999999:0:g:a"); got != "+OK\r\n" {
			t.Fatalf("SET: %q", got)
		}
		for i := range 3 {
			// reset_after_ms counts down on the shard's clock: not compared.
			want := fmt.Sprintf("*5\r\n:0\r\n:5\r\n:%d\r\n:-1\r\n:", 4-i)
			if got := conn.do("THROTTLE", key, "5", "1", "1d"); !strings.HasPrefix(got, want) {
				t.Errorf("THROTTLE %d: %q, want %q...", i, got, want)
			}
		}
		if got := conn.do("EXISTS", "sluice{a}g:"+key); got != ":1\r\n" {
			t.Errorf("the sub-bucket: EXISTS %q", got)
		}
		if local := r.Stats().Cluster.Decisions[router.SourceLocal]; local != 0 {
			t.Errorf("%d decisions by the local fallback, want none", local)
		}
	})
}

// A split marker naming more sub-buckets than a split ever has
// (router.MaxSplit) is not sluice's: every script and reader answers it
// WRONGTYPE and leaves it, where followed it would make one key thousands
// of sub-buckets (a 7 MB marker, 20,000 of them) and index past the
// split's per-sub-bucket state.
func TestForgedMarkerOfManyTagsIsWrongType(t *testing.T) {
	c := clustertest.New(t, clustertest.Config{Replicas: -1})
	eachIOConfig(t, proxy.Config{}, func(t *testing.T, cfg proxy.Config) {
		r := newForwarding(t, c)
		cfg.Decider, cfg.Forwarder = r, r
		conn := dialRaw(t, serveConfig(t, cfg))
		tags := make([]string, router.MaxSplit+1)
		for i := range tags {
			tags[i] = fmt.Sprint("t", i)
		}
		key := fmt.Sprintf("{%s}many", t.Name())
		if got := conn.do("SET", router.KeyPrefix+key, "~0:9999999999999:0:g:"+strings.Join(tags, ",")); got != "+OK\r\n" {
			t.Fatalf("SET: %q", got)
		}
		for _, cmd := range [][]string{
			{"THROTTLE", key, "100", "1", "1d"},
			{"CL.THROTTLE", key, "99", "1", "86400"},
			{"GCRA", key, "99", "1", "86400"},
			{"THROTTLE.RESET", key},
		} {
			if got := conn.do(cmd...); !strings.HasPrefix(got, "-WRONGTYPE") {
				t.Errorf("%q: %q, want WRONGTYPE", cmd, got)
			}
		}
		if got := conn.do("EXISTS", router.KeyPrefix+key); got != ":1\r\n" {
			t.Errorf("THROTTLE.RESET deleted it: EXISTS %q", got)
		}
		if local := r.Stats().Cluster.Decisions[router.SourceLocal]; local != 0 {
			t.Errorf("%d decisions by the local fallback, want none", local)
		}
	})
}
