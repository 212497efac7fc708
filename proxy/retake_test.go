package proxy_test

import (
	"context"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluice-rl/sluice/proxy"
	"github.com/sluice-rl/sluice/router"
	"github.com/sluice-rl/sluice/router/clustertest"
	"github.com/sluice-rl/sluice/router/reply"
	"github.com/sluice-rl/sluice/router/slot"
)

// churn is a Forwarder whose slot map changes at each command routed: a
// client's command routed by its keys waits whenever one it sent before
// is still in flight (errRouteAgain), the most a real move could ask.
type churn struct {
	*router.Cluster
	n atomic.Uint64
}

func (c *churn) Route(cmds []router.Forward) uint64 {
	c.Cluster.Route(cmds)
	return c.n.Add(1)
}

// A command taken again (errRouteAgain) gets the replies, in order and
// once each, that it gets taken at once, and INFO counts it once: around
// CLIENT REPLY SKIP/OFF/ON, MULTI/EXEC, WATCH, BLPOP, SUBSCRIBE, QUIT and
// split commands, with a client that ends its side at once, on both
// serving paths, in RESP2 and RESP3.
func TestRetakenCommandsKeepTheirReplies(t *testing.T) {
	c := clustertest.New(t, clustertest.Config{Replicas: -1})
	r := newForwarding(t, c)
	scenarios := map[string][][]string{
		"pushes": {{"RPUSH", "{rt}a", "1"}, {"RPUSH", "{rt}a", "2"}, {"GET", "{rt}b"}, {"RPUSH", "{rt}a", "3"}, {"LRANGE", "{rt}a", "0", "-1"}},
		"reply": {{"RPUSH", "{rt}a", "1"}, {"CLIENT", "REPLY", "SKIP"}, {"RPUSH", "{rt}a", "2"}, {"RPUSH", "{rt}a", "3"},
			{"CLIENT", "REPLY", "OFF"}, {"RPUSH", "{rt}a", "4"}, {"RPUSH", "{rt}a", "5"}, {"CLIENT", "REPLY", "ON"}, {"RPUSH", "{rt}a", "6"}, {"LRANGE", "{rt}a", "0", "-1"}},
		"multi":     {{"RPUSH", "{rt}a", "1"}, {"MULTI"}, {"RPUSH", "{rt}a", "2"}, {"RPUSH", "{rt}a", "3"}, {"EXEC"}, {"RPUSH", "{rt}a", "4"}, {"LRANGE", "{rt}a", "0", "-1"}},
		"watch":     {{"RPUSH", "{rt}a", "1"}, {"WATCH", "{rt}a"}, {"GET", "{rt}b"}, {"MULTI"}, {"RPUSH", "{rt}a", "2"}, {"EXEC"}, {"RPUSH", "{rt}a", "3"}, {"LRANGE", "{rt}a", "0", "-1"}},
		"block":     {{"RPUSH", "{rt}a", "1"}, {"RPUSH", "{rt}a", "2"}, {"BLPOP", "{rt}a", "0"}, {"RPUSH", "{rt}a", "3"}, {"BLPOP", "{rt}a", "0"}, {"LRANGE", "{rt}a", "0", "-1"}},
		"subscribe": {{"RPUSH", "{rt}a", "1"}, {"SUBSCRIBE", "ch"}, {"PING"}, {"UNSUBSCRIBE"}, {"RPUSH", "{rt}a", "2"}, {"LRANGE", "{rt}a", "0", "-1"}},
		"quit":      {{"RPUSH", "{rt}a", "1"}, {"RPUSH", "{rt}a", "2"}, {"QUIT"}, {"RPUSH", "{rt}a", "3"}},
		"mget":      {{"SET", "{rt}a", "1"}, {"SET", "{rt}b", "2"}, {"MGET", "{rt}a", "x", "{rt}b", "y"}, {"MSET", "x", "1", "{rt}a", "3"}, {"MGET", "{rt}a", "x"}},
	}
	for _, loops := range []int{1, -1} {
		for _, hello := range []string{"", "HELLO 3"} {
			for name, cmds := range scenarios {
				if hello != "" {
					cmds = append([][]string{strings.Fields(hello)}, cmds...)
				}
				var got [2]string
				var llen [2]string
				for i, fw := range []proxy.Forwarder{r, &churn{Cluster: r}} {
					addr := serveConfig(t, proxy.Config{Decider: r, Forwarder: fw, Loops: loops})
					setup := dialRaw(t, addr)
					setup.do("DEL", "{rt}a", "{rt}b", "x", "y")
					conn := dialRaw(t, addr)
					conn.send(cmds...)
					got[i] = conn.endAndReadAll()
					llen[i] = setup.do("LRANGE", "{rt}a", "0", "-1")
					info := setup.do("INFO", "stats")
					at := strings.Index(info, "total_commands_processed:")
					llen[i] += info[at : at+strings.Index(info[at:], "\r")]
				}
				if got[0] != got[1] || llen[0] != llen[1] {
					t.Errorf("loops %d %q %s:\nat once %q (%q)\nretaken %q (%q)", loops, hello, name, got[0], llen[0], got[1], llen[1])
				}
			}
		}
	}
}

// Shutdown while a client's command waits to be taken again: every push
// sluice read is run and answered, as Shutdown answers every command it
// has read (a loop dropped those not taken yet until 9dc3662), and
// Shutdown ends. Both serving paths.
func TestShutdownWhileACommandWaitsToBeRetaken(t *testing.T) {
	c := clustertest.New(t, clustertest.Config{Replicas: -1})
	r := newForwarding(t, c)
	for _, loops := range []int{1, -1} {
		fw := &churn{Cluster: r}
		srv, ln, _ := startServer(t, proxy.Config{Decider: r, Forwarder: fw, Backend: "test", Loops: loops})
		key := "{shutretake}" + strconv.Itoa(-loops)
		direct(t, c, slot.Of(key), "DEL", key)
		conn := dialRaw(t, ln.Addr().String())
		cmds := [][]string{{"EVAL", "local i=0 while i<20000000 do i=i+1 end return i", "0"}}
		for i := range 20 {
			cmds = append(cmds, []string{"RPUSH", key, strconv.Itoa(i)})
		}
		conn.send(cmds...)
		waitUntil(t, "the pipeline is read", func() bool { return fw.n.Load() >= 2 })
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		start := time.Now()
		err := srv.Shutdown(ctx)
		cancel()
		t.Logf("loops %d: Shutdown %v after %v", loops, err, time.Since(start))
		conn.c.SetReadDeadline(time.Now().Add(5 * time.Second))
		pushes := 0
		for {
			b, err := reply.Read(conn.br, nil)
			if err != nil {
				break
			}
			if b[0] == ':' && len(b) < 8 {
				pushes++
			}
		}
		llen := direct(t, c, slot.Of(key), "LLEN", key)
		t.Logf("loops %d: %d pushes answered, LLEN %q", loops, pushes, llen)
		if pushes != 20 || llen != ":20\r\n" {
			t.Errorf("loops %d: %d pushes answered, LLEN %q; want all 20", loops, pushes, llen)
		}
		srv.Close()
	}
}
