package proxy_test

import (
	"testing"

	"github.com/sluice-rl/sluice/router"
	"github.com/sluice-rl/sluice/router/clustertest"
)

// With --read-from-replicas, a keyless EVAL_RO (or FCALL_RO) of a script
// whose flags allow writes goes to a replica, which refuses it with
// READONLY; a node of the cluster asked directly (a primary, where a
// keyed one is redirected) refuses it with its own words, and a cluster
// client would take READONLY for a failover and retry.
func TestReadOnlyScriptWithWriteFlagFromReplica(t *testing.T) {
	c := clustertest.New(t, clustertest.Config{Primaries: 1})
	primary := primaryOf(t, c, "any")
	replica := replicasOf(t, c, primary)[0]
	conns := onEachPath(t, router.ClusterConfig{Seeds: c.Addrs(), ReadFromReplicas: true})
	const want = "-ERR Can not execute a script with write flag using *_ro command.\r\n"
	for loops, rc := range conns {
		before := cmdCalls(replica, "eval_ro")
		waitUntil(t, "a keyless EVAL_RO reaches the replica", func() bool {
			return rc.do("EVAL_RO", "#!lua flags=no-writes\nreturn 1", "0") == ":1\r\n" && cmdCalls(replica, "eval_ro") > before
		})
		for _, script := range []string{"#!lua\nreturn 1", "#!lua flags=allow-stale\nreturn 1"} {
			if got := rc.do("EVAL_RO", script, "0"); got != want {
				t.Errorf("loops %d: EVAL_RO %q 0: %q, want %q", loops, script, got, want)
			}
		}
	}
}
