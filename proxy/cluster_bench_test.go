package proxy_test

import (
	"bytes"
	"net"
	"strconv"
	"testing"

	"github.com/sluice-rl/sluice/proxy"
	"github.com/sluice-rl/sluice/router"
	"github.com/sluice-rl/sluice/router/clustertest"
)

// BenchmarkClusterThrottle is a THROTTLE decided on a real three-primary
// cluster, end to end in this process: a client pipelines batches of
// THROTTLEs (depth at a time) on 4096 keys over loopback, the server frames, parses and
// batches them, the router sends each shard's steps as one many-bucket
// script call, parses the replies and the server writes the decisions
// back. One op is one decision: with -benchmem, allocs/op is what a
// decision costs the whole process (the client's reading allocates
// nothing). "loop" is the event loop with its own bucket pipes; "goroutine"
// the path of --io-loops -1 (and TLS).
func BenchmarkClusterThrottle(b *testing.B) {
	c := clustertest.New(b, clustertest.Config{Replicas: -1})
	r := newRouter(b, c)
	const keys = 4096
	for _, tt := range []struct {
		name         string
		loops, depth int
	}{{"loop/depth=1", 1, 1}, {"loop/depth=64", 1, 64}, {"goroutine/depth=1", -1, 1}, {"goroutine/depth=64", -1, 64}} {
		b.Run(tt.name, func(b *testing.B) {
			depth := tt.depth
			batches := make([][]byte, keys/depth)
			for k := range keys {
				batches[k/depth] = router.AppendCommand(batches[k/depth], [][]byte{[]byte("THROTTLE"), []byte("bench:" + strconv.Itoa(k)), []byte("1000000"), []byte("1000000"), []byte("1s")})
			}
			addr := serveConfig(b, proxy.Config{Decider: r, Loops: tt.loops})
			conn, err := net.Dial("tcp", addr)
			if err != nil {
				b.Fatal(err)
			}
			defer conn.Close()
			buf := make([]byte, 64<<10)
			// run sends n decisions, depth at a time, and reads their
			// replies: each is an array of five integers, the only '*' in it.
			run := func(n int) {
				for sent, bi := 0, 0; sent < n; bi++ {
					batch := batches[bi%len(batches)]
					if _, err := conn.Write(batch); err != nil {
						b.Fatal(err)
					}
					for got := 0; got < depth; {
						k, err := conn.Read(buf)
						if err != nil {
							b.Fatal(err)
						}
						if bytes.Contains(buf[:k], []byte("-ERR")) {
							b.Fatalf("error reply: %q", buf[:k])
						}
						got += bytes.Count(buf[:k], []byte("*"))
					}
					sent += depth
				}
			}
			run(keys) // every key's bucket exists, the pipes are dialled
			b.ReportAllocs()
			b.ResetTimer()
			run(b.N)
		})
	}
}
