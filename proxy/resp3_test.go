package proxy_test

import (
	"strings"
	"testing"

	"github.com/sluice-rl/sluice/proxy"
	"github.com/sluice-rl/sluice/router"
)

// After HELLO 3 sluice's own replies take RESP3's types where Redis 7's
// do, and HELLO 2 switches back.
func TestRESP3Replies(t *testing.T) {
	for _, loops := range []int{0, -1} {
		conn := dialRaw(t, serveConfig(t, proxy.Config{Decider: router.NewMemory(0), Loops: loops}))
		for _, step := range []struct {
			cmd    []string
			prefix string
		}{
			{[]string{"CLIENT", "GETNAME"}, "$-1\r\n"},
			{[]string{"HELLO", "3"}, "%7\r\n$6\r\nserver\r\n$6\r\nsluice\r\n"},
			{[]string{"CLIENT", "GETNAME"}, "_\r\n"},
			{[]string{"INFO", "server"}, "="},
			{[]string{"CLIENT", "INFO"}, "="},
			{[]string{"CLUSTER", "INFO"}, "="},
			{[]string{"CLUSTER", "NODES"}, "="},
			{[]string{"CLUSTER", "SHARDS"}, "*1\r\n%2\r\n$5\r\nslots\r\n"},
			{[]string{"CLUSTER", "SLOTS"}, "*1\r\n*3\r\n:0\r\n:16383\r\n"},
			{[]string{"COMMAND", "INFO", "throttle"}, "*1\r\n*10\r\n$8\r\nthrottle\r\n:-2\r\n~2\r\n"},
			{[]string{"COMMAND", "DOCS", "throttle"}, "%1\r\n$8\r\nthrottle\r\n%3\r\n"},
			{[]string{"THROTTLE", "r3", "5", "1", "1s"}, "*5\r\n:0\r\n:5\r\n:4\r\n:-1\r\n"},
			{[]string{"HELLO", "2"}, "*14\r\n"},
			{[]string{"CLIENT", "GETNAME"}, "$-1\r\n"},
			{[]string{"INFO", "server"}, "$"},
			{[]string{"HELLO", "4"}, "-NOPROTO"},
		} {
			if got := conn.do(step.cmd...); !strings.HasPrefix(got, step.prefix) {
				t.Errorf("loops %d, %q: got %q, want it to begin %q", loops, step.cmd, got[:min(len(got), 60)], step.prefix)
			}
		}
	}
}

// HELLO's version is an integer as Redis reads one: "03" is refused, not
// taken as 3 and then answered as RESP2.
func TestHelloVersionAsRedisReadsIt(t *testing.T) {
	conn := dialRaw(t, serveConfig(t, proxy.Config{Decider: router.NewMemory(0)}))
	for _, v := range []string{"03", "002"} {
		if got := conn.do("HELLO", v); got != "-ERR Protocol version is not an integer or out of range\r\n" {
			t.Errorf("HELLO %s: %q, want Redis's error", v, got[:min(len(got), 60)])
		}
	}
	if got := conn.do("HELLO", "3"); !strings.HasPrefix(got, "%7\r\n") {
		t.Errorf("HELLO 3: %q", got[:min(len(got), 60)])
	}
}
