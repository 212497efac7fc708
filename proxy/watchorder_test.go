package proxy_test

import (
	"strings"
	"testing"

	"github.com/sluice-rl/sluice/proxy"
	"github.com/sluice-rl/sluice/router/clustertest"
)

// A WATCH pipelined after a write to its key is not broken by it: the
// write ran before the WATCH, in Redis. The WATCH went on the client's
// own connection at once, and could run before the write, still on its
// way on another: EXEC answered null (RESP3: 3 of 10 on a loop, 1 of 10
// on goroutines). Each client on a server of its own, whose connections
// to the nodes are new.
func TestWatchAfterAPipelinedWriteToItsKey(t *testing.T) {
	c := clustertest.New(t, clustertest.Config{Replicas: -1})
	r := newForwarding(t, c)
	for _, loops := range []int{1, -1} {
		for _, hello := range []string{"HELLO 2", "HELLO 3"} {
			bad := 0
			for range 10 {
				addr := serveConfig(t, proxy.Config{Decider: r, Forwarder: r, Loops: loops})
				conn := dialRaw(t, addr)
				conn.send(strings.Fields(hello), []string{"RPUSH", "{wa}a", "1"}, []string{"WATCH", "{wa}a"}, []string{"MULTI"}, []string{"RPUSH", "{wa}a", "2"}, []string{"EXEC"})
				for range 5 {
					conn.read()
				}
				if got := conn.read(); got[0] != '*' {
					bad++
				}
				conn.c.Close()
			}
			if bad > 0 {
				t.Errorf("loops %d, %s: %d of 10 EXEC aborted", loops, hello, bad)
			}
		}
	}
}
