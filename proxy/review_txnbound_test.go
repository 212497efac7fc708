package proxy_test

import (
	"bufio"
	"bytes"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/sluice-rl/sluice/proxy"
	"github.com/sluice-rl/sluice/router/clustertest"
)

// A transaction's bound (README: 64 MiB) is what sluice holds for it, not
// only its commands' bytes: queued PINGs, 14 bytes each, also held 16
// bytes of bookkeeping each, so a client that queued up to the bound had
// 168 to 180 MiB of heap held for it until EXEC. Both serving paths.
func TestTransactionBoundIsWhatItHolds(t *testing.T) {
	c := clustertest.New(t, clustertest.Config{Replicas: -1})
	r := newForwarding(t, c)
	eachIOConfig(t, proxy.Config{Decider: r, Forwarder: r}, func(t *testing.T, cfg proxy.Config) {
		addr := serveConfig(t, cfg)
		cl := dialRaw(t, addr)
		before := heapInuse()
		cl.c.SetDeadline(time.Now().Add(2 * time.Minute))
		// The replies are read to the end: the PINGs written after the
		// refusal, before the writer sees it, are answered too, and
		// unread those answers would stop sluice reading the client, and
		// the writer with it.
		refused := make(chan string, 1)
		go func() {
			br := bufio.NewReaderSize(cl.c, 1<<20)
			first := true
			for {
				line, err := br.ReadString('\n')
				if first && (err != nil || strings.HasPrefix(line, "-")) {
					refused <- line
					first = false
				}
				if err != nil {
					return
				}
			}
		}()
		if _, err := cl.c.Write([]byte("*1\r\n$5\r\nMULTI\r\n")); err != nil {
			t.Fatal(err)
		}
		chunk := bytes.Repeat([]byte("*1\r\n$4\r\nPING\r\n"), 10000)
		var got string
	send:
		for sent := 0; sent < 6_000_000; sent += 10000 {
			select {
			case got = <-refused:
				break send
			default:
			}
			if _, err := cl.c.Write(chunk); err != nil {
				t.Fatal(err)
			}
		}
		if got == "" {
			got = <-refused
		}
		if want := "-ERR sluice: a transaction may queue at most 64 MiB\r\n"; got != want {
			t.Fatalf("got %q, want %q", got, want)
		}
		grew := heapInuse() - before
		t.Logf("heap grew %d MiB with the transaction queued", grew>>20)
		// The bound, what append leaves spare as it grows the slices (a quarter
		// at this size) and the sockets' buffers.
		if grew > 112<<20 {
			t.Errorf("heap grew %d MiB for a transaction bounded at 64 MiB", grew>>20)
		}
	})
}

func heapInuse() int64 {
	var m runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&m)
	return int64(m.HeapInuse)
}
