package proxy_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/sluice-rl/sluice/proxy"
	"github.com/sluice-rl/sluice/router/clustertest"
)

// Two WATCHes of keys the source of a migrating slot no longer holds,
// pipelined: the second is sent before the first's ASK is in. Both watch
// on the importing node, where the transaction of those keys then runs,
// as after one WATCH of both: a retry loop that pipelines its WATCHes
// makes progress, rather than finding its watch lost at every try until
// the migration ends. A WATCH the source answers itself (its key still
// there) watches there, and the transaction's watch is lost.
func TestWatchesPipelinedBeforeTheirAskRunOnTheImportingNode(t *testing.T) {
	c := clustertest.New(t, clustertest.Config{Replicas: -1})
	r := newForwarding(t, c)
	for _, loops := range []int{0, -1} {
		t.Run(fmt.Sprintf("loops=%d", loops), func(t *testing.T) {
			k, k2, k3, absent := fmt.Sprintf("{wp%d}k", loops), fmt.Sprintf("{wp%d}k2", loops), fmt.Sprintf("{wp%d}k3", loops), fmt.Sprintf("{wp%d}absent", loops)
			conn := dialRaw(t, serveConfig(t, proxy.Config{Decider: r, Forwarder: r, Loops: loops}))
			for _, key := range []string{k, k2, k3} {
				conn.do("SET", key, "0")
			}
			from, to := migrateKey(t, c, k, true)
			if err := c.Migrate(context.Background(), from, to, k2); err != nil {
				t.Fatal(err)
			}
			last := func(cmds ...[]string) string {
				conn.send(cmds...)
				for range len(cmds) - 1 {
					conn.read()
				}
				return conn.read()
			}
			if got := last([]string{"WATCH", k}, []string{"WATCH", k2}, []string{"MULTI"}, []string{"INCR", k}, []string{"INCR", k2}, []string{"EXEC"}); got != "*2\r\n:1\r\n:1\r\n" {
				t.Errorf("WATCH k, WATCH k2 pipelined, both asked: EXEC answered %q, want it run", got)
			}
			if got := last([]string{"WATCH", k}, []string{"WATCH", absent}, []string{"WATCH", k}, []string{"MULTI"}, []string{"INCR", k}, []string{"EXEC"}); got != "*1\r\n:2\r\n" {
				t.Errorf("WATCH k, WATCH of an absent key, WATCH k pipelined: EXEC answered %q, want it run", got)
			}
			if got := last([]string{"WATCH", k}, []string{"WATCH", k3}, []string{"MULTI"}, []string{"INCR", k}, []string{"EXEC"}); got != "*-1\r\n" {
				t.Errorf("WATCH k (asked), WATCH k3 (on the source) pipelined: EXEC answered %q, want the watch lost", got)
			}
			if got := last([]string{"WATCH", k3}, []string{"WATCH", k}, []string{"MULTI"}, []string{"INCR", k}, []string{"EXEC"}); got != "*-1\r\n" {
				t.Errorf("WATCH k3 (on the source), WATCH k (asked) pipelined: EXEC answered %q, want the watch lost", got)
			}
			if got := conn.do("GET", k); got != "$1\r\n2\r\n" {
				t.Errorf("k after the transactions: %q, want 2", got)
			}
		})
	}
}
