package proxy_test

import (
	"crypto/sha1"
	"encoding/hex"
	"strconv"
	"testing"

	"github.com/sluice-rl/sluice/proxy"
	"github.com/sluice-rl/sluice/router"
	"github.com/sluice-rl/sluice/router/clustertest"
)

// With --read-from-replicas an EVALSHA_RO pipelined right behind the
// SCRIPT LOAD of its script goes to a replica, which never gets the
// script (SCRIPT LOAD goes to the primaries). Its NOSCRIPT came back
// before the primaries had answered the load, so the replay looked the
// script up before sluice had stored it, and the client got NOSCRIPT for
// a script it had just loaded.
func TestReviewScriptsEvalshaROPipelinedBehindItsLoad(t *testing.T) {
	c := clustertest.New(t, clustertest.Config{})
	const k = "{rsro}k"
	for _, loops := range []int{0, -1} {
		r := newRouterConfig(t, router.ClusterConfig{Seeds: c.Addrs(), ReadFromReplicas: true})
		waitRouter(t, r)
		conn := dialRaw(t, serveConfig(t, proxy.Config{Decider: r, Forwarder: r, Loops: loops}))
		// A replica is in the slot map once it has replicated something.
		if got := conn.do("SET", k, "v"); got != "+OK\r\n" {
			t.Fatalf("SET: %q", got)
		}
		for i := range 20 {
			script := "return redis.call('GET', KEYS[1]) -- " + strconv.Itoa(loops) + " " + strconv.Itoa(i)
			sum := sha1.Sum([]byte(script))
			sha := hex.EncodeToString(sum[:])
			conn.send([]string{"SCRIPT", "LOAD", script}, []string{"EVALSHA_RO", sha, "1", k})
			if got := conn.read(); got != "$40\r\n"+sha+"\r\n" {
				t.Fatalf("loops %d: SCRIPT LOAD: %q", loops, got)
			}
			if got := conn.read(); got != "$1\r\nv\r\n" {
				t.Fatalf("loops %d, script %d: EVALSHA_RO pipelined behind its SCRIPT LOAD: %q", loops, i, got)
			}
		}
	}
}
