package proxy_test

import (
	"context"
	"crypto/sha1"
	"encoding/hex"
	"testing"

	"github.com/sluice-rl/sluice/proxy"
	"github.com/sluice-rl/sluice/router/clustertest"
)

// A SCRIPT FLUSH every node refuses (an option other than ASYNC or SYNC)
// flushes nothing there. sluice forgot its scripts all the same, and
// deleted the cluster's record of them: a node that lost a script
// afterwards (a restart, a promoted replica, a SCRIPT FLUSH sent to it
// alone) answered NOSCRIPT to an EVALSHA sluice would have replayed.
func TestReviewScanRefusedScriptFlushForgetsNothing(t *testing.T) {
	c := clustertest.New(t, clustertest.Config{Replicas: -1})
	r := newForwarding(t, c)
	admin := dialRaw(t, serveConfig(t, proxy.Config{Decider: r, Forwarder: r, AllowAdmin: true}))
	body := "return 'kept'"
	sum := sha1.Sum([]byte(body))
	sha := hex.EncodeToString(sum[:])
	if got := admin.do("SCRIPT", "LOAD", body); got != "$40\r\n"+sha+"\r\n" {
		t.Fatalf("SCRIPT LOAD: %q", got)
	}
	for _, bad := range [][]string{{"SCRIPT", "FLUSH", "NOW"}, {"SCRIPT", "FLUSH", "SYNC", "ASYNC"}} {
		want := direct(t, c, -1, bad...)
		if want[0] != '-' {
			t.Fatalf("a node answers %q: %q, want an error", bad, want)
		}
		if got := admin.do(bad...); got != want {
			t.Fatalf("%q: %q, want the node's %q", bad, got, want)
		}
	}
	if got := admin.do("HEXISTS", "sluice.scripts", sha); got != ":1\r\n" {
		t.Errorf("the cluster's record of the script after refused SCRIPT FLUSHes: HEXISTS %q, want :1", got)
	}
	key := keyWhere(t, c, "rsf", "k", func(n *clustertest.Node, _ string) bool { return n == c.Nodes[0] })
	if err := c.Nodes[0].Do(context.Background(), "SCRIPT", "FLUSH").Error(); err != nil {
		t.Fatal(err)
	}
	if got := admin.do("EVALSHA", sha, "1", key); got != "$4\r\nkept\r\n" {
		t.Errorf("EVALSHA on a node flushed alone, after refused SCRIPT FLUSHes through sluice: %q, want the script's reply", got)
	}
}
