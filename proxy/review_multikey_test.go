package proxy_test

import (
	"strconv"
	"testing"

	"github.com/sluice-rl/sluice/proxy"
	"github.com/sluice-rl/sluice/router/clustertest"
	hashslot "github.com/sluice-rl/sluice/router/slot"
)

// A WATCHing client's commands go on its own connection to the watched
// key's primary; KEYS, CLUSTER COUNTKEYSINSLOT (and DBSIZE, INFO's
// keyspace, FLUSHALL, ...) go on sluice's other connections. Pipelined
// around a SET and a DEL on the watch's connection, they ran before the
// SET and after the DEL (every time: that connection is dialled at the
// client's first command), where Redis runs a client's commands in order.
func TestWatchingClientsWholeKeyspaceCommandsKeepTheirOrder(t *testing.T) {
	c := clustertest.New(t, clustertest.Config{Replicas: -1})
	r := newForwarding(t, c)
	slot := strconv.Itoa(hashslot.Of("{mk}k"))
	for _, loops := range []int{1, -1} {
		addr := serveConfig(t, proxy.Config{Decider: r, Forwarder: r, Loops: loops})
		for i := range 3 {
			conn := dialRaw(t, addr)
			conn.send([]string{"WATCH", "{mk}w"}, []string{"SET", "{mk}k", "v"},
				[]string{"KEYS", "{mk}k"},
				[]string{"CLUSTER", "COUNTKEYSINSLOT", slot},
				[]string{"DEL", "{mk}k"}, []string{"KEYS", "{mk}k"}, []string{"UNWATCH"})
			got := make([]string, 7)
			for j := range got {
				got[j] = conn.read()
			}
			if got[2] != "*1\r\n$5\r\n{mk}k\r\n" || got[3] != ":1\r\n" || got[4] != ":1\r\n" || got[5] != "*0\r\n" {
				t.Errorf("loops %d, try %d: %q", loops, i, got)
			}
			conn.c.Close()
		}
	}
}
