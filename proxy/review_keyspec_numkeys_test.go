package proxy_test

import (
	"testing"

	"github.com/sluice-rl/sluice/proxy"
	"github.com/sluice-rl/sluice/router/clustertest"
)

// A command that says how many keys it has (EVAL, LMPOP, ZUNIONSTORE,
// ...) with a number its key specs refuse ("01", " 1", "4294967297") has
// keys for Redis Cluster all the same: Redis falls back to its
// genericGetKeys, which reads the number with C's atoi, and routes the
// line by them before the command refuses the number. sluice took such a
// line for keyless: in a transaction, its slot counted for nothing, and
// the node's MOVED for it sent the whole transaction from the node of
// the other keys to its own and back, until EXEC answered the client
// MOVED; a line whose keys span slots was QUEUED where Redis answers
// CROSSSLOT.
func TestCountedKeysAsRedisClusterCountsThem(t *testing.T) {
	c := clustertest.New(t, clustertest.Config{Replicas: -1})
	r := newForwarding(t, c)
	const (
		queued    = "+QUEUED\r\n"
		crossSlot = "-CROSSSLOT Keys in request don't hash to the same slot\r\n"
		execAbort = "-EXECABORT Transaction discarded because of previous errors.\r\n"
	)
	for _, cmd := range [][]string{
		{"EVAL", "return 1", "02", "{a}k", "{b}k"},
		{"ZUNIONSTORE", "{b}d", " 1", "{a}z"},
	} {
		if got := directFollow(t, c, cmd...); got != crossSlot {
			t.Fatalf("%q: the cluster answers %q, the test expects CROSSSLOT", cmd, got)
		}
	}
	for _, loops := range []int{0, -1} {
		addr := serveConfig(t, proxy.Config{Decider: r, Forwarder: r, Loops: loops})
		through := dialRaw(t, addr)
		for _, tc := range []struct {
			cmds [][]string
			want []string
		}{
			{
				[][]string{{"MULTI"}, {"GET", "{a}k"}, {"LMPOP", "01", "{b}l", "LEFT"}, {"EXEC"}},
				[]string{"+OK\r\n", queued, queued, crossSlot},
			},
			{
				[][]string{{"MULTI"}, {"EVAL", "return 1", "02", "{a}k", "{b}k"}, {"EXEC"}},
				[]string{"+OK\r\n", crossSlot, execAbort},
			},
			{
				[][]string{{"MULTI"}, {"ZUNIONSTORE", "{b}d", " 1", "{a}z"}, {"EXEC"}},
				[]string{"+OK\r\n", crossSlot, execAbort},
			},
			{
				// 4294967297 is 1 to atoi: the key is {b}k's, the GET's.
				[][]string{{"MULTI"}, {"GET", "{b}k"}, {"EVAL", "return 1", "4294967297", "{b}k"}, {"EXEC"}},
				[]string{"+OK\r\n", queued, queued, "*2\r\n$-1\r\n-ERR Number of keys can't be greater than number of args\r\n"},
			},
		} {
			for i, cmd := range tc.cmds {
				if got := through.do(cmd...); got != tc.want[i] {
					t.Errorf("loops %d, %q: got %q, want %q", loops, cmd, got, tc.want[i])
				}
			}
		}
	}
}
