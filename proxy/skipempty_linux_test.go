package proxy_test

import (
	"os/exec"
	"testing"

	"github.com/sluice-rl/sluice/router"
)

// skipEmptyCases are empty commands after CLIENT REPLY SKIP, as Redis 7.0
// answers them: it spends the SKIP on an empty command (processInputBuffer
// resets the client for a command of no arguments, as after one that ran),
// whichever its form, so the command after it is answered, and so is a
// protocol error.
var skipEmptyCases = []struct{ name, send, want string }{
	{"blank line", "CLIENT REPLY SKIP\r\n\r\nPING\r\nECHO a\r\nQUIT\r\n", "+PONG\r\n$1\r\na\r\n+OK\r\n"},
	{"*0", "CLIENT REPLY SKIP\r\n*0\r\nPING\r\nECHO a\r\nQUIT\r\n", "+PONG\r\n$1\r\na\r\n+OK\r\n"},
	{"*-1", "CLIENT REPLY SKIP\r\n*-1\r\nPING\r\nECHO a\r\nQUIT\r\n", "+PONG\r\n$1\r\na\r\n+OK\r\n"},
	{"*-5", "CLIENT REPLY SKIP\r\n*-5\r\nPING\r\nECHO a\r\nQUIT\r\n", "+PONG\r\n$1\r\na\r\n+OK\r\n"},
	{"spaces", "CLIENT REPLY SKIP\r\n  \t \r\nPING\r\nECHO a\r\nQUIT\r\n", "+PONG\r\n$1\r\na\r\n+OK\r\n"},
	{"bare LF", "CLIENT REPLY SKIP\r\n\nPING\r\nECHO a\r\nQUIT\r\n", "+PONG\r\n$1\r\na\r\n+OK\r\n"},
	{"several", "CLIENT REPLY SKIP\r\n\r\n*0\r\n\r\nPING\r\nECHO a\r\nQUIT\r\n", "+PONG\r\n$1\r\na\r\n+OK\r\n"},
	{"skip again", "CLIENT REPLY SKIP\r\n\r\nCLIENT REPLY SKIP\r\nPING\r\nECHO a\r\nQUIT\r\n", "$1\r\na\r\n+OK\r\n"},
	{"skip twice", "CLIENT REPLY SKIP\r\nCLIENT REPLY SKIP\r\n*0\r\nPING\r\nECHO a\r\nQUIT\r\n", "+PONG\r\n$1\r\na\r\n+OK\r\n"},
	{"empty first", "\r\n*0\r\nCLIENT REPLY SKIP\r\nPING\r\nECHO a\r\nQUIT\r\n", "$1\r\na\r\n+OK\r\n"},
	{"mid pipeline", "PING\r\n\r\nPING\r\nCLIENT REPLY SKIP\r\nPING\r\n*0\r\nECHO a\r\nCLIENT REPLY SKIP\r\n\r\nECHO b\r\nQUIT\r\n",
		"+PONG\r\n+PONG\r\n$1\r\na\r\n$1\r\nb\r\n+OK\r\n"},
	{"off", "CLIENT REPLY OFF\r\n\r\nPING\r\nCLIENT REPLY ON\r\nECHO a\r\nQUIT\r\n", "+OK\r\n$1\r\na\r\n+OK\r\n"},
	{"protocol error", "CLIENT REPLY SKIP\r\n\r\n*1\r\n$x\r\n", "-ERR Protocol error: invalid bulk length\r\n"},
	{"protocol error, *0", "CLIENT REPLY SKIP\r\n*0\r\n*1\r\n$x\r\n", "-ERR Protocol error: invalid bulk length\r\n"},
	{"unbalanced quotes", "CLIENT REPLY SKIP\r\n\r\n\"a\r\n", "-ERR Protocol error: unbalanced quotes in request\r\n"},
}

// TestClientReplySkipSpentOnEmpty: on both serving paths, whether the
// bytes come at once or one by one, and as redis-server answers them when
// it is installed.
func TestClientReplySkipSpentOnEmpty(t *testing.T) {
	if _, err := exec.LookPath("redis-server"); err == nil {
		t.Run("redis", func(t *testing.T) {
			addr := startRedis(t)
			for _, c := range skipEmptyCases {
				if got := exchangeToEnd(t, addr, c.send, false); got != c.want {
					t.Errorf("%s: redis-server answers %q, the test wants %q", c.name, got, c.want)
				}
			}
		})
	}
	eachIO(t, func(t *testing.T, serve serveFunc) {
		addr := serve(t, router.NewMemory(0))
		for _, c := range skipEmptyCases {
			for _, bytewise := range []bool{false, true} {
				if got := exchangeToEnd(t, addr, c.send, bytewise); got != c.want {
					t.Errorf("%s (one byte a write: %v): got %q, want %q", c.name, bytewise, got, c.want)
				}
			}
		}
	})
}
