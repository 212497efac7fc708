package proxy_test

import (
	"strings"
	"testing"

	"github.com/sluice-rl/sluice/proxy"
	"github.com/sluice-rl/sluice/router"
	"github.com/sluice-rl/sluice/router/clustertest"
)

// TestSubcommandMatchedInASCII: Redis matches a subcommand's name in
// ASCII only (strcasecmp), so "ıd" (dotless i), which Unicode upper-cases
// to ID, is an unknown subcommand, for a client allowed everything too.
func TestSubcommandMatchedInASCII(t *testing.T) {
	eachIOConfig(t, proxy.Config{Decider: router.NewMemory(0)}, func(t *testing.T, cfg proxy.Config) {
		c := dialRaw(t, serveConfig(t, cfg))
		for _, args := range [][]string{
			{"CLIENT", "ıd"}, {"CLIENT", "ſetname"}, {"CLUSTER", "ınfo"}, {"COMMAND", "ınfo"}, {"ACL", "whoamı"},
		} {
			want := "-ERR unknown subcommand '" + args[1] + "'. Try " + args[0] + " HELP.\r\n"
			if got := c.do(args...); got != want {
				t.Errorf("%q answered %q, want %q", args, got, want)
			}
		}
	})
}

// arityLines are calls of the subcommands sluice answers or refuses itself
// with a number of arguments Redis 7.0 refuses, and the subcommand's name
// in redis-server 7.0's error.
var arityLines = []struct {
	args []string
	full string
}{
	{[]string{"ACL", "WHOAMI", "x"}, "acl|whoami"},
	{[]string{"acl", "LIST", "x"}, "acl|list"},
	{[]string{"ACL", "USERS", "x"}, "acl|users"},
	{[]string{"ACL", "GETUSER"}, "acl|getuser"},
	{[]string{"ACL", "GETUSER", "a", "b"}, "acl|getuser"},
	{[]string{"ACL", "HELP", "x"}, "acl|help"},
	{[]string{"ACL", "SAVE", "x"}, "acl|save"},
	{[]string{"ACL", "DRYRUN", "a"}, "acl|dryrun"},
	{[]string{"CLIENT", "ID", "x"}, "client|id"},
	{[]string{"Client", "GetName", "x"}, "client|getname"},
	{[]string{"CLIENT", "INFO", "x"}, "client|info"},
	{[]string{"CLIENT", "HELP", "x"}, "client|help"},
	{[]string{"CLIENT", "SETNAME"}, "client|setname"},
	{[]string{"CLIENT", "REPLY"}, "client|reply"},
	{[]string{"CLIENT", "NO-EVICT", "on", "x"}, "client|no-evict"},
	{[]string{"CLIENT", "KILL"}, "client|kill"},
	{[]string{"CLIENT", "PAUSE"}, "client|pause"},
	{[]string{"CLIENT", "UNPAUSE", "x"}, "client|unpause"},
	{[]string{"CLIENT", "TRACKING"}, "client|tracking"},
	{[]string{"CLIENT", "CACHING"}, "client|caching"},
	{[]string{"CLIENT", "GETREDIR", "x"}, "client|getredir"},
	{[]string{"CLIENT", "TRACKINGINFO", "x"}, "client|trackinginfo"},
	{[]string{"CLIENT", "UNBLOCK"}, "client|unblock"},
	{[]string{"COMMAND", "COUNT", "x"}, "command|count"},
	{[]string{"COMMAND", "HELP", "x"}, "command|help"},
	{[]string{"COMMAND", "GETKEYS", "get"}, "command|getkeys"},
	{[]string{"COMMAND", "GETKEYSANDFLAGS", "get"}, "command|getkeysandflags"},
	{[]string{"CLUSTER", "INFO", "x"}, "cluster|info"},
	{[]string{"CLUSTER", "SLOTS", "x"}, "cluster|slots"},
	{[]string{"CLUSTER", "SHARDS", "x"}, "cluster|shards"},
	{[]string{"CLUSTER", "NODES", "x"}, "cluster|nodes"},
	{[]string{"CLUSTER", "MYID", "x"}, "cluster|myid"},
	{[]string{"CLUSTER", "KEYSLOT"}, "cluster|keyslot"},
	{[]string{"CLUSTER", "COUNTKEYSINSLOT"}, "cluster|countkeysinslot"},
	{[]string{"CLUSTER", "GETKEYSINSLOT", "1"}, "cluster|getkeysinslot"},
	{[]string{"CLUSTER", "HELP", "x"}, "cluster|help"},
	{[]string{"CLUSTER", "ADDSLOTS"}, "cluster|addslots"},
}

// TestSubcommandArityBeforeAuth: redis-server 7.0 checks a subcommand's
// number of arguments before authentication and the user's permissions,
// so a client yet to authenticate, a user not allowed the subcommand and
// one allowed everything all get the arity error.
func TestSubcommandArityBeforeAuth(t *testing.T) {
	us, err := proxy.ParseUsers("user default off\nuser ro on >ro ~* +get\nuser admin on >admin ~* &* +@all", "")
	if err != nil {
		t.Fatal(err)
	}
	eachIOConfig(t, proxy.Config{Decider: router.NewMemory(0), Users: us}, func(t *testing.T, cfg proxy.Config) {
		addr := serveConfig(t, cfg)
		for _, auth := range [][]string{nil, {"AUTH", "ro", "ro"}, {"AUTH", "admin", "admin"}} {
			c := dialRaw(t, addr)
			if auth != nil {
				c.do(auth...)
			}
			for _, l := range arityLines {
				want := "-ERR wrong number of arguments for '" + l.full + "' command\r\n"
				if got := c.do(l.args...); got != want {
					t.Errorf("%q: %s answered %q, want %q", auth, strings.Join(l.args, " "), got, want)
				}
			}
		}
	})
}

// TestSubcommandArityInMulti: inside MULTI, Redis refuses a subcommand of
// a wrong number of arguments, or an unknown one, when it is queued, with
// that error, and EXEC then aborts; for a user not allowed it too.
func TestSubcommandArityInMulti(t *testing.T) {
	c := clustertest.New(t, clustertest.Config{Replicas: -1})
	r := newForwarding(t, c)
	us, err := proxy.ParseUsers("user default off\nuser tx on >tx ~* +get +multi +exec", "")
	if err != nil {
		t.Fatal(err)
	}
	wrongArity := func(full string) string { return "-ERR wrong number of arguments for '" + full + "' command\r\n" }
	lines := []struct {
		args []string
		want string
	}{
		{[]string{"CLIENT", "ID", "x"}, wrongArity("client|id")},
		{[]string{"ACL", "WHOAMI", "x"}, wrongArity("acl|whoami")},
		{[]string{"COMMAND", "COUNT", "x"}, wrongArity("command|count")},
		{[]string{"CLUSTER", "INFO", "x"}, wrongArity("cluster|info")},
		{[]string{"CLIENT", "BOGUS"}, "-ERR unknown subcommand 'BOGUS'. Try CLIENT HELP.\r\n"},
	}
	eachIOConfig(t, proxy.Config{Decider: r, Forwarder: r}, func(t *testing.T, cfg proxy.Config) {
		for _, users := range []*proxy.Users{nil, us} {
			cfg.Users = users
			conn := dialRaw(t, serveConfig(t, cfg))
			if users != nil {
				conn.do("AUTH", "tx", "tx")
			}
			for _, l := range lines {
				if got := conn.do("MULTI"); got != "+OK\r\n" {
					t.Fatalf("MULTI: %q", got)
				}
				if got := conn.do(l.args...); got != l.want {
					t.Errorf("users %v: %q in MULTI answered %q, want %q", users != nil, l.args, got, l.want)
				}
				if got := conn.do("GET", "k"); got != "+QUEUED\r\n" {
					t.Errorf("GET after it: %q", got)
				}
				if got, want := conn.do("EXEC"), "-EXECABORT Transaction discarded because of previous errors.\r\n"; got != want {
					t.Errorf("users %v: EXEC after %q answered %q, want %q", users != nil, l.args, got, want)
				}
			}
		}
	})
}
