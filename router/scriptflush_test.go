package router

import (
	"testing"
	"time"

	"github.com/sluice-rl/sluice/router/clustertest"
)

// A lookup in sluice.scripts queued before a SCRIPT FLUSH through this
// instance, and so sent before the flush's deletion, replays its EVALSHA
// (sent before the flush) but does not keep the script for new
// connections: loaded there, the flushed script would be back on the
// node, and an EVALSHA after the flush's reply would run where Redis
// answers NOSCRIPT.
func TestLookupAnsweredAfterAFlushIsNotLoadedOnNewConnections(t *testing.T) {
	cc := clustertest.New(t, clustertest.Config{Replicas: -1})
	c, ctx := connectedCluster(t, ClusterConfig{Seeds: cc.Addrs()})
	body := "return 'flushed'"
	sha := shaOf([]byte(body))
	if err := (*c.client.Load()).Do(ctx, (*c.client.Load()).B().Hset().Key(scriptsKey).FieldValue().FieldValue(sha, body).Build()).Error(); err != nil {
		t.Fatal(err)
	}
	// The first lookup's answer holds the goroutine that sends them, so
	// that the second is queued before the flush, and answered after it.
	entered, release := make(chan struct{}), make(chan struct{})
	c.scriptText(shaOf([]byte("return 'another'")), func(string, bool) {
		close(entered)
		<-release
	})
	<-entered
	found := make(chan bool, 1)
	c.scriptText(sha, func(_ string, ok bool) { found <- ok })
	c.ForgetScripts()
	close(release)
	select {
	case ok := <-found:
		if !ok {
			t.Fatal("the lookup queued before the flush did not find the script")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the lookup is not answered")
	}
	if cmds, n := c.loadCmds(); n != 0 {
		t.Errorf("after the flush, new connections load %d scripts (%q), want none", n, cmds)
	}
}
