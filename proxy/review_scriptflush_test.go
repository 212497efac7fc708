package proxy_test

import (
	"crypto/sha1"
	"encoding/hex"
	"strconv"
	"testing"

	"github.com/sluice-rl/sluice/proxy"
	"github.com/sluice-rl/sluice/router/clustertest"
)

// An EVAL or SCRIPT LOAD pipelined before a SCRIPT FLUSH was answered
// after sluice had forgotten its scripts for the flush: it was stored
// again, behind the flush's delete of sluice.scripts, and an EVALSHA of it
// after the flush was replayed (and ran) where Redis answers NOSCRIPT, by
// every instance, until the next flush.
func TestReviewScriptsFlushPipelinedAfterEvalOrLoad(t *testing.T) {
	c := clustertest.New(t, clustertest.Config{Replicas: -1})
	r := newForwarding(t, c)
	eachIOConfig(t, proxy.Config{Decider: r, Forwarder: r, AllowAdmin: true}, func(t *testing.T, cfg proxy.Config) {
		conn := dialRaw(t, serveConfig(t, cfg))
		io := strconv.Itoa(-cfg.Loops)
		k := keyWhere(t, c, "rsf"+io, "k", func(n *clustertest.Node, _ string) bool { return n == c.Nodes[0] })
		for _, first := range []string{"EVAL", "SCRIPT LOAD"} {
			body := "return 'flushed " + first + " " + io + "'"
			sum := sha1.Sum([]byte(body))
			sha := hex.EncodeToString(sum[:])
			if first == "EVAL" {
				conn.send([]string{"EVAL", body, "1", k}, []string{"SCRIPT", "FLUSH"})
			} else {
				conn.send([]string{"SCRIPT", "LOAD", body}, []string{"SCRIPT", "FLUSH"})
			}
			if got := conn.read(); got[0] != '$' {
				t.Fatalf("%s: %q", first, got)
			}
			if got := conn.read(); got != "+OK\r\n" {
				t.Fatalf("SCRIPT FLUSH after %s: %q", first, got)
			}
			// The cluster is told in order, on a goroutine of its own: once
			// a script loaded after the flush is in sluice.scripts, what
			// came before it has been written too.
			marker := "return 'after " + first + " " + io + "'"
			msum := sha1.Sum([]byte(marker))
			if got := conn.do("SCRIPT", "LOAD", marker); got[0] != '$' {
				t.Fatalf("SCRIPT LOAD of the marker: %q", got)
			}
			waitUntil(t, "the marker script is stored", func() bool {
				return conn.do("HEXISTS", "sluice.scripts", hex.EncodeToString(msum[:])) == ":1\r\n"
			})
			if got := conn.do("HEXISTS", "sluice.scripts", sha); got != ":0\r\n" {
				t.Errorf("after %s, SCRIPT FLUSH: the script is in sluice.scripts (%q)", first, got)
			}
			if got, want := conn.do("EVALSHA", sha, "1", k), "-NOSCRIPT No matching script. Please use EVAL.\r\n"; got != want {
				t.Errorf("EVALSHA after %s, SCRIPT FLUSH: %q, want %q", first, got, want)
			}
		}
	})
}
