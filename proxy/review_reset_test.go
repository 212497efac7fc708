package proxy_test

import (
	"testing"

	"github.com/sluice-rl/sluice/proxy"
	"github.com/sluice-rl/sluice/router"
)

// TestHelloNoAuthWordsAsRedis70: HELLO from a client yet to authenticate
// is refused in redis-server 7.0's words, on both serving paths (the
// "<proto>" in them is 7.2's, and sluice answers as 7.0).
func TestHelloNoAuthWordsAsRedis70(t *testing.T) {
	us, err := proxy.ParseUsers("", "secret")
	if err != nil {
		t.Fatal(err)
	}
	const want = "-NOAUTH HELLO must be called with the client already authenticated, otherwise the HELLO AUTH <user> <pass> option can be used to authenticate the client and select the RESP protocol version at the same time\r\n"
	for _, loops := range []int{0, -1} {
		c := dialRaw(t, serveConfig(t, proxy.Config{Decider: router.NewMemory(0), Users: us, Loops: loops}))
		for _, args := range [][]string{{"HELLO"}, {"HELLO", "3"}, {"HELLO", "2", "SETNAME", "x"}} {
			if got := c.do(args...); got != want {
				t.Errorf("loops %d, %q: got %q, want %q", loops, args, got, want)
			}
		}
	}
}
