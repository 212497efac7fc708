package proxy_test

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/sluice-rl/sluice/proxy"
	"github.com/sluice-rl/sluice/router/clustertest"
)

// CLIENT TRACKING, CACHING, GETREDIR and TRACKINGINFO answer as a node
// answers them, step for step, in both protocols: the modes' checks in
// Redis's order, CACHING's flag kept until the next command but CLIENT's
// (EXEC's transaction ends it) and across a TRACKING ON, RESET turning
// tracking off.
func TestTrackingCommandsAsRedis(t *testing.T) {
	c := clustertest.New(t, clustertest.Config{Primaries: 1, Replicas: -1})
	r := newForwarding(t, c)
	steps := [][]string{
		{"CLIENT", "TRACKING", "ON", "OPTIN", "OPTOUT"},
		{"CLIENT", "TRACKING", "ON", "PREFIX", "a"},
		{"CLIENT", "TRACKING", "ON", "BCAST", "OPTIN"},
		{"CLIENT", "TRACKING", "ON", "OPTIN"},
		{"CLIENT", "TRACKING", "ON", "OPTOUT"},
		{"CLIENT", "TRACKING", "ON", "BCAST"},
		{"CLIENT", "TRACKINGINFO"},
		{"CLIENT", "GETREDIR"},
		{"CLIENT", "CACHING", "NO"},
		{"CLIENT", "CACHING", "yes"},
		{"CLIENT", "TRACKINGINFO"},
		{"CLIENT", "GETNAME"},
		{"CLIENT", "TRACKINGINFO"},
		{"PING"},
		{"CLIENT", "TRACKINGINFO"},
		{"CLIENT", "CACHING", "yes"},
		{"MULTI"},
		{"PING"},
		{"EXEC"},
		{"CLIENT", "TRACKINGINFO"},
		{"CLIENT", "TRACKING", "ON"},
		{"CLIENT", "TRACKINGINFO"},
		{"CLIENT", "CACHING", "yes"},
		{"CLIENT", "TRACKING", "OFF"},
		{"CLIENT", "TRACKING", "ON", "OPTOUT", "NOLOOP"},
		{"CLIENT", "CACHING", "maybe"},
		{"CLIENT", "CACHING", "no"},
		{"CLIENT", "TRACKINGINFO"},
		{"RESET"},
		{"CLIENT", "TRACKINGINFO"},
		{"CLIENT", "GETREDIR"},
		// A TRACKING ON that leaves tracking on keeps CACHING's flag
		// (Redis's enableTracking clears the modes, not the flag, which
		// then shows under the new mode); a bare CLIENT or an unknown
		// subcommand is no CLIENT command to Redis, and ends it.
		{"CLIENT", "TRACKING", "ON", "OPTIN"},
		{"CLIENT", "CACHING", "yes"},
		{"CLIENT", "TRACKING", "ON", "OPTIN"},
		{"CLIENT", "TRACKINGINFO"},
		{"CLIENT", "TRACKING", "ON"},
		{"CLIENT", "TRACKING", "ON", "OPTOUT"},
		{"CLIENT", "TRACKINGINFO"},
		{"CLIENT", "CACHING"},
		{"CLIENT", "TRACKINGINFO"},
		{"CLIENT", "NOSUCH"},
		{"CLIENT", "TRACKINGINFO"},
		{"CLIENT", "CACHING", "no"},
		{"CLIENT"},
		{"CLIENT", "TRACKINGINFO"},
		{"CLIENT", "TRACKING", "OFF"},
	}
	eachPathAndProtocol(t, func(t *testing.T, loops int, resp3 bool) {
		through := dialRaw(t, serveConfig(t, proxy.Config{Decider: r, Forwarder: r, Loops: loops}))
		node := dialRaw(t, c.Nodes[0].Addr)
		if resp3 {
			through.do("HELLO", "3")
			node.do("HELLO", "3")
		}
		for i, step := range steps {
			if got, want := through.do(step...), node.do(step...); got != want {
				t.Errorf("step %d %q: %q, the node %q", i, step, got, want)
			}
		}
		// CLIENT LIST's t flag and redir, as the node shows them.
		for _, conn := range []*rawConn{through, node} {
			conn.do("CLIENT", "TRACKING", "ON")
		}
		for _, field := range []string{" flags=", " redir="} {
			got, want := clientField(through.do("CLIENT", "INFO"), field), clientField(node.do("CLIENT", "INFO"), field)
			if got != want || got == "" {
				t.Errorf("CLIENT INFO%s%q, the node's %q", field, got, want)
			}
		}
	})
}

// clientField is the value of field (" name=") in a CLIENT INFO reply.
func clientField(info, field string) string {
	_, v, ok := strings.Cut(info, field)
	if !ok {
		return ""
	}
	v, _, _ = strings.Cut(v, " ")
	return v
}

// invalidate is the push that invalidates keys.
func invalidate(keys ...string) string {
	s := ">2\r\n$10\r\ninvalidate\r\n*" + strconv.Itoa(len(keys)) + "\r\n"
	for _, k := range keys {
		s += "$" + strconv.Itoa(len(k)) + "\r\n" + k + "\r\n"
	}
	return s
}

// A tracking RESP3 client's read is followed, on its connection, by the
// invalidation of the keys it read, right after the reply that carries
// them (after EXEC's inside a transaction, never after QUEUED), so that
// no client keeps a value past its reply; a write, a RESP2 client and a
// client that stopped tracking get none.
func TestTrackedReadsAreInvalidatedAfterTheirReply(t *testing.T) {
	c := clustertest.New(t, clustertest.Config{Replicas: -1})
	r := newForwarding(t, c)
	eachIOConfig(t, proxy.Config{Decider: r, Forwarder: r}, func(t *testing.T, cfg proxy.Config) {
		conn := dialRaw(t, serveConfig(t, cfg))
		conn.do("HELLO", "3")
		if got := conn.do("CLIENT", "TRACKING", "ON"); got != "+OK\r\n" {
			t.Fatalf("CLIENT TRACKING ON: %q", got)
		}
		// Keys of three slots, on different primaries.
		a, b := "trk:a", "trk:b{x}"
		for _, cmd := range [][]string{{"SET", a, "1"}, {"SET", b, "2"}, {"XADD", "trk:s", "*", "f", "v"}} {
			if got := conn.do(cmd...); strings.HasPrefix(got, "-") || strings.HasPrefix(got, ">") {
				t.Fatalf("%q: %q", cmd, got)
			}
		}
		for _, tc := range []struct {
			cmds  [][]string
			reads []string // replies before the push
			keys  []string
		}{
			{[][]string{{"GET", a}}, []string{"$1\r\n1\r\n"}, []string{a}},
			{[][]string{{"MGET", a, b, "trk:none"}}, []string{"*3\r\n$1\r\n1\r\n$1\r\n2\r\n_\r\n"}, []string{a, b, "trk:none"}},
			{[][]string{{"MULTI"}, {"GET", b}, {"STRLEN", b}, {"EXEC"}}, []string{"+OK\r\n", "+QUEUED\r\n", "+QUEUED\r\n", "*2\r\n$1\r\n2\r\n:1\r\n"}, []string{b, b}},
			{[][]string{{"XREAD", "BLOCK", "1000", "STREAMS", "trk:s", "0"}}, nil, []string{"trk:s"}},
		} {
			conn.send(tc.cmds...)
			for i, want := range tc.reads {
				if got := conn.read(); got != want {
					t.Errorf("%q, reply %d: %q, want %q", tc.cmds, i, got, want)
				}
			}
			if tc.reads == nil {
				if got := conn.read(); !strings.Contains(got, "trk:s") {
					t.Errorf("%q: %q", tc.cmds, got)
				}
			}
			if got := conn.read(); got != invalidate(tc.keys...) {
				t.Errorf("%q: after the reply %q, want the invalidation %q", tc.cmds, got, invalidate(tc.keys...))
			}
		}
		// No push follows a write, nor any read once tracking is off, nor
		// a RESP2 client's: each PING's reply comes right after.
		conn.send([]string{"SET", a, "3"}, []string{"PING"})
		for _, want := range []string{"+OK\r\n", "+PONG\r\n"} {
			if got := conn.read(); got != want {
				t.Errorf("SET, PING: %q, want %q", got, want)
			}
		}
		for _, off := range [][]string{{"CLIENT", "TRACKING", "OFF"}, {"HELLO", "2"}} {
			other := dialRaw(t, serveConfig(t, cfg))
			other.do("HELLO", "3")
			other.do("CLIENT", "TRACKING", "ON")
			other.do(off...)
			other.send([]string{"GET", a}, []string{"PING"})
			if got := other.read(); got != "$1\r\n3\r\n" {
				t.Errorf("%q, GET: %q", off, got)
			}
			if got := other.read(); got != "+PONG\r\n" {
				t.Errorf("%q, then GET and PING: %q, want PING's reply", off, got)
			}
		}
	})
}

// rueidis turns tracking on by default (client-side caching, OPTIN): it
// works through sluice unchanged, and what it caches never outlives a
// write to the key, made elsewhere.
func TestRueidisWithItsCacheOn(t *testing.T) {
	c := clustertest.New(t, clustertest.Config{Replicas: -1})
	r := newForwarding(t, c)
	eachIOConfig(t, proxy.Config{Decider: r, Forwarder: r}, func(t *testing.T, cfg proxy.Config) {
		addr := serveConfig(t, cfg)
		cl, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{addr}})
		if err != nil {
			t.Fatalf("rueidis with its defaults: %v", err)
		}
		defer cl.Close()
		ctx := context.Background()
		key := "csc:" + t.Name()
		if err := cl.Do(ctx, cl.B().Set().Key(key).Value("v1").Build()).Error(); err != nil {
			t.Fatal(err)
		}
		if v, err := cl.DoCache(ctx, cl.B().Get().Key(key).Cache(), time.Minute).ToString(); err != nil || v != "v1" {
			t.Fatalf("DoCache GET: %q, %v", v, err)
		}
		// Written straight to the cluster: sluice never sees the write.
		direct := dialRaw(t, nodeOf(t, c, key).Addr)
		if got := direct.do("SET", key, "v2"); got != "+OK\r\n" {
			t.Fatal(got)
		}
		deadline := time.Now().Add(5 * time.Second)
		for {
			v, err := cl.DoCache(ctx, cl.B().Get().Key(key).Cache(), time.Minute).ToString()
			if err != nil {
				t.Fatal(err)
			}
			if v == "v2" {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("DoCache GET still %q 5 s after the key was written: the cache kept it", v)
			}
		}
	})
}
