package proxy_test

import (
	"strings"
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

// TestHelloSetnameStaysWhenHelloFails: redis-server 7.0 sets the name of
// HELLO's SETNAME as it reads it, so a HELLO that then fails (a later
// option's syntax, a wrong AUTH, NOAUTH) leaves the client named.
func TestHelloSetnameStaysWhenHelloFails(t *testing.T) {
	us, err := proxy.ParseUsers("", "secret")
	if err != nil {
		t.Fatal(err)
	}
	for _, loops := range []int{0, -1} {
		addr := serveConfig(t, proxy.Config{Decider: router.NewMemory(0), Users: us, Loops: loops})
		for _, tc := range []struct {
			hello []string
			want  string
		}{
			{[]string{"HELLO", "3", "SETNAME", "a"}, "-NOAUTH HELLO must be called"},
			{[]string{"HELLO", "3", "SETNAME", "b", "AUTH", "default", "wrong"}, "-WRONGPASS"},
			{[]string{"HELLO", "3", "SETNAME", "c", "FOO"}, "-ERR Syntax error in HELLO option 'FOO'"},
			{[]string{"HELLO", "2", "SETNAME", "d", "SETNAME", "e f"}, "-ERR Client names cannot contain spaces"},
		} {
			c := dialRaw(t, addr)
			if got := c.do(tc.hello...); !strings.HasPrefix(got, tc.want) {
				t.Errorf("loops %d, %q: got %q, want %q", loops, tc.hello, got, tc.want)
			}
			c.do("AUTH", "secret")
			name := tc.hello[3]
			if got, want := c.do("CLIENT", "GETNAME"), "$1\r\n"+name+"\r\n"; got != want {
				t.Errorf("loops %d, after %q: CLIENT GETNAME %q, want %q", loops, tc.hello, got, want)
			}
			if got := c.do("CLIENT", "INFO"); !strings.Contains(got, " name="+name+" ") {
				t.Errorf("loops %d, after %q: CLIENT INFO %q, want name=%s", loops, tc.hello, got, name)
			}
		}
	}
}
