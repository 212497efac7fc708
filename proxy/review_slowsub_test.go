package proxy_test

import (
	"context"
	"io"
	"net"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sluice-rl/sluice/proxy"
	"github.com/sluice-rl/sluice/router/clustertest"
)

// A client that pipelines reads of big values and reads nothing is closed
// by the hard output limit, as Redis closes it; the replies its commands
// still get from the node are read and dropped. They were kept until the
// last command of the loop's pass (a goroutine's pipeline) was answered:
// 48 MiB held for a client long gone while a write at the end of its
// pipeline waited, where Redis frees a client's replies as it closes it.
// A write held by CLIENT PAUSE keeps that pass open while the heap is
// measured. Both serving paths.
func TestReviewClosedClientsRepliesAreNotKept(t *testing.T) {
	c := clustertest.New(t, clustertest.Config{Replicas: -1})
	r := newForwarding(t, c)
	ctx := context.Background()
	const n, size = 48, 1 << 20
	key := "{slowsub}big"
	node := primaryOf(t, c, key)
	if err := node.Do(ctx, "SET", key, strings.Repeat("v", size)).Error(); err != nil {
		t.Fatal(err)
	}
	getCalls := regexp.MustCompile(`cmdstat_get:calls=(\d+)`)
	gets := func() int {
		s, err := node.Do(ctx, "INFO", "commandstats").ToString()
		if err != nil {
			t.Fatal(err)
		}
		m := getCalls.FindStringSubmatch(s)
		if m == nil {
			return 0
		}
		got, _ := strconv.Atoi(m[1])
		return got
	}
	eachIOConfig(t, proxy.Config{Decider: r, Forwarder: r, OutputLimit: proxy.OutputLimit{Hard: size}}, func(t *testing.T, cfg proxy.Config) {
		addr := serveConfig(t, cfg)
		var before runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		from := gets()

		if err := node.Do(ctx, "CLIENT", "PAUSE", "20000", "WRITE").Error(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { node.Do(ctx, "CLIENT", "UNPAUSE") })
		hog := dialRaw(t, addr)
		hog.c.(*net.TCPConn).SetReadBuffer(4 << 10)
		cmds := make([][]string, 0, n+1)
		for range n {
			cmds = append(cmds, []string{"GET", key})
		}
		hog.send(append(cmds, []string{"SET", key + ":after", "1"})...)

		// Every GET answered by the node, and its replies sent on to sluice.
		waitUntil(t, "the node answers the GETs", func() bool { return gets()-from >= n })
		waitUntil(t, "the node's output buffers empty", func() bool {
			s, err := node.Do(ctx, "CLIENT", "LIST").ToString()
			if err != nil {
				t.Fatal(err)
			}
			return !regexp.MustCompile(`omem=[1-9]`).MatchString(s)
		})
		var after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&after)
		grew := int64(after.HeapInuse) - int64(before.HeapInuse)
		t.Logf("heap grew %d KiB", grew>>10)
		if grew > 16<<20 {
			t.Errorf("heap grew %d MiB for a client closed past its output limit of %d MiB", grew>>20, size>>20)
		}

		if err := node.Do(ctx, "CLIENT", "UNPAUSE").Error(); err != nil {
			t.Fatal(err)
		}
		hog.c.SetReadDeadline(time.Now().Add(5 * time.Second))
		if _, err := io.Copy(io.Discard, hog.br); err != nil {
			t.Errorf("the client past its output limit: %v, want it closed", err)
		}
	})
}

// Replies decided behind a command still waiting at its node count toward
// the output limit, as they would in Redis's reply list: a client whose
// first command is held (a write on a node paused for writes) and whose
// 48 reads of a 1 MiB value on another node are answered meanwhile is
// closed past its 1 MiB hard limit at once, not kept open with 48 MiB
// queued until the held command is answered (the event loops counted
// only the replies in order, the goroutine path all of them).
func TestReviewRepliesBehindAWaitingCommandCountTowardTheLimit(t *testing.T) {
	c := clustertest.New(t, clustertest.Config{Replicas: -1})
	r := newForwarding(t, c)
	ctx := context.Background()
	const n, size = 48, 1 << 20
	held := "{held}k"
	paused := primaryOf(t, c, held)
	big := ""
	for i := 0; i < 100 && big == ""; i++ {
		if k := "{big" + strconv.Itoa(i) + "}k"; primaryOf(t, c, k).Addr != paused.Addr {
			big = k
		}
	}
	if big == "" {
		t.Fatal("no key off the paused primary in 100 tries")
	}
	if err := primaryOf(t, c, big).Do(ctx, "SET", big, strings.Repeat("v", size)).Error(); err != nil {
		t.Fatal(err)
	}
	eachIOConfig(t, proxy.Config{Decider: r, Forwarder: r, OutputLimit: proxy.OutputLimit{Hard: size}}, func(t *testing.T, cfg proxy.Config) {
		addr := serveConfig(t, cfg)
		if err := paused.Do(ctx, "CLIENT", "PAUSE", "15000", "WRITE").Error(); err != nil {
			t.Fatal(err)
		}
		defer paused.Do(ctx, "CLIENT", "UNPAUSE")
		hog := dialRaw(t, addr)
		cmds := [][]string{{"SET", held, "1"}}
		for range n {
			cmds = append(cmds, []string{"GET", big})
		}
		hog.send(cmds...)
		// Closed while the SET is still held: nothing of its pipeline
		// comes back (the SET's reply is first), and the read ends well
		// before the pause would.
		hog.c.SetReadDeadline(time.Now().Add(8 * time.Second))
		got, err := io.Copy(io.Discard, hog.br)
		if err != nil {
			t.Fatalf("the client past its output limit behind a held command: %v after %d bytes, want it closed", err, got)
		}
		if got != 0 {
			t.Errorf("read %d bytes before the close, want none: the held SET's reply is first", got)
		}
	})
}
