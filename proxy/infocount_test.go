package proxy_test

import (
	"strings"
	"testing"

	"github.com/sluice-rl/sluice/proxy"
	"github.com/sluice-rl/sluice/router"
)

// total_commands_processed counts a command once it has run, as Redis
// does: a new server's first INFO says 0, the next 2 (that INFO and a
// PING), on both serving paths.
func TestInfoDoesNotCountItself(t *testing.T) {
	for _, loops := range []int{1, -1} {
		conn := dialRaw(t, serveConfig(t, proxy.Config{Decider: router.NewMemory(0), Loops: loops}))
		for _, want := range []string{"total_commands_processed:0\r\n", "total_commands_processed:2\r\n"} {
			if info := conn.do("INFO", "stats"); !strings.Contains(info, want) {
				t.Errorf("loops %d: INFO stats %q, want %q", loops, info, want)
			}
			conn.do("PING")
		}
	}
}
