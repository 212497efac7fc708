package proxy_test

import (
	"io"
	"net"
	"testing"
	"time"

	"github.com/sluice-rl/sluice/proxy"
	"github.com/sluice-rl/sluice/router"
)

// FuzzServer sends random bytes and mutated commands into live servers:
// an event loop, the goroutine path, and one that requires a password. A
// server never panics or hangs: it answers what it can and closes the
// connection once the client is done, and it goes on serving other
// clients. The seed corpus is in testdata/fuzz/FuzzServer.
func FuzzServer(f *testing.F) {
	for _, seed := range []string{
		"PING\r\n",
		"*3\r\n$8\r\nTHROTTLE\r\n$1\r\nk\r\n$1\r\n5\r\n",
		"THROTTLE k 5 1 1s\r\nCL.THROTTLE k 5 1 1\r\nGCRA k 5 1 1\r\nTHROTTLE.RESET k\r\n",
		"*1\r\n$999999999999\r\n",
		"*2\r\n*1\r\n$4\r\nPING\r\n",
		"ECHO \"a b\" 'c\r\n",
		"HELLO 3 AUTH default x SETNAME n\r\nCLIENT LIST\r\nINFO\r\n",
		"AUTH secret\r\nACL LIST\r\nACL WHOAMI\r\nRESET\r\nPING\r\n",
		"MULTI\r\nTHROTTLE k 1 1 1s\r\nEXEC\r\n",
		"SUBSCRIBE c\r\nPING\r\nQUIT\r\nPING\r\n",
		"THROTTLE k -1 0 0ms\r\nTHROTTLE k 9223372036854775807 9223372036854775807 1us 9223372036854775807\r\n",
		"COMMAND INFO throttle gcra\r\nCOMMAND DOCS\r\nCLUSTER SLOTS\r\n",
		"\x00\xff\r\n*-5\r\n$-1\r\n",
	} {
		f.Add([]byte(seed))
	}
	m := router.NewMemory(0)
	users, err := proxy.ParseUsers("user default on >secret ~* +@all\nuser ro on >ro ~k* +throttle", "")
	if err != nil {
		f.Fatal(err)
	}
	addrs := []string{
		serveConfig(f, proxy.Config{Decider: m, Loops: 1}),
		serveConfig(f, proxy.Config{Decider: m, Loops: -1}),
		serveConfig(f, proxy.Config{Decider: m, Loops: 1, Users: users}),
	}
	f.Fuzz(func(t *testing.T, input []byte) {
		for _, addr := range addrs {
			c, err := net.Dial("tcp", addr)
			if err != nil {
				t.Fatal(err)
			}
			c.SetDeadline(time.Now().Add(10 * time.Second))
			c.Write(input) // the server may close first (a protocol error)
			c.(*net.TCPConn).CloseWrite()
			if _, err := io.Copy(io.Discard, c); err != nil {
				t.Fatalf("%s: %q: the server neither answered nor closed: %v", addr, input, err)
			}
			c.Close()
			other := dialRaw(t, addr)
			if addr == addrs[2] {
				other.do("AUTH", "secret")
			}
			if got := other.do("PING"); got != "+PONG\r\n" {
				t.Fatalf("%s: after %q, another client's PING: %q", addr, input, got)
			}
			other.c.Close()
		}
	})
}
