package proxy_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/sluice-rl/sluice/proxy"
	"github.com/sluice-rl/sluice/router"
	"github.com/sluice-rl/sluice/router/clustertest"
)

// Split markers forged through passthrough where the hot-key code reads
// them, on one cluster.
func TestForgedHotMarkers(t *testing.T) {
	c := clustertest.New(t, clustertest.Config{Replicas: -1})
	t.Run("RenamedTags", func(t *testing.T) { forgedMarkerRenamedTagsIsFollowed(t, c) })
	t.Run("InASubBucket", func(t *testing.T) { forgedMarkerInASubBucketIsWrongType(t, c) })
}

// A followed split's marker rewritten through passthrough with its name
// and more tags is read again a quarter of its time before it ends: its
// sub-buckets are then its own tags', as any instance reading it anew
// takes them, not stand-ins on the first one's shard, every shard being
// healthy.
func forgedMarkerRenamedTagsIsFollowed(t *testing.T, c *clustertest.Cluster) {
	eachIOConfig(t, proxy.Config{}, func(t *testing.T, cfg proxy.Config) {
		r := newForwarding(t, c)
		cfg.Decider, cfg.Forwarder = r, r
		conn := dialRaw(t, serveConfig(t, cfg))
		key := fmt.Sprintf("{%s}renamed", t.Name())
		until := time.Now().Add(900 * time.Millisecond).UnixMilli()
		if got := conn.do("SET", router.KeyPrefix+key, fmt.Sprintf("~0:%d:0:g:a", until)); got != "+OK\r\n" {
			t.Fatalf("SET: %q", got)
		}
		if got := conn.do("THROTTLE", key, "6", "1", "1d"); !strings.HasPrefix(got, "*5\r\n:0\r\n") {
			t.Fatalf("THROTTLE: %q", got)
		}
		if got := conn.do("SET", router.KeyPrefix+key, "~0:9999999999999:0:g:a,b,c"); got != "+OK\r\n" {
			t.Fatalf("SET: %q", got)
		}
		waitUntil(t, "the marker is read again", func() bool { return subBuckets(r, key) == 3 })
		for range 3 {
			if got := conn.do("THROTTLE", key, "6", "1", "1d"); !strings.HasPrefix(got, "*5\r\n:0\r\n") {
				t.Fatalf("THROTTLE: %q", got)
			}
		}
		for _, sub := range []string{"sluice{b}g:", "sluice{c}g:"} {
			if got := conn.do("EXISTS", sub+key); got != ":1\r\n" {
				t.Errorf("EXISTS %s: %q, want the sub-bucket taken from", sub+key, got)
			}
		}
		if local := r.Stats().Cluster.Decisions[router.SourceLocal]; local != 0 {
			t.Errorf("%d decisions by the local fallback, want none", local)
		}
	})
}

// A sub-bucket overwritten through passthrough with a split marker is not
// a bucket (no split's sub-bucket is ever split): THROTTLE answers
// WRONGTYPE, as for a sub-bucket of another type, not sluice's internal
// "bucket is split" error.
func forgedMarkerInASubBucketIsWrongType(t *testing.T, c *clustertest.Cluster) {
	eachIOConfig(t, proxy.Config{}, func(t *testing.T, cfg proxy.Config) {
		r := newForwarding(t, c)
		cfg.Decider, cfg.Forwarder = r, r
		conn := dialRaw(t, serveConfig(t, cfg))
		key := fmt.Sprintf("{%s}sub", t.Name())
		if got := conn.do("SET", router.KeyPrefix+key, "~0:9999999999999:0:g:a"); got != "+OK\r\n" {
			t.Fatalf("SET: %q", got)
		}
		if got := conn.do("THROTTLE", key, "6", "1", "1d"); !strings.HasPrefix(got, "*5\r\n:0\r\n") {
			t.Fatalf("THROTTLE: %q", got)
		}
		if got := conn.do("SET", "sluice{a}g:"+key, "~0:9999999999999:0:h:b"); got != "+OK\r\n" {
			t.Fatalf("SET: %q", got)
		}
		for _, cmd := range [][]string{
			{"THROTTLE", key, "6", "1", "1d"},
			{"CL.THROTTLE", key, "5", "1", "86400"},
			{"GCRA", key, "5", "1", "86400"},
		} {
			if got := conn.do(cmd...); !strings.HasPrefix(got, "-WRONGTYPE") {
				t.Errorf("%q: %q, want WRONGTYPE", cmd, got)
			}
		}
		if local := r.Stats().Cluster.Decisions[router.SourceLocal]; local != 0 {
			t.Errorf("%d decisions by the local fallback, want none", local)
		}
	})
}
