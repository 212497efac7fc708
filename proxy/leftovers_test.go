package proxy_test

import (
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluice-rl/sluice/proxy"
	"github.com/sluice-rl/sluice/router"
	"github.com/sluice-rl/sluice/router/clustertest"
	"github.com/sluice-rl/sluice/router/reply"
)

// busyScript keeps a node busy for 150ms: it writes nothing meanwhile.
const busyScript = `local t = redis.call('TIME')
local from = t[1] * 1000000 + t[2]
repeat t = redis.call('TIME') until t[1] * 1000000 + t[2] - from > 150000
return 1`

// A node that streams one big reply for longer than the forward timeout,
// never silent for that long (a slow link; here the node is kept busy by
// scripts, and writes some of it between them), is not hung:
// the reply comes through on both serving paths, as the timeout counts
// from the last bytes heard.
func TestPassthroughSlowBigReplyIsNotHung(t *testing.T) {
	c := clustertest.New(t, clustertest.Config{Replicas: -1, NodeTimeout: time.Minute})
	const timeout = 500 * time.Millisecond
	r := newRouterConfig(t, router.ClusterConfig{Seeds: c.Addrs(), Timeout: time.Second, HotThreshold: -1, ForwardTimeout: timeout})
	waitRouter(t, r)
	const key, size = "slowbig", 24 << 20
	node := primaryOf(t, c, key)
	busy := dialRaw(t, node.Addr)
	if got := busy.do("SET", key, strings.Repeat("v", size)); got != "+OK\r\n" {
		t.Fatalf("SET: %q", got)
	}
	head := "$" + strconv.Itoa(size) + "\r\n"
	for _, loops := range []int{1, -1} {
		conn := dialRaw(t, serveConfig(t, proxy.Config{Decider: r, Forwarder: r, Loops: loops}))
		if got := conn.do("STRLEN", key); got != ":"+strconv.Itoa(size)+"\r\n" {
			t.Fatalf("loops %d: STRLEN: %q", loops, got)
		}
		var done atomic.Bool
		busy.send([]string{"EVAL", busyScript, "0"})
		start := time.Now()
		conn.send([]string{"GET", key})
		got := make(chan string, 1)
		go func() {
			conn.c.SetReadDeadline(time.Now().Add(60 * time.Second))
			b, err := reply.Read(conn.br, nil)
			if err != nil {
				b = []byte("read: " + err.Error())
			}
			done.Store(true)
			got <- string(b)
		}()
		// What the node has sent to others than busy (to sluice): its
		// total output less busy's replies, INFO's own included, which
		// would otherwise pass for the reply moving after 40 polls or so.
		var mine int64
		others := func() int64 {
			info := busy.do("INFO", "stats")
			_, v, _ := strings.Cut(info, "total_net_output_bytes:")
			v, _, _ = strings.Cut(v, "\r\n")
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				t.Fatalf("INFO stats: %q", info)
			}
			n -= mine
			mine += int64(len(info))
			return n
		}
		// The next script starts once the node has sent more of the reply
		// since the last one ended, so that it is never silent for more
		// than one script whatever the machine's load: counted from the
		// start, or with INFO's answers, a gate could pass with nothing
		// written to sluice since the last script (at once on the second
		// path, which the first's reply had passed), and a loaded sluice
		// that stalled while the node ran one script would find it in the
		// next. More than any answer of the router's own.
		scripts := 1
		for ; ; scripts++ {
			r := busy.read()
			if r != ":1\r\n" {
				t.Fatalf("the busy script: %q", r)
			}
			mine += int64(len(r))
			from := others()
			waitUntil(t, "the node sends more of the reply", func() bool {
				return others()-from > 16<<10 || done.Load()
			})
			if done.Load() {
				break
			}
			busy.send([]string{"EVAL", busyScript, "0"})
		}
		r := <-got
		took := time.Since(start)
		t.Logf("loops %d: %d scripts, %v", loops, scripts, took)
		if !strings.HasPrefix(r, head+"vvv") || len(r) != len(head)+size+2 {
			t.Errorf("loops %d: GET of a big value streamed for %v: %q", loops, took, r[:min(len(r), 200)])
		}
		if took < timeout {
			t.Errorf("loops %d: the reply came in %v, not slower than the %v timeout: nothing tested", loops, took, timeout)
		}
	}
}
