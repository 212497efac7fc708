package proxy_test

import (
	"fmt"
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
