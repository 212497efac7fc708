package router

import (
	"strings"
	"testing"

	"github.com/sluice-rl/sluice/router/clustertest"
)

// Scripts run by EVAL are kept for NOSCRIPT replay up to maxLoadBytes of
// text, not only up to maxScripts: a client running distinct large
// scripts held up to maxScripts times their size (500 of 200 KB: 125 MB,
// measured) until a SCRIPT FLUSH.
func TestEvaledScriptsKeptWithinTheirBytes(t *testing.T) {
	cc := clustertest.New(t, clustertest.Config{Replicas: -1})
	c, _ := connectedCluster(t, ClusterConfig{Seeds: cc.Addrs()})
	kept := func() (int, int) {
		c.scripts.mu.RLock()
		defer c.scripts.mu.RUnlock()
		return len(c.scripts.known), c.scripts.knownBytes
	}
	big := func(tag string) []byte {
		return []byte("return '" + tag + "' --" + strings.Repeat("x", maxLoadBytes/2))
	}
	c.rememberRan(big("a"), 0)
	c.rememberRan(big("b"), 0) // past maxLoadBytes with the first
	if n, bytes := kept(); n != 1 || bytes != len(big("a")) {
		t.Fatalf("after two scripts of half the bound each: %d kept, %d bytes; want the first alone", n, bytes)
	}
	small := []byte("return 'small'")
	c.rememberRan(small, 0)
	if n, bytes := kept(); n != 2 || bytes != len(big("a"))+len(small) {
		t.Fatalf("a small script after them: %d kept, %d bytes; want it kept too", n, bytes)
	}
	c.ForgetScripts()
	c.rememberRan(big("b"), c.ScriptsGen())
	if n, bytes := kept(); n != 1 || bytes != len(big("b")) {
		t.Fatalf("after a flush: %d kept, %d bytes; want the flushed bytes given back", n, bytes)
	}
}
