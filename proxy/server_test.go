package proxy_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"os"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"
	"github.com/redis/rueidis"

	"github.com/sluice-rl/sluice/proxy"
	"github.com/sluice-rl/sluice/router"
	"github.com/sluice-rl/sluice/router/bucket"
	"github.com/sluice-rl/sluice/router/clustertest"
)

// backend is one way of deciding buckets, with a way to see whether a
// bucket is stored.
type backend struct {
	name    string
	decider proxy.Decider
	stored  func(t *testing.T, key string) bool
}

func memoryBackend() backend {
	m := router.NewMemory(0)
	return backend{name: "embedded", decider: m, stored: func(t *testing.T, key string) bool {
		// A peek under any limit tells a stored (not full) bucket from none.
		res := make([]router.Result, 1)
		iv := mustInterval(t, 1<<20, 1, 1_000_000)
		m.Decide(context.Background(), []router.Request{{Key: key, Interval: iv}}, res)
		return res[0].ResetAfter > 0
	}}
}

func mustInterval(t *testing.T, c, r, p int64) bucket.Interval {
	t.Helper()
	iv, err := bucket.Limit{Capacity: c, Refill: r, Period: p}.Interval()
	if err != nil {
		t.Fatal(err)
	}
	return iv
}

type clusterBackend struct {
	backend
	cluster *clustertest.Cluster
	client  rueidis.Client
}

func newClusterBackend(t *testing.T, cfg clustertest.Config) clusterBackend {
	c := clustertest.New(t, cfg)
	cl, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: c.Addrs(), DisableCache: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	b := clusterBackend{cluster: c, client: cl}
	b.backend = backend{name: "cluster", decider: newRouter(t, c), stored: func(t *testing.T, key string) bool {
		n, err := cl.Do(context.Background(), cl.B().Exists().Key(router.KeyPrefix+key).Build()).AsInt64()
		if err != nil {
			t.Fatal(err)
		}
		return n == 1
	}}
	return b
}

// newRouter is a cluster router on c that has read the slot map. It never
// splits a hot key: these tests hold one bucket to exact admission, and a
// split bucket admits up to a token per sub-bucket less (router's own
// tests cover splitting).
func newRouter(t testing.TB, c *clustertest.Cluster) *router.Cluster {
	t.Helper()
	return newRouterConfig(t, router.ClusterConfig{Seeds: c.Addrs(), Timeout: time.Second, HotThreshold: -1})
}

// newRouterConfig is a cluster router of cfg that has read the slot map.
func newRouterConfig(t testing.TB, cfg router.ClusterConfig) *router.Cluster {
	t.Helper()
	r := router.NewCluster(cfg)
	t.Cleanup(r.Close)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := r.WaitConnected(ctx); err != nil {
		t.Fatalf("router did not connect: %v", err)
	}
	return r
}

// serve starts a sluice server on a free loopback port.
func serve(t testing.TB, d proxy.Decider) string {
	return serveConfig(t, proxy.Config{Decider: d})
}

func serveConfig(t testing.TB, cfg proxy.Config) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	cfg.Backend = "test"
	serveOn(t, ln, cfg)
	return ln.Addr().String()
}

type serveFunc func(testing.TB, proxy.Decider) string

// eachIO runs f with a server that serves clients from event loops, and
// with one that serves each on its own goroutine: both speak the same
// protocol.
func eachIO(t *testing.T, f func(*testing.T, serveFunc)) {
	eachIOConfig(t, proxy.Config{}, func(t *testing.T, cfg proxy.Config) {
		f(t, func(t testing.TB, d proxy.Decider) string {
			cfg.Decider = d
			return serveConfig(t, cfg)
		})
	})
}

// eachIOConfig runs f with cfg set to serve from event loops, and with it
// set to serve each client on its own goroutine.
func eachIOConfig(t *testing.T, cfg proxy.Config, f func(*testing.T, proxy.Config)) {
	for _, m := range []struct {
		name  string
		loops int
	}{{"loops", 0}, {"goroutines", -1}} {
		t.Run(m.name, func(t *testing.T) {
			cfg.Loops = m.loops
			f(t, cfg)
		})
	}
}

func newGoRedis(t testing.TB, addr string) *goredis.Client {
	c := goredis.NewClient(&goredis.Options{Addr: addr, MaxRetries: -1, PoolSize: 64})
	t.Cleanup(func() { c.Close() })
	return c
}

func throttle(t testing.TB, c *goredis.Client, args ...any) []int64 {
	t.Helper()
	v, err := c.Do(context.Background(), args...).Int64Slice()
	if err != nil {
		t.Fatalf("%v: %v", args, err)
	}
	return v
}

func eq(a, b []int64) bool {
	return fmt.Sprint(a) == fmt.Sprint(b)
}

func TestBackends(t *testing.T) {
	cb := newClusterBackend(t, clustertest.Config{Replicas: -1})
	for _, b := range []backend{memoryBackend(), cb.backend} {
		t.Run(b.name, func(t *testing.T) { testBehaviour(t, b) })
	}
	t.Run("cluster/placement", func(t *testing.T) { testPlacement(t, cb) })
	t.Run("cluster/no double spending", func(t *testing.T) {
		testExactAdmission(t, serve(t, cb.decider))
	})
	t.Run("cluster/two proxies admit as one", func(t *testing.T) {
		// The second proxy has a router, client and connections of its
		// own, as a second sluice process would.
		testExactAdmission(t, serve(t, cb.decider), serve(t, newRouter(t, cb.cluster)))
	})
}

// testBehaviour is the shared suite every backend passes.
func testBehaviour(t *testing.T, b backend) {
	addr := serve(t, b.decider)
	c := newGoRedis(t, addr)
	ctx := context.Background()
	key := func(t *testing.T) string { return b.name + ":" + t.Name() }

	t.Run("five allowed then denied", func(t *testing.T) {
		k := key(t)
		for i := int64(4); i >= 0; i-- {
			if got := throttle(t, c, "THROTTLE", k, 5, 1, "1s"); !eq(got[:4], []int64{0, 5, i, -1}) {
				t.Fatalf("got %v, want limited 0 remaining %d", got, i)
			}
		}
		got := throttle(t, c, "THROTTLE", k, 5, 1, "1s")
		if got[0] != 1 || got[2] != 0 || got[3] <= 0 || got[3] > 1000 {
			t.Fatalf("sixth: got %v, want limited 1, retry_after_ms in (0, 1000]", got)
		}
		if got[4] <= 4000 || got[4] > 5000 {
			t.Fatalf("sixth: reset_after_ms %d, want in (4000, 5000]", got[4])
		}
	})

	t.Run("redis-cell README example", func(t *testing.T) {
		if got := throttle(t, c, "CL.THROTTLE", key(t), 15, 30, 60); !eq(got, []int64{0, 16, 15, -1, 2}) {
			t.Fatalf("got %v, want [0 16 15 -1 2]", got)
		}
	})

	t.Run("redis-cell quantity above the bucket", func(t *testing.T) {
		if got := throttle(t, c, "CL.THROTTLE", key(t), 2, 1, 10, 4); !eq(got, []int64{1, 3, 3, -1, 0}) {
			t.Fatalf("got %v, want [1 3 3 -1 0]", got)
		}
	})

	t.Run("redis-cell times in whole seconds rounded up", func(t *testing.T) {
		k := key(t)
		throttle(t, c, "CL.THROTTLE", k, 0, 1, 10)
		// Denied: retry after the 10 s refill, minus the little time since.
		got := throttle(t, c, "CL.THROTTLE", k, 0, 1, 10)
		if !eq(got, []int64{1, 1, 0, 10, 10}) {
			t.Fatalf("got %v, want [1 1 0 10 10]", got)
		}
	})

	t.Run("THROTTLE and CL.THROTTLE share a bucket", func(t *testing.T) {
		k := key(t)
		throttle(t, c, "THROTTLE", k, 10, 1, "1s", 7)
		if got := throttle(t, c, "CL.THROTTLE", k, 9, 1, 1); got[2] != 2 {
			t.Fatalf("CL.THROTTLE after THROTTLE took 7 of 10: got %v, want 2 remaining", got)
		}
	})

	t.Run("cost 0 peeks and writes nothing", func(t *testing.T) {
		k := key(t)
		if got := throttle(t, c, "THROTTLE", k, 3, 1, "1m", 0); !eq(got, []int64{0, 3, 3, -1, 0}) {
			t.Fatalf("got %v, want [0 3 3 -1 0]", got)
		}
		if b.stored(t, k) {
			t.Fatal("a peek on a new key stored a bucket")
		}
		throttle(t, c, "THROTTLE", k, 3, 1, "1m", 2)
		if got := throttle(t, c, "THROTTLE", k, 3, 1, "1m", 0); got[2] != 1 {
			t.Fatalf("peek after taking 2 of 3: got %v, want 1 remaining", got)
		}
		if got := throttle(t, c, "THROTTLE", k, 3, 1, "1m", 1); got[0] != 0 || got[2] != 0 {
			t.Fatalf("the peeks took tokens: got %v", got)
		}
	})

	t.Run("a denial writes nothing", func(t *testing.T) {
		k := key(t)
		if got := throttle(t, c, "THROTTLE", k, 3, 1, "1m", 4); !eq(got, []int64{1, 3, 3, -1, 0}) {
			t.Fatalf("cost above capacity: got %v, want [1 3 3 -1 0]", got)
		}
		if b.stored(t, k) {
			t.Fatal("a denial stored a bucket")
		}
	})

	t.Run("reset", func(t *testing.T) {
		k := key(t)
		if n, err := c.Do(ctx, "THROTTLE.RESET", k).Int64(); err != nil || n != 0 {
			t.Fatalf("reset of a missing bucket: got %d, %v, want 0", n, err)
		}
		throttle(t, c, "THROTTLE", k, 2, 1, "1h", 2)
		if n, err := c.Do(ctx, "THROTTLE.RESET", k).Int64(); err != nil || n != 1 {
			t.Fatalf("reset: got %d, %v, want 1", n, err)
		}
		if got := throttle(t, c, "THROTTLE", k, 2, 1, "1h"); got[0] != 0 || got[2] != 1 {
			t.Fatalf("after reset: got %v, want a full bucket", got)
		}
	})

	t.Run("a pipeline is answered in order", func(t *testing.T) {
		k := key(t)
		p := c.Pipeline()
		var cmds []*goredis.Cmd
		for range 20 {
			cmds = append(cmds, p.Do(ctx, "THROTTLE", k, 10, 1, "1h"))
			p.Do(ctx, "PING")
		}
		reset := p.Do(ctx, "THROTTLE.RESET", k)
		after := p.Do(ctx, "THROTTLE", k, 10, 1, "1h")
		if _, err := p.Exec(ctx); err != nil {
			t.Fatal(err)
		}
		for i, cmd := range cmds {
			got, _ := cmd.Int64Slice()
			wantLimited := int64(0)
			if i >= 10 {
				wantLimited = 1
			}
			if got[0] != wantLimited || got[2] != max(9-int64(i), 0) {
				t.Fatalf("reply %d: got %v, want limited %d remaining %d", i, got, wantLimited, max(9-i, 0))
			}
		}
		if n, _ := reset.Int64(); n != 1 {
			t.Fatalf("reset in the pipeline: got %d, want 1", n)
		}
		if got, _ := after.Int64Slice(); got[2] != 9 {
			t.Fatalf("THROTTLE after the reset in one pipeline: got %v, want 9 remaining", got)
		}
	})

	t.Run("errors", func(t *testing.T) {
		for _, tt := range []struct {
			args []any
			want string
		}{
			{[]any{"THROTTLE", "k", 1, 1}, "ERR wrong number of arguments for 'throttle' command"},
			{[]any{"THROTTLE", "k", 1, 1, 1, 1, 1}, "ERR wrong number of arguments for 'throttle' command"},
			{[]any{"THROTTLE", "k", 0, 1, 1}, "ERR capacity must be a positive integer"},
			{[]any{"THROTTLE", "k", "x", 1, 1}, "ERR capacity must be a positive integer"},
			{[]any{"THROTTLE", "k", "99999999999999999999", 1, 1}, "ERR capacity must be a positive integer"},
			{[]any{"THROTTLE", "k", 1, -1, 1}, "ERR refill must be a positive integer"},
			{[]any{"THROTTLE", "k", 1, 1, "1w"}, "ERR period must be a positive duration like 60, 500ms or 1h"},
			{[]any{"THROTTLE", "k", 1, 1, "0"}, "ERR period must be a positive duration like 60, 500ms or 1h"},
			{[]any{"THROTTLE", "k", 1, 1, "0.5ms"}, "ERR period must be at least 1ms"},
			{[]any{"THROTTLE", "k", 1, 1, 1, -1}, "ERR cost must be a non-negative integer"},
			{[]any{"THROTTLE", "k", int64(1) << 50, 1, "1d"}, "ERR capacity, refill and period out of range"},
			{[]any{"CL.THROTTLE", "k", 1, 1}, "ERR wrong number of arguments for 'cl.throttle' command"},
			{[]any{"CL.THROTTLE", "k", -1, 1, 1}, "ERR max_burst must be a non-negative integer"},
			{[]any{"CL.THROTTLE", "k", 1, 0, 1}, "ERR count must be a positive integer"},
			{[]any{"CL.THROTTLE", "k", 1, 1, "1s"}, "ERR period must be a positive integer (seconds)"},
			{[]any{"CL.THROTTLE", "k", 1, 1, 1, "x"}, "ERR quantity must be a non-negative integer"},
			{[]any{"CL.THROTTLE", "k", "9223372036854775807", 1, 1}, "ERR capacity, refill and period out of range"},
			{[]any{"THROTTLE.RESET"}, "ERR wrong number of arguments for 'throttle.reset' command"},
			{[]any{"FOO", "bar"}, "ERR unknown command 'FOO', with args beginning with: 'bar'"},
			// Redis Cluster's words: sluice answers HELLO and INFO as one.
			{[]any{"SELECT", 1}, "ERR SELECT is not allowed in cluster mode"},
			{[]any{"SELECT", "99999999999"}, "ERR value is out of range, value must between -2147483648 and 2147483647"},
			{[]any{"CLIENT", "NOPE"}, "ERR unknown subcommand 'NOPE'. Try CLIENT HELP."},
			{[]any{"CLIENT", "SETNAME", "a b"}, "ERR Client names cannot contain spaces, newlines or special characters."},
			{[]any{"HELLO", "4"}, "NOPROTO unsupported protocol version"},
			{[]any{"HELLO", "3", "AUTH", "nobody", "x"}, "WRONGPASS"},
			{[]any{"ECHO"}, "ERR wrong number of arguments for 'echo' command"},
			{[]any{"CLUSTER", "MEET", "a", "1"}, "ERR sluice: CLUSTER MEET is cluster administration"},
		} {
			err := c.Do(ctx, tt.args...).Err()
			if err == nil || !strings.HasPrefix(err.Error(), tt.want) {
				t.Errorf("%v: got %v, want %q", tt.args, err, tt.want)
			}
		}
		// Still serving after every error.
		if got, err := c.Ping(ctx).Result(); err != nil || got != "PONG" {
			t.Fatalf("PING after errors: %q, %v", got, err)
		}
	})
}

// testPlacement checks that a bucket lives on the shard of its slot, with a
// TTL no longer than its time to full, and that {tags} co-locate buckets.
func testPlacement(t *testing.T, cb clusterBackend) {
	ctx := context.Background()
	c := newGoRedis(t, serve(t, cb.decider))
	got := throttle(t, c, "THROTTLE", "user:1", 5, 1, "1s", 3)
	slot, err := cb.client.Do(ctx, cb.client.B().ClusterKeyslot().Key(router.KeyPrefix+"user:1").Build()).AsInt64()
	if err != nil {
		t.Fatal(err)
	}
	owner, err := cb.cluster.Primary(ctx, int(slot))
	if err != nil {
		t.Fatal(err)
	}
	// Asked directly, the owner holds the key; no redirect.
	pttl, err := owner.Do(ctx, "PTTL", router.KeyPrefix+"user:1").AsInt64()
	if err != nil {
		t.Fatalf("PTTL on the slot's owner %s: %v", owner.Addr, err)
	}
	// The expiry is the full instant rounded up to the ms, and PTTL counts
	// from the current whole ms: read in the ms the script ran, it is one
	// over reset_after_ms.
	if pttl <= 0 || pttl > got[4]+1 {
		t.Fatalf("PTTL %d ms, want in (0, %d] (reset_after_ms, +1 for rounding)", pttl, got[4]+1)
	}

	throttle(t, c, "THROTTLE", "{user42}:a", 5, 1, "1s")
	throttle(t, c, "THROTTLE", "{user42}:b", 5, 1, "1s")
	var slots []int64
	for _, k := range []string{"{user42}:a", "{user42}:b", "user42"} {
		s, err := cb.client.Do(ctx, cb.client.B().ClusterKeyslot().Key(router.KeyPrefix+k).Build()).AsInt64()
		if err != nil {
			t.Fatal(err)
		}
		slots = append(slots, s)
	}
	want, _ := cb.client.Do(ctx, cb.client.B().ClusterKeyslot().Key("user42").Build()).AsInt64()
	if slots[0] != want || slots[1] != want {
		t.Fatalf("slots of {user42}:a and {user42}:b are %v, want both %d, the slot of user42", slots[:2], want)
	}
	owner, err = cb.cluster.Primary(ctx, int(want))
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"{user42}:a", "{user42}:b"} {
		if n, err := owner.Do(ctx, "EXISTS", router.KeyPrefix+k).AsInt64(); err != nil || n != 1 {
			t.Fatalf("%s is not on %s, the owner of slot %d: %d, %v", k, owner.Addr, want, n, err)
		}
	}

	// A key holding something else is an error, not a bucket overwritten.
	cb.client.Do(ctx, cb.client.B().Lpush().Key(router.KeyPrefix+"list").Element("x").Build())
	if err := c.Do(ctx, "THROTTLE", "list", 5, 1, "1s").Err(); err == nil || !strings.HasPrefix(err.Error(), "WRONGTYPE") {
		t.Fatalf("THROTTLE on a list: got %v, want WRONGTYPE", err)
	}
	// THROTTLE.RESET deletes buckets only: a list, or a string that is no
	// bucket (passthrough can write sluice's keys), is answered WRONGTYPE
	// and kept.
	cb.client.Do(ctx, cb.client.B().Set().Key(router.KeyPrefix+"plain").Value("hello").Build())
	for _, k := range []string{"list", "plain"} {
		if err := c.Do(ctx, "THROTTLE.RESET", k).Err(); err == nil || !strings.HasPrefix(err.Error(), "WRONGTYPE") {
			t.Errorf("THROTTLE.RESET of %s: got %v, want WRONGTYPE", k, err)
		}
		if n, err := cb.client.Do(ctx, cb.client.B().Exists().Key(router.KeyPrefix+k).Build()).AsInt64(); err != nil || n != 1 {
			t.Errorf("%s after THROTTLE.RESET: exists %d, %v; want it kept", k, n, err)
		}
	}
	// A bucket is deleted, and answered 1.
	if n, err := c.Do(ctx, "THROTTLE.RESET", "{user42}:a").Int64(); err != nil || n != 1 {
		t.Errorf("THROTTLE.RESET of a bucket: %d, %v; want 1", n, err)
	}
	if n, err := cb.client.Do(ctx, cb.client.B().Exists().Key(router.KeyPrefix+"{user42}:a").Build()).AsInt64(); err != nil || n != 0 {
		t.Errorf("a bucket after THROTTLE.RESET: exists %d, %v; want it gone", n, err)
	}
	// A bucket full again is kept until the ms after its TAT (PXAT, and
	// Redis expires a key once that ms is past); until then it is no
	// bucket to reset, 0, as the embedded backend answers.
	for _, v := range []string{"1000000000000000000", "0"} {
		cb.client.Do(ctx, cb.client.B().Set().Key(router.KeyPrefix+"{user42}:full").Value(v).Build())
		if n, err := c.Do(ctx, "THROTTLE.RESET", "{user42}:full").Int64(); err != nil || n != 0 {
			t.Errorf("THROTTLE.RESET of a full bucket (%s): %d, %v; want 0", v, n, err)
		}
	}
}

// testExactAdmission hammers one key from 50 goroutines spread over the
// given proxies for a second and checks that exactly capacity + refill x
// elapsed tokens were admitted, within one: no token is spent twice.
func testExactAdmission(t *testing.T, addrs ...string) {
	const (
		capacity = 20
		// One token per 20 ms, so that the client's view of the elapsed
		// time is precise to a fraction of a token.
		refill  = 50
		workers = 50
		run     = time.Second
	)
	clients := make([]*goredis.Client, len(addrs))
	for i, a := range addrs {
		clients[i] = newGoRedis(t, a)
	}
	key := fmt.Sprintf("hammer:%d:%d", len(addrs), time.Now().UnixNano())
	var admitted, denied, failed atomic.Int64
	// The bucket is made by the first call to reach it, before the first
	// reply, and the last call reaches it after the last send: the window
	// the bucket sees lies between these and the client's whole run.
	var firstReply, lastSend atomic.Int64
	firstReply.Store(math.MaxInt64)
	ctx := context.Background()
	// Every worker holds a connection before the clock starts, so that
	// dialing is not counted as time the bucket could refill in.
	var ready, wg sync.WaitGroup
	begin := make(chan struct{})
	var start, deadline time.Time
	for w := range workers {
		c := clients[w%len(clients)]
		ready.Add(1)
		wg.Go(func() {
			err := c.Ping(ctx).Err()
			ready.Done()
			if err != nil {
				failed.Add(1)
				return
			}
			<-begin
			for sent := time.Now(); sent.Before(deadline); sent = time.Now() {
				v, err := c.Do(ctx, "THROTTLE", key, capacity, refill, "1s").Int64Slice()
				storeMin(&firstReply, time.Now().UnixNano())
				storeMax(&lastSend, sent.UnixNano())
				switch {
				case err != nil || len(v) != 5:
					failed.Add(1)
				case v[0] == 0:
					admitted.Add(1)
				default:
					denied.Add(1)
				}
			}
		})
	}
	ready.Wait()
	start = time.Now()
	deadline = start.Add(run)
	close(begin)
	wg.Wait()
	elapsed := time.Since(start)
	if failed.Load() > 0 {
		t.Fatalf("%d calls failed", failed.Load())
	}
	// A token refills only once it is whole: exactly capacity plus
	// floor(refill x the bucket's window) are due.
	ideal := capacity + refill*elapsed.Seconds()
	least := capacity + math.Floor(refill*time.Duration(lastSend.Load()-firstReply.Load()).Seconds())
	got := float64(admitted.Load())
	if got > ideal || got < least {
		t.Fatalf("admitted %v in %v over %d proxies, want %.1f to %.1f (denied %d)", got, elapsed, len(addrs), least, ideal, denied.Load())
	}
	if denied.Load() < 10*admitted.Load() {
		t.Fatalf("only %d denials for %d admissions: the key was not hammered", denied.Load(), admitted.Load())
	}
}

func TestClientsSpeakToSluice(t *testing.T) {
	eachIO(t, func(t *testing.T, serve serveFunc) {
		addr := serve(t, router.NewMemory(0))
		ctx := context.Background()

		t.Run("go-redis", func(t *testing.T) {
			c := newGoRedis(t, addr)
			if got := throttle(t, c, "THROTTLE", "gr", 2, 1, "1s"); !eq(got, []int64{0, 2, 1, -1, 1000}) {
				t.Fatalf("got %v", got)
			}
			if err := c.Do(ctx, "CLIENT", "SETNAME", "api-7").Err(); err != nil {
				t.Fatal(err)
			}
		})

		t.Run("rueidis", func(t *testing.T) {
			c, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{addr}, DisableCache: true})
			if err != nil {
				t.Fatalf("rueidis cannot connect: %v", err)
			}
			defer c.Close()
			got, err := c.Do(ctx, c.B().Arbitrary("THROTTLE").Keys("rd").Args("2", "1", "1s").Build()).AsIntSlice()
			if err != nil || !eq(got, []int64{0, 2, 1, -1, 1000}) {
				t.Fatalf("got %v, %v", got, err)
			}
		})
	})
}

func TestConnectionCommands(t *testing.T) {
	eachIO(t, func(t *testing.T, serve serveFunc) {
		addr := serve(t, router.NewMemory(0))
		ctx := context.Background()
		c := goredis.NewClient(&goredis.Options{Addr: addr, PoolSize: 1, Protocol: 2})
		defer c.Close()

		if got, err := c.Do(ctx, "PING", "hi").Text(); err != nil || got != "hi" {
			t.Errorf("PING hi: %q, %v", got, err)
		}
		if got, err := c.Do(ctx, "ECHO", "x y").Text(); err != nil || got != "x y" {
			t.Errorf("ECHO: %q, %v", got, err)
		}
		if err := c.Do(ctx, "SELECT", 0).Err(); err != nil {
			t.Errorf("SELECT 0: %v", err)
		}
		if got, err := c.Do(ctx, "CLIENT", "GETNAME").Result(); err != goredis.Nil {
			t.Errorf("CLIENT GETNAME before SETNAME: %v, %v, want nil", got, err)
		}
		c.Do(ctx, "CLIENT", "SETNAME", "worker-1")
		if got, err := c.Do(ctx, "CLIENT", "GETNAME").Text(); err != nil || got != "worker-1" {
			t.Errorf("CLIENT GETNAME: %q, %v", got, err)
		}
		id1, err := c.Do(ctx, "CLIENT", "ID").Int64()
		if err != nil || id1 <= 0 {
			t.Errorf("CLIENT ID: %d, %v", id1, err)
		}
		if err := c.Do(ctx, "CLIENT", "SETINFO", "LIB-NAME", "go-redis").Err(); err != nil {
			t.Errorf("CLIENT SETINFO: %v", err)
		}
		hello, err := c.Do(ctx, "HELLO", "2").Slice()
		if err != nil || len(hello) != 14 || hello[0] != "server" || hello[1] != "sluice" || hello[5] != int64(2) || hello[7] != id1 {
			t.Errorf("HELLO 2: %v, %v", hello, err)
		}
		if n, err := c.Do(ctx, "COMMAND", "COUNT").Int64(); err != nil || n < 12 {
			t.Errorf("COMMAND COUNT: %d, %v", n, err)
		}
		info, err := c.Do(ctx, "COMMAND", "INFO", "throttle", "nope").Slice()
		if err != nil || len(info) != 2 || info[1] != nil {
			t.Fatalf("COMMAND INFO: %v, %v", info, err)
		}
		if entry := info[0].([]any); entry[0] != "throttle" || entry[1] != int64(-2) || entry[3] != int64(1) {
			t.Errorf("COMMAND INFO throttle: %v", entry)
		}
		// THROTTLE's three forms, for redis-cli's hints.
		docs, err := c.Do(ctx, "COMMAND", "DOCS", "THROTTLE").Slice()
		if err != nil || len(docs) != 2 || docs[0] != "throttle" || !strings.Contains(fmt.Sprint(docs[1]), "token POLICY") {
			t.Errorf("COMMAND DOCS THROTTLE: %v, %v", docs, err)
		}
		if docs, err := c.Do(ctx, "COMMAND", "DOCS", "ping").Slice(); err != nil || len(docs) != 0 {
			t.Errorf("COMMAND DOCS ping: %v, %v; want none (redis-cli keeps its own)", docs, err)
		}

		c.Do(ctx, "THROTTLE", "i", 1, 1, "1h")
		c.Do(ctx, "THROTTLE", "i", 1, 1, "1h")
		c.Do(ctx, "THROTTLE", "i", 1, 1, "1h")
		text, err := c.Info(ctx).Result()
		if err != nil {
			t.Fatal(err)
		}
		for _, want := range []string{"# Server", "sluice_version:", "tcp_port:" + addr[strings.LastIndex(addr, ":")+1:], "connected_clients:1", "throttle_allowed:1", "throttle_limited:2", "used_memory_rss:", "used_cpu_user:", "io_loops:"} {
			if !strings.Contains(text, want+"") {
				t.Errorf("INFO lacks %q:\n%s", want, text)
			}
		}
		if text, _ := c.Info(ctx, "clients").Result(); strings.Contains(text, "# Stats") || !strings.Contains(text, "connected_clients") {
			t.Errorf("INFO clients: %s", text)
		}
	})
}

// raw opens a plain TCP connection for byte-level protocol tests.
func raw(t *testing.T, addr string) (net.Conn, *bufio.Reader) {
	t.Helper()
	conn, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	conn.SetDeadline(time.Now().Add(5 * time.Second))
	return conn, bufio.NewReader(conn)
}

func TestProtocolErrorsCloseOnlyThatConnection(t *testing.T) {
	eachIO(t, func(t *testing.T, serve serveFunc) {
		addr := serve(t, router.NewMemory(0))
		healthy, healthyR := raw(t, addr)
		for _, tt := range []struct {
			name, send, want string
		}{
			{"absurd bulk length", "*2\r\n$4\r\nPING\r\n$99999999999\r\n", "-ERR Protocol error: invalid bulk length"},
			{"bulk length near 2^63", "*1\r\n$9223372036854775807\r\n", "-ERR Protocol error: invalid bulk length"},
			{"absurd argument count", "*99999999999\r\n", "-ERR Protocol error: invalid multibulk length"},
			{"negative bulk length", "*1\r\n$-3\r\n", "-ERR Protocol error: invalid bulk length"},
			{"not a bulk", "*1\r\n:4\r\n", "-ERR Protocol error: expected '$', got ':'"},
			{"argument without its CRLF", "*1\r\n$4\r\nPINGxx", "-ERR Protocol error: invalid bulk length"},
			{"a byte past ASCII for a bulk", "*1\r\n\xff\r\n", "-ERR Protocol error: expected '$', got '\xff'"},
			{"a newline for a bulk", "*1\r\n\n", "-ERR Protocol error: expected '$', got ' '"},
			// Redis reads a header up to its first CR and the byte after it:
			// one longer than any number is refused once that is there, or,
			// without a CR, once it is past PROTO_INLINE_MAX_SIZE (the '*'
			// or '$' included), in other words.
			{"long header", "*1\r\n$" + strings.Repeat("1", 40) + "\r\n", "-ERR Protocol error: invalid bulk length"},
			{"long header and its CR", "*1\r\n$" + strings.Repeat("1", 40) + "\rx", "-ERR Protocol error: invalid bulk length"},
			// Redis skips the byte after a header's first CR unread, so
			// these are a PING to it; sluice wants a CRLF (README).
			{"count's CR without its LF", "*1\rX$4\r\nPING\r\n", "-ERR Protocol error: invalid multibulk length"},
			{"bulk length's CR without its LF", "*1\r\n$4\rXPING\r\n", "-ERR Protocol error: invalid bulk length"},
			{"endless header", "*1\r\n$" + strings.Repeat("1", 64<<10), "-ERR Protocol error: too big bulk count string"},
			{"endless count", "*" + strings.Repeat("1", 64<<10), "-ERR Protocol error: too big mbulk count string"},
			// Redis's limits: PROTO_INLINE_MAX_SIZE, INT_MAX arguments and
			// proto-max-bulk-len (the query buffer's is in framing_test.go).
			{"endless inline", strings.Repeat("x", 64<<10+1), "-ERR Protocol error: too big inline request"},
			{"too many arguments", "*2147483648\r\n", "-ERR Protocol error: invalid multibulk length"},
			{"too big an argument", "*1\r\n$536870913\r\n", "-ERR Protocol error: invalid bulk length"},
			// string2ll's numbers only: no leading zero, no "-0".
			{"argument count with a leading zero", "*01\r\n$4\r\nPING\r\n", "-ERR Protocol error: invalid multibulk length"},
			{"argument count of minus zero", "*-0\r\n", "-ERR Protocol error: invalid multibulk length"},
			{"negative count with a leading zero", "*-01\r\nPING\r\n", "-ERR Protocol error: invalid multibulk length"},
			{"bulk length with a leading zero", "*1\r\n$04\r\nPING\r\n", "-ERR Protocol error: invalid bulk length"},
			{"bulk length of minus zero", "*1\r\n$-0\r\n", "-ERR Protocol error: invalid bulk length"},
		} {
			t.Run(tt.name, func(t *testing.T) {
				conn, r := raw(t, addr)
				io.WriteString(conn, tt.send)
				line, err := r.ReadString('\n')
				if err != nil || strings.TrimSpace(line) != tt.want {
					t.Fatalf("got %q, %v, want %q", line, err, tt.want)
				}
				if _, err := r.ReadByte(); err != io.EOF {
					t.Fatalf("connection still open after a protocol error (%v)", err)
				}
			})
		}
		io.WriteString(healthy, "PING\r\n")
		if line, err := healthyR.ReadString('\n'); err != nil || line != "+PONG\r\n" {
			t.Fatalf("another connection: got %q, %v", line, err)
		}
	})
}

func TestRepliesBeforeAProtocolErrorArrive(t *testing.T) {
	eachIO(t, func(t *testing.T, serve serveFunc) {
		conn, r := raw(t, serve(t, router.NewMemory(0)))
		io.WriteString(conn, "*1\r\n$4\r\nPING\r\n*1\r\n$-7\r\n")
		for _, want := range []string{"+PONG\r\n", "-ERR Protocol error: invalid bulk length\r\n"} {
			if line, err := r.ReadString('\n'); err != nil || line != want {
				t.Fatalf("got %q, %v, want %q", line, err, want)
			}
		}
	})
}

func TestQuitEndsThePipeline(t *testing.T) {
	eachIO(t, func(t *testing.T, serve serveFunc) {
		conn, r := raw(t, serve(t, router.NewMemory(0)))
		io.WriteString(conn, "PING\r\nTHROTTLE q 1 1 1h\r\nQUIT\r\nTHROTTLE q 1 1 1h\r\n")
		var got []string
		for {
			line, err := r.ReadString('\n')
			if err != nil {
				break
			}
			got = append(got, strings.TrimSpace(line))
		}
		want := []string{"+PONG", "*5", ":0", ":1", ":0", ":-1", ":3600000", "+OK"}
		if strings.Join(got, " ") != strings.Join(want, " ") {
			t.Fatalf("got %v, want %v and then the connection closed", got, want)
		}
	})
}

func TestInlineCommands(t *testing.T) {
	eachIO(t, func(t *testing.T, serve serveFunc) {
		conn, r := raw(t, serve(t, router.NewMemory(0)))
		io.WriteString(conn, "THROTTLE inline 3 1 1s 2\r\n")
		var got []string
		for range 6 {
			line, err := r.ReadString('\n')
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, strings.TrimSpace(line))
		}
		if want := "*5 :0 :3 :1 :-1 :2000"; strings.Join(got, " ") != want {
			t.Fatalf("got %v, want %s", got, want)
		}
	})
}

// batchRecorder is a Decider that records the size of every batch.
type batchRecorder struct {
	mu      sync.Mutex // guards batches
	batches []int
	inner   proxy.Decider
}

func (b *batchRecorder) Submit(ctx context.Context, reqs []router.Request, res []router.Result, done func([]int)) {
	b.mu.Lock()
	b.batches = append(b.batches, len(reqs))
	b.mu.Unlock()
	b.inner.Submit(ctx, reqs, res, done)
}

// A pipeline's bucket commands reach the Decider together, so that they
// are decided concurrently, not one round trip after another.
func TestPipelineIsOneBatch(t *testing.T) {
	eachIO(t, func(t *testing.T, serve serveFunc) {
		rec := &batchRecorder{inner: router.NewMemory(0)}
		conn, r := raw(t, serve(t, rec))
		var send strings.Builder
		for i := range 50 {
			fmt.Fprintf(&send, "*5\r\n$8\r\nTHROTTLE\r\n$2\r\nk%d\r\n$1\r\n5\r\n$1\r\n1\r\n$2\r\n1s\r\n", i%10)
			send.WriteString("*1\r\n$4\r\nPING\r\n")
		}
		io.WriteString(conn, send.String())
		for range 50 * 7 { // 6 lines per THROTTLE reply, 1 per PONG
			if _, err := r.ReadString('\n'); err != nil {
				t.Fatal(err)
			}
		}
		rec.mu.Lock()
		defer rec.mu.Unlock()
		total := 0
		for _, n := range rec.batches {
			total += n
		}
		if total != 50 || len(rec.batches) > 3 {
			t.Fatalf("50 pipelined THROTTLEs reached the decider in batches %v, want one (or a few, as reads split them)", rec.batches)
		}
	})
}

func TestMoreErrors(t *testing.T) {
	eachIO(t, func(t *testing.T, serve serveFunc) {
		c := goredis.NewClient(&goredis.Options{Addr: serve(t, router.NewMemory(0)), Protocol: 2, PoolSize: 1})
		defer c.Close()
		ctx := context.Background()
		for _, tt := range []struct {
			args []any
			want string
		}{
			{[]any{"SELECT", "x"}, "ERR value is not an integer or out of range"},
			// Redis reads it with string2ll: no leading zero, no "-0".
			{[]any{"SELECT", "00"}, "ERR value is not an integer or out of range"},
			{[]any{"SELECT", "-0"}, "ERR value is not an integer or out of range"},
			{[]any{"HELLO", "2", "AUTH", "bob", "pw"}, "WRONGPASS"},
			{[]any{"HELLO", "2", "NOPE"}, "ERR Syntax error in HELLO option 'NOPE'"},
			{[]any{"HELLO", "x"}, "ERR Protocol version is not an integer or out of range"},
			{[]any{"HELLO", "2", "SETNAME", "a b"}, "ERR Client names cannot contain spaces"},
			{[]any{"CLIENT", "SETINFO", "COLOR", "x"}, "ERR Unrecognized option 'COLOR'"},
			{[]any{"CLIENT", "SETINFO", "LIB-NAME", "a b"}, "ERR lib-name cannot contain spaces"},
			{[]any{"CLIENT", "SETNAME"}, "ERR wrong number of arguments for 'client|setname' command"},
			{[]any{"CLIENT", "ID", "x"}, "ERR wrong number of arguments for 'client|id' command"},
			{[]any{"COMMAND", "FOO"}, "ERR unknown subcommand 'FOO'. Try COMMAND HELP."},
			{[]any{"PING", "a", "b"}, "ERR wrong number of arguments for 'ping' command"},
			{[]any{"THROTTLE", "k", 1, "x", 1}, "ERR refill must be a positive integer"},
			{[]any{"THROTTLE", "k", 1, 1, "1.5.5s"}, "ERR period must be a positive duration"},
		} {
			err := c.Do(ctx, tt.args...).Err()
			if err == nil || !strings.HasPrefix(err.Error(), tt.want) {
				t.Errorf("%v: got %v, want %q", tt.args, err, tt.want)
			}
		}
		if err := c.Do(ctx, "HELLO", "2", "AUTH", "default", "anything", "SETNAME", "svc").Err(); err != nil {
			t.Errorf("HELLO with the default user: %v", err)
		}
		if name, _ := c.Do(ctx, "CLIENT", "GETNAME").Text(); name != "svc" {
			t.Errorf("HELLO SETNAME: name %q", name)
		}
	})
}

// Close ends Serve however soon after it comes.
func TestCloseRightAfterServe(t *testing.T) {
	for _, loops := range []int{0, -1} {
		for range 500 {
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			srv := proxy.New(proxy.Config{Decider: router.NewMemory(0), Loops: loops})
			done := make(chan error, 1)
			go func() { done <- srv.Serve(ln) }()
			srv.Close()
			select {
			case err := <-done:
				if err != nil {
					t.Fatalf("Serve: %v", err)
				}
			case <-time.After(5 * time.Second):
				t.Fatalf("loops %d: Serve still running 5s after Close", loops)
			}
		}
	}
}

func storeMin(v *atomic.Int64, x int64) {
	for old := v.Load(); x < old && !v.CompareAndSwap(old, x); old = v.Load() {
	}
}

func storeMax(v *atomic.Int64, x int64) {
	for old := v.Load(); x > old && !v.CompareAndSwap(old, x); old = v.Load() {
	}
}

// waitUntil polls f every millisecond for up to five seconds.
func waitUntil(t *testing.T, what string, f func() bool) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); !f(); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting until %s", what)
		}
	}
}

// A client that sends a million THROTTLE and reads nothing is stopped
// being read once its bounds are reached: sluice's memory stays bounded,
// and the other clients keep getting answers.
func TestFloodWithoutReadingIsBounded(t *testing.T) {
	eachIO(t, func(t *testing.T, serve serveFunc) {
		addr := serve(t, router.NewMemory(0))
		var before runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		flood, _ := raw(t, addr)
		chunk := []byte(strings.Repeat("*5\r\n$8\r\nTHROTTLE\r\n$5\r\nflood\r\n$4\r\n1000\r\n$1\r\n1\r\n$2\r\n1s\r\n", 1000))
		sent := 0
		// Until sluice has not read for a whole second (its socket and
		// ours are full), or all million are sent.
		for ; sent < 1_000_000; sent += 1000 {
			flood.SetWriteDeadline(time.Now().Add(time.Second))
			if _, err := flood.Write(chunk); err != nil {
				if !errors.Is(err, os.ErrDeadlineExceeded) {
					t.Fatal(err)
				}
				break
			}
		}
		if sent == 1_000_000 {
			t.Fatal("a million THROTTLE were read without a reader: no backpressure")
		}
		other := newGoRedis(t, addr)
		for i := range 10 {
			if v, err := other.Do(context.Background(), "THROTTLE", fmt.Sprint("other", i), 5, 1, "1s").Int64Slice(); err != nil || v[0] != 0 {
				t.Fatalf("another client: %v, %v", v, err)
			}
		}
		var after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&after)
		grew := int64(after.HeapInuse) - int64(before.HeapInuse)
		t.Logf("stopped reading after about %d commands; heap grew %d KiB", sent, grew>>10)
		// Unbounded, the million commands' slots and replies alone would
		// hold about 180 MB.
		if grew > 64<<20 {
			t.Fatalf("heap grew %d MiB while the flood waited", grew>>20)
		}
	})
}

// Past --maxclients a new client is answered Redis's error and closed;
// once one leaves, a new one is served again. Both serving paths.
func TestMaxClients(t *testing.T) {
	for _, loops := range []int{1, -1} {
		addr := serveConfig(t, proxy.Config{Decider: router.NewMemory(0), Loops: loops, MaxClients: 2})
		a, b := dialRaw(t, addr), dialRaw(t, addr)
		for _, c := range []*rawConn{a, b} {
			if got := c.do("PING"); got != "+PONG\r\n" {
				t.Fatalf("loops %d: PING: %q", loops, got)
			}
		}
		third := dialRaw(t, addr)
		if got := third.read(); got != "-ERR max number of clients reached\r\n" {
			t.Errorf("loops %d: the third client got %q", loops, got)
		}
		if _, err := third.br.ReadByte(); err == nil {
			t.Errorf("loops %d: the third client was not closed", loops)
		}
		if info := a.do("INFO", "stats"); !strings.Contains(info, "rejected_connections:1\r\n") {
			t.Errorf("loops %d: INFO stats lacks rejected_connections:1: %q", loops, info)
		}
		if info := a.do("INFO", "clients"); !strings.Contains(info, "\r\nmaxclients:2\r\n") {
			t.Errorf("loops %d: INFO clients lacks Redis's maxclients:2: %q", loops, info)
		}
		b.c.Close()
		waitUntil(t, "the server sees a client leave", func() bool {
			return strings.Contains(a.do("INFO", "clients"), "connected_clients:1\r\n")
		})
		if got := dialRaw(t, addr).do("PING"); got != "+PONG\r\n" {
			t.Errorf("loops %d: a client after one left: %q", loops, got)
		}
	}
}

// --maxclients bounds the clients of every listener together: clients
// that connect at once to two listeners, one served by a loop and one on
// goroutines as a TLS listener is, are not served past it. Each round
// connects twice the room left, half to each listener.
func TestMaxClientsAcrossListeners(t *testing.T) {
	const room, rounds = 4, 1000
	var lns []net.Listener
	for range 2 {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		lns = append(lns, ln)
	}
	srv := proxy.New(proxy.Config{Decider: router.NewMemory(0), Loops: 1, MaxClients: room + 1})
	done := make(chan error, 1)
	// Wrapped, the second listener is not one a loop can take.
	go func() { done <- srv.Serve(lns[0], struct{ net.Listener }{lns[1]}) }()
	t.Cleanup(func() {
		srv.Close()
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	watcher := dialRaw(t, lns[0].Addr().String())
	for round := range rounds {
		var wg sync.WaitGroup
		var served atomic.Int64
		conns := make([]net.Conn, 2*room)
		for i := range conns {
			wg.Add(1)
			go func() {
				defer wg.Done()
				c, err := net.Dial("tcp", lns[i%2].Addr().String())
				if err != nil {
					return
				}
				conns[i] = c
				c.SetDeadline(time.Now().Add(10 * time.Second))
				c.Write([]byte("PING\r\n"))
				if got, _ := bufio.NewReader(c).ReadString('\n'); got == "+PONG\r\n" {
					served.Add(1)
				}
			}()
		}
		wg.Wait()
		for _, c := range conns {
			if c != nil {
				c.Close()
			}
		}
		if n := served.Load(); n > room {
			t.Fatalf("round %d: %d clients served at once besides one connected before, with room for %d", round, n, room)
		}
		waitUntil(t, "the server sees the round's clients leave", func() bool {
			return strings.Contains(watcher.do("INFO", "clients"), "connected_clients:1\r\n")
		})
	}
}

// With an idle timeout, a client that sends nothing for that long is
// closed; one that keeps sending is not. Both serving paths.
func TestIdleTimeout(t *testing.T) {
	t.Parallel() // it waits on the clock, not the CPU: alongside the others that do
	eachClockLoops(t, func(t *testing.T, loops int) {
		addr := serveConfig(t, proxy.Config{Decider: router.NewMemory(0), Loops: loops, IdleTimeout: 700 * time.Millisecond})
		idle, busy := dialRaw(t, addr), dialRaw(t, addr)
		if got := idle.do("PING"); got != "+PONG\r\n" {
			t.Fatalf("loops %d: PING: %q", loops, got)
		}
		start := time.Now()
		closed := make(chan time.Duration, 1)
		go func() {
			idle.c.SetReadDeadline(time.Now().Add(10 * time.Second))
			idle.br.ReadByte() // EOF when closed, or the deadline
			closed <- time.Since(start)
		}()
		// A command every 200 ms until a second past the idle client's
		// close: a sweep at least, which would have closed the busy one
		// too were its commands not counted. (closed comes by the read
		// deadline at the latest.)
		var took time.Duration
		for i := 0; took == 0 || time.Since(start) < took+time.Second; i++ {
			if got := busy.do("PING"); got != "+PONG\r\n" {
				t.Fatalf("loops %d: the busy client's PING %d after %v: %q", loops, i, time.Since(start), got)
			}
			time.Sleep(200 * time.Millisecond) // the client's pace, not a wait for the server
			if took == 0 {
				select {
				case took = <-closed:
				default:
				}
			}
		}
		// Idle past 0.7 s, found by a sweep at most a second later (1.9 s
		// at the busy client's pace); up to 3.5 s for a loaded machine.
		// The server's idle time starts once it wrote PONG, before this
		// client has read it and started its clock, and a loop closes it
		// at 0.7 s to the ms: 200 ms of slack below (698 ms was once seen
		// on a goroutine), for a client scheduled late on a loaded machine.
		if took < 500*time.Millisecond || took > 3500*time.Millisecond {
			t.Errorf("loops %d: the idle client was closed after %v, want 0.7 s to 3.5 s", loops, took)
		}
	})
}

// eachClockLoops runs f on a loop (Loops 1) and on goroutines (Loops -1)
// at the same time, for tests that wait on the clock, not the CPU. The
// subtests are run from goroutines of their own rather than marked
// parallel: t.Parallel would queue them for one of -parallel's slots (two
// on two cores) behind the other tests that wait on the clock.
func eachClockLoops(t *testing.T, f func(t *testing.T, loops int)) {
	var wg sync.WaitGroup
	for _, loops := range []int{1, -1} {
		name := map[int]string{1: "loops", -1: "goroutines"}[loops]
		wg.Go(func() { t.Run(name, func(t *testing.T) { f(t, loops) }) })
	}
	wg.Wait()
}

// slowShards decides as the embedded backend does, d later: decisions in
// flight when the server shuts down.
type slowShards struct {
	m    *router.Memory
	d    time.Duration
	seen atomic.Int64 // requests submitted
}

func (s *slowShards) Submit(ctx context.Context, reqs []router.Request, res []router.Result, done func([]int)) {
	s.seen.Add(int64(len(reqs)))
	go func() {
		time.Sleep(s.d) // the shards' latency
		s.m.Decide(ctx, reqs, res)
		done(nil)
	}()
}

// Shutdown under load loses no reply: every command read before it is
// answered, then each client is closed, and no new client is taken.
func TestShutdownLosesNoReplies(t *testing.T) {
	for _, loops := range []int{-1, 1} {
		t.Logf("loops %d", loops)
		d := &slowShards{m: router.NewMemory(0), d: 200 * time.Millisecond}
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		srv := proxy.New(proxy.Config{Decider: d, Backend: "test", Loops: loops})
		served := make(chan error, 1)
		go func() { served <- srv.Serve(ln) }()
		const clients, each = 8, 50
		var conns []*rawConn
		for range clients {
			c := dialRaw(t, ln.Addr().String())
			var cmds [][]string
			for k := range each {
				cmds = append(cmds, []string{"THROTTLE", fmt.Sprintf("sd:%d", k), "1000", "1", "1s"})
			}
			c.send(cmds...)
			conns = append(conns, c)
		}
		waitUntil(t, "every command is read", func() bool { return d.seen.Load() == clients*each })
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		shut := make(chan error, 1)
		go func() { shut <- srv.Shutdown(ctx) }()
		for i, c := range conns {
			for k := range each {
				if got := c.read(); !strings.HasPrefix(got, "*5\r\n:0\r\n") {
					t.Fatalf("loops %d, client %d, reply %d: %q", loops, i, k, got)
				}
			}
			if _, err := c.br.ReadByte(); err == nil {
				t.Errorf("loops %d, client %d: not closed after its replies", loops, i)
			}
		}
		if err := <-shut; err != nil {
			t.Errorf("loops %d: Shutdown: %v", loops, err)
		}
		cancel()
		<-served
		if c, err := net.DialTimeout("tcp", ln.Addr().String(), time.Second); err == nil {
			c.SetReadDeadline(time.Now().Add(time.Second))
			if _, err := c.Read(make([]byte, 1)); err == nil {
				t.Errorf("loops %d: a client was served after Shutdown", loops)
			}
			c.Close()
		}
	}
}

// The normal class's client-output-buffer-limit: a reply past the hard
// limit closes its client, a smaller one is answered; a client that lets
// replies pile up past the soft limit for longer than allowed is closed.
// Both serving paths.
func TestOutputBufferLimit(t *testing.T) {
	big := strings.Repeat("x", 100<<10)
	for _, loops := range []int{1, -1} {
		addr := serveConfig(t, proxy.Config{Decider: router.NewMemory(0), Loops: loops,
			OutputLimit: proxy.OutputLimit{Hard: 64 << 10, Soft: 32 << 10, SoftFor: 200 * time.Millisecond}})
		c := dialRaw(t, addr)
		if got := c.do("ECHO", "small"); got != "$5\r\nsmall\r\n" {
			t.Fatalf("loops %d: ECHO small: %q", loops, got)
		}
		c.send([]string{"ECHO", big})
		if b, err := c.br.ReadByte(); err == nil {
			t.Errorf("loops %d: a reply past the hard limit was sent (%q...), want the client closed", loops, b)
		}
	}
	// Soft: 40 KiB replies, never read, pile up in sluice once the socket
	// is full (on a loop), or one waits to be written (on a goroutine,
	// which reads no more meanwhile); closed 200 ms over 32 KiB.
	for _, loops := range []int{1, -1} {
		closedUnread(t, proxy.Config{Decider: router.NewMemory(0), Loops: loops,
			OutputLimit: proxy.OutputLimit{Soft: 32 << 10, SoftFor: 200 * time.Millisecond}})
	}
}

// With --timeout, a client that reads none of its replies is idle too: a
// write that makes no progress is no interaction, as in Redis. Both
// serving paths.
func TestIdleTimeoutClosesAClientThatDoesNotRead(t *testing.T) {
	t.Parallel() // it waits on the clock, not the CPU: alongside the others that do
	for _, loops := range []int{1, -1} {
		closedUnread(t, proxy.Config{Decider: router.NewMemory(0), Loops: loops, IdleTimeout: 500 * time.Millisecond})
	}
}

// closedUnread sends 16 MB of replies' worth of ECHO and reads nothing:
// the server must close the client.
func closedUnread(t *testing.T, cfg proxy.Config) {
	t.Helper()
	addr := serveConfig(t, cfg)
	c := dialRaw(t, addr)
	c.c.(*net.TCPConn).SetReadBuffer(4 << 10)
	mid := strings.Repeat("y", 40<<10)
	var cmds [][]string
	for range 400 { // 16 MB of replies, past what loopback sockets hold
		cmds = append(cmds, []string{"ECHO", mid})
	}
	var b []byte
	for _, args := range cmds {
		b = router.AppendCommand(b, [][]byte{[]byte(args[0]), []byte(args[1])})
	}
	go func() {
		c.c.SetWriteDeadline(time.Now().Add(10 * time.Second))
		c.c.Write(b) // ends when sluice stops reading it, or closes it
	}()
	poll := dialRaw(t, addr)
	waitUntil(t, fmt.Sprintf("loops %d: the server closes the client that does not read", cfg.Loops), func() bool {
		return strings.Contains(poll.do("INFO", "clients"), "connected_clients:1\r\n")
	})
}

// --throttle-max-key-len: a bucket command's key longer than the server's
// bound is answered an error, and nothing is decided; both serving paths.
func TestThrottleMaxKeyLen(t *testing.T) {
	const tooLong = "-ERR key must be at most 8 bytes (--throttle-max-key-len)\r\n"
	for _, loops := range []int{0, -1} {
		conn, r := raw(t, serveConfig(t, proxy.Config{Decider: router.NewMemory(0), MaxKeyLen: 8, Loops: loops}))
		for _, tt := range []struct{ cmd, want string }{
			{"THROTTLE 123456789 5 1 1s\r\n", tooLong},
			{"CL.THROTTLE 123456789 5 1 1\r\n", tooLong},
			{"GCRA 123456789 5 1 1\r\n", tooLong},
			{"THROTTLE.RESET 123456789\r\n", tooLong},
			{"THROTTLE 12345678 5 1 1s\r\n", "*5\r\n"},
		} {
			io.WriteString(conn, tt.cmd)
			if line, err := r.ReadString('\n'); err != nil || line != tt.want {
				t.Fatalf("loops %d, %q: got %q, %v, want %q", loops, tt.cmd, line, err, tt.want)
			}
		}
	}
}

// A client is idle from its last command or its last reply, whichever is
// later, as Redis counts writes as interaction: one that waited longer
// than --timeout for a reply is not closed right after it gets it.
func TestIdleTimeoutCountsFromTheReply(t *testing.T) {
	t.Parallel() // it waits on the clock, not the CPU: alongside the others that do
	eachClockLoops(t, func(t *testing.T, loops int) {
		// Idle 1.5 s since the reply, 1 s under --timeout for a loaded
		// machine; 4.3 s since the command, so that counted from it the
		// client is closed by the sweep (once a second) after the reply,
		// half a second before the PING.
		d := &slowShards{m: router.NewMemory(0), d: 2800 * time.Millisecond}
		c := dialRaw(t, serveConfig(t, proxy.Config{Decider: d, Loops: loops, IdleTimeout: 2500 * time.Millisecond}))
		if got := c.do("THROTTLE", "it", "5", "1", "1s"); !strings.HasPrefix(got, "*5\r\n:0\r\n") {
			t.Fatalf("loops %d: THROTTLE: %q", loops, got)
		}
		// Idle 1.5 s, under --timeout since the reply: time must pass,
		// the point is that nothing closes the client meanwhile.
		time.Sleep(1500 * time.Millisecond)
		if got := c.do("PING"); got != "+PONG\r\n" {
			t.Errorf("loops %d: PING 1.5 s after a reply, with --timeout 2.5 s: %q", loops, got)
		}
	})
}
