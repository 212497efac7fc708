package proxy_test

import (
	"context"
	"strings"
	"testing"

	"github.com/sluice-rl/sluice/proxy"
	"github.com/sluice-rl/sluice/router/clustertest"
)

// INFO's Memory section carries the cluster's maxmemory_policy, the first
// primary's that evicts if one does, when the keyspace is asked too: job
// queues (BullMQ, Sidekiq) read it from a plain INFO to warn that an
// evicting policy loses their data, and through sluice they read sluice's
// own memory lines, which had none. INFO memory alone, or other sections,
// go to no node: a hung primary must not hold a health check's INFO.
func TestInfoMemoryCarriesTheClustersEvictionPolicy(t *testing.T) {
	c := clustertest.New(t, clustertest.Config{Replicas: -1})
	r := newForwarding(t, c)
	policy := func(info string) string {
		_, mem, ok := strings.Cut(info, "# Memory\r\n")
		if !ok {
			return "no memory section"
		}
		mem, _, _ = strings.Cut(mem, "\r\n\r\n")
		_, v, ok := strings.Cut(mem, "maxmemory_policy:")
		if !ok {
			return "none"
		}
		v, _, _ = strings.Cut(v, "\r\n")
		return v
	}
	eachPathAndProtocol(t, func(t *testing.T, loops int, resp3 bool) {
		conn := dialRaw(t, serveConfig(t, proxy.Config{Decider: r, Forwarder: r, Loops: loops}))
		if resp3 {
			conn.do("HELLO", "3")
		}
		set := func(p string) {
			t.Helper()
			if err := c.Nodes[1].Do(context.Background(), "CONFIG", "SET", "maxmemory-policy", p).Error(); err != nil {
				t.Fatal(err)
			}
		}
		for _, p := range []string{"noeviction", "allkeys-lru"} {
			set(p)
			for _, cmd := range [][]string{{"INFO"}, {"INFO", "all"}, {"INFO", "memory", "keyspace"}, {"INFO", "keyspace", "memory"}} {
				got := conn.do(cmd...)
				if v := policy(got); v != p {
					t.Errorf("%q with one primary's policy %s: maxmemory_policy %q in %.200q", cmd, p, v, got)
				}
				if !strings.Contains(got, "# Keyspace") {
					t.Errorf("%q: no keyspace section in %.200q", cmd, got)
				}
			}
		}
		// Answered by sluice alone: with an evicting primary, no policy
		// line (the primaries were not asked), and no keyspace.
		for _, cmd := range [][]string{{"INFO", "memory"}, {"INFO", "server", "memory"}} {
			if got := conn.do(cmd...); policy(got) != "none" || strings.Contains(got, "# Keyspace") {
				t.Errorf("%q: %.300q, want sluice's own memory section alone", cmd, got)
			}
		}
		set("noeviction")
	})
}
