package proxy_test

import (
	"strings"
	"testing"

	"github.com/sluice-rl/sluice/proxy"
	"github.com/sluice-rl/sluice/router"
)

// TestHelloAuthStaysWhenHelloFails: redis-server 7.0 authenticates HELLO's
// AUTH as it reads it, so a HELLO that then fails (a later option's
// syntax, a bad SETNAME, a second AUTH that is wrong) leaves the client
// the user of the AUTH that succeeded; a failed AUTH changes nothing.
func TestHelloAuthStaysWhenHelloFails(t *testing.T) {
	us, err := proxy.ParseUsers("user default off\nuser bob on >builder ~* &* +@all", "")
	if err != nil {
		t.Fatal(err)
	}
	for _, loops := range []int{0, -1} {
		addr := serveConfig(t, proxy.Config{Decider: router.NewMemory(0), Users: us, Loops: loops})
		for _, tc := range []struct {
			hello []string
			want  string
		}{
			{[]string{"HELLO", "3", "AUTH", "bob", "builder", "FOO"}, "-ERR Syntax error in HELLO option 'FOO'"},
			{[]string{"HELLO", "3", "AUTH", "bob", "builder", "SETNAME", "a b"}, "-ERR Client names cannot contain spaces"},
			{[]string{"HELLO", "3", "AUTH", "bob", "builder", "AUTH", "bob", "wrong"}, "-WRONGPASS"},
		} {
			c := dialRaw(t, addr)
			if got := c.do(tc.hello...); !strings.HasPrefix(got, tc.want) {
				t.Errorf("loops %d, %q: got %q, want %q", loops, tc.hello, got, tc.want)
			}
			// Still RESP2: the switch comes after every option is taken.
			if got, want := c.do("ACL", "WHOAMI"), "$3\r\nbob\r\n"; got != want {
				t.Errorf("loops %d, after %q: ACL WHOAMI %q, want %q", loops, tc.hello, got, want)
			}
		}
	}
}

// TestUnknownSubcommandBeforeAuth: Redis answers a container's unknown
// subcommand before it checks authentication or the user's permissions,
// for sluice's own containers as for the cluster's.
func TestUnknownSubcommandBeforeAuth(t *testing.T) {
	us, err := proxy.ParseUsers("user default off\nuser ro on >ro ~* +get", "")
	if err != nil {
		t.Fatal(err)
	}
	for _, loops := range []int{0, -1} {
		addr := serveConfig(t, proxy.Config{Decider: router.NewMemory(0), Users: us, Loops: loops})
		for _, auth := range [][]string{nil, {"AUTH", "ro", "ro"}} {
			c := dialRaw(t, addr)
			if auth != nil {
				c.do(auth...)
			}
			for _, container := range []string{"ACL", "CLIENT", "COMMAND", "CLUSTER"} {
				want := "-ERR unknown subcommand 'BOGUS'. Try " + container + " HELP.\r\n"
				if got := c.do(container, "BOGUS"); got != want {
					t.Errorf("loops %d, %q: %s BOGUS answered %q, want %q", loops, auth, container, got, want)
				}
			}
		}
	}
}
