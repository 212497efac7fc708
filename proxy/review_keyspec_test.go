package proxy_test

import (
	"context"
	"strings"
	"testing"

	"github.com/sluice-rl/sluice/proxy"
	"github.com/sluice-rl/sluice/router/clustertest"
	"github.com/sluice-rl/sluice/router/slot"
)

// Redis reads the keywords it finds keys by (SORT's, MIGRATE's) with C's
// strcasecmp: an argument ends at its first NUL, and only ASCII letters
// fold. sluice read them with bytes.EqualFold, which folds Unicode too
// ("ſtore" is STORE, "\u212aEYS", with a Kelvin sign, is KEYS) and stops
// at no NUL ("LIMIT\x00" is no LIMIT), so it found a STORE or KEYS key
// Redis does not see, and answered CROSSSLOT for a line the node runs
// or refuses with its own error.
func TestPassthroughKeywordsAsRedisReadsThem(t *testing.T) {
	c := clustertest.New(t, clustertest.Config{Replicas: -1})
	r := newForwarding(t, c)
	for _, loops := range []int{0, -1} {
		addr := serveConfig(t, proxy.Config{Decider: r, Forwarder: r, Loops: loops})
		through := dialRaw(t, addr)
		through.do("DEL", "{kw}l")
		if got := through.do("RPUSH", "{kw}l", "3", "1", "2"); got != ":3\r\n" {
			t.Fatalf("RPUSH: %q", got)
		}
		for _, tc := range []struct {
			cmd  []string
			want string
		}{
			{[]string{"SORT", "{kw}l", "\u017ftore", "kw:other"}, "-ERR syntax error\r\n"},
			{[]string{"SORT", "{kw}l", "LIMIT\x00", "STORE", "kw:other"}, "-ERR value is not an integer or out of range\r\n"},
			{[]string{"SORT", "{kw}l", "GET\x00", "STORE", "kw:other"}, "-ERR GET option of SORT denied in Cluster mode.\r\n"},
			{[]string{"SORT", "{kw}l", "STORE\x00", "{kw}d"}, ":3\r\n"},
			{[]string{"MIGRATE", "127.0.0.1", "1", "", "0", "10", "\u212aEYS", "{kw}a", "kw:other"}, "-ERR syntax error\r\n"},
			{[]string{"MIGRATE", "127.0.0.1", "1", "", "0", "10", "AUTH\x00", "KEYS", "{kw}a", "kw:other"}, "-ERR syntax error\r\n"},
			{[]string{"MIGRATE", "127.0.0.1", "1", "", "0", "10", "KEYS\x00", "{kw}a", "kw:other"}, "-CROSSSLOT Keys in request don't hash to the same slot\r\n"},
		} {
			if got := through.do(tc.cmd...); got != tc.want {
				t.Errorf("loops %d, %q: got %q, want %q", loops, tc.cmd, got, tc.want)
			}
			if want := directFollow(t, c, tc.cmd...); want != tc.want {
				t.Errorf("%q: the cluster answers %q, the test expects %q", tc.cmd, want, tc.want)
			}
		}

		// XREAD's "BLOCK\x00" blocks on the node as BLOCK does. blocks()
		// read it with bytes.EqualFold, as no BLOCK, and sent the XREAD on
		// the connection the node's other commands share: the XADD that
		// would wake it waited behind it until it timed out.
		n, err := c.Primary(context.Background(), slot.Of("{kw}s"))
		if err != nil {
			t.Fatal(err)
		}
		reader := dialRaw(t, addr)
		reader.send([]string{"XREAD", "BLOCK\x00", "3000", "STREAMS", "{kw}s", "$"})
		waitUntil(t, "the XREAD blocks on the node", func() bool {
			list, _ := n.Do(context.Background(), "CLIENT", "LIST").ToString()
			return strings.Contains(list, "cmd=xread")
		})
		if got := through.do("XADD", "{kw}s", "*", "f", "v"); !strings.HasPrefix(got, "$") {
			t.Fatalf("loops %d, XADD: %q", loops, got)
		}
		if got := reader.read(); !strings.HasPrefix(got, "*1\r\n") {
			t.Errorf("loops %d, XREAD BLOCK\\x00: %q, want the entry XADD added while it blocked", loops, got)
		}
	}
}

// directFollow sends args to a node and follows its MOVED, as a cluster
// client does, and returns the raw reply.
func directFollow(t *testing.T, c *clustertest.Cluster, args ...string) string {
	t.Helper()
	addr := c.Nodes[0].Addr
	for range 3 {
		conn := dialRaw(t, addr)
		got := conn.do(args...)
		conn.c.Close()
		if strings.HasPrefix(got, "-MOVED ") {
			f := strings.Fields(strings.TrimSpace(got))
			addr = f[2]
			continue
		}
		return got
	}
	return "too many moves"
}
