package proxy_test

import (
	"strings"
	"testing"

	"github.com/sluice-rl/sluice/proxy"
	"github.com/sluice-rl/sluice/router"
)

// TestResetKeepsLibNameAndVer: Redis 7.2's RESET clears the client's name
// but not the lib-name and lib-ver CLIENT SETINFO gave, which still say
// what library is behind the connection (clearClientConnectionState).
func TestResetKeepsLibNameAndVer(t *testing.T) {
	for _, loops := range []int{0, -1} {
		c := dialRaw(t, serveConfig(t, proxy.Config{Decider: router.NewMemory(0), Loops: loops}))
		c.do("CLIENT", "SETNAME", "n")
		c.do("CLIENT", "SETINFO", "LIB-NAME", "redis-py")
		c.do("CLIENT", "SETINFO", "LIB-VER", "5.0.1")
		if got := c.do("RESET"); got != "+RESET\r\n" {
			t.Fatalf("loops %d: RESET %q", loops, got)
		}
		got := c.do("CLIENT", "INFO")
		for _, want := range []string{" name= ", " lib-name=redis-py ", " lib-ver=5.0.1\n"} {
			if !strings.Contains(got, want) {
				t.Errorf("loops %d: CLIENT INFO after RESET %q, want %q in it", loops, got, want)
			}
		}
	}
}
