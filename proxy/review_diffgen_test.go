package proxy_test

import (
	"strconv"
	"testing"

	"github.com/sluice-rl/sluice/proxy"
	"github.com/sluice-rl/sluice/router/clustertest"
	hashslot "github.com/sluice-rl/sluice/router/slot"
)

// A WATCHing client's command on keys of another primary meets MOVED on
// its WATCH connection and goes on sluice's connection of the client's
// protocol to their primary. Pipelined RPUSH k, WATCH w, DEL k, HELLO 3,
// DEL w k (k's primary not w's) answered the first DEL 0: the second,
// sent after the switch on a RESP3 connection, ran before it (found by
// TestPathsAnswerAlike, PATHS_KEYSPACE=1, seed 1340). Redis runs a
// client's commands in order.
func TestWatchingClientsHelloKeepsCommandsOnOtherPrimariesInOrder(t *testing.T) {
	c := clustertest.New(t, clustertest.Config{Replicas: -1})
	r := newForwarding(t, c)
	w := "{hw}w"
	tag := 0
	for hashslot.Of(strconv.Itoa(tag)) < 10923 == (hashslot.Of(w) < 10923) ||
		hashslot.Of(strconv.Itoa(tag)) < 5461 == (hashslot.Of(w) < 5461) {
		tag++ // a key of another primary than w's, of three
	}
	for _, loops := range []int{1, -1} {
		addr := serveConfig(t, proxy.Config{Decider: r, Forwarder: r, Loops: loops})
		for i := range 5 {
			k := "{" + strconv.Itoa(tag) + "}hk" + strconv.Itoa(loops) + "." + strconv.Itoa(i)
			conn := dialRaw(t, addr)
			conn.send([]string{"RPUSH", k, "m"}, []string{"WATCH", w}, []string{"DEL", k},
				[]string{"HELLO", "3"}, []string{"DEL", w, k})
			got := make([]string, 5)
			for j := range got {
				got[j] = conn.read()
			}
			if got[2] != ":1\r\n" || got[4] != ":0\r\n" {
				t.Errorf("loops %d, try %d: DEL answered %q, the DEL after HELLO %q", loops, i, got[2], got[4])
			}
			conn.c.Close()
		}
	}
}
