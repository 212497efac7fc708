package proxy_test

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
	"testing"

	"github.com/sluice-rl/sluice/proxy"
	"github.com/sluice-rl/sluice/router"
	"github.com/sluice-rl/sluice/router/clustertest"
)

// The subcommands of sluice's own containers are in Redis 7.0's categories
// (COMMAND INFO): a user denied @admin or @dangerous gets NOPERM for CLIENT
// KILL, CLIENT PAUSE or CLUSTER RESET, as from Redis, and may run ACL CAT,
// GENPASS and HELP, which are @slow only.
func TestReviewACLAdminSubcommands(t *testing.T) {
	us := users(t, "user default off\nuser nodang on >n ~* &* +@all -@dangerous\nuser adm on >a ~* &* -@all +@admin", "")
	addr := serveConfig(t, proxy.Config{Decider: router.NewMemory(0), Users: us})
	checkUsers(t, addr, []userCase{
		{"nodang", []string{"CLIENT", "KILL", "ID", "1"}, "-NOPERM User nodang has no permissions to run the 'client|kill' command\r\n"},
		{"nodang", []string{"CLIENT", "PAUSE", "1"}, "-NOPERM User nodang has no permissions to run the 'client|pause' command\r\n"},
		{"nodang", []string{"CLIENT", "UNBLOCK", "1"}, "-NOPERM User nodang has no permissions to run the 'client|unblock' command\r\n"},
		{"nodang", []string{"CLUSTER", "RESET"}, "-NOPERM User nodang has no permissions to run the 'cluster|reset' command\r\n"},
		{"nodang", []string{"CLUSTER", "SETSLOT", "1", "STABLE"}, "-NOPERM User nodang has no permissions to run the 'cluster|setslot' command\r\n"},
		{"nodang", []string{"CLUSTER", "REPLICAS", "x"}, "-NOPERM User nodang has no permissions to run the 'cluster|replicas' command\r\n"},
		{"nodang", []string{"CLIENT", "ID"}, ":"},
		{"nodang", []string{"CLUSTER", "INFO"}, "$"},
		{"nodang", []string{"ACL", "CAT"}, "-ERR sluice answers ACL WHOAMI and ACL LIST only"},
		{"nodang", []string{"ACL", "GENPASS"}, "-ERR sluice answers ACL WHOAMI and ACL LIST only"},
		{"nodang", []string{"ACL", "HELP"}, "-ERR sluice answers ACL WHOAMI and ACL LIST only"},
		{"nodang", []string{"ACL", "LOG"}, "-NOPERM User nodang has no permissions to run the 'acl|log' command\r\n"},
		{"adm", []string{"CLIENT", "KILL", "ID", "999999"}, ":0\r\n"},
		{"adm", []string{"CLUSTER", "RESET"}, "-ERR"},
		{"adm", []string{"ACL", "CAT"}, "-NOPERM User adm has no permissions to run the 'acl|cat' command\r\n"},
	})
}

// SORT BY a pattern without '*' sorts nothing by other keys (Redis's
// dontsort): Redis runs it for a user of some keys only, as the cluster
// does; BY with '*' and GET are still refused.
func TestReviewACLSortByNosort(t *testing.T) {
	c := clustertest.New(t, clustertest.Config{Replicas: -1})
	r := newForwarding(t, c)
	us := users(t, "user default off\nuser k on >k ~k* +@all", "")
	conn := dialRaw(t, serveConfig(t, proxy.Config{Decider: r, Forwarder: r, Users: us}))
	conn.do("AUTH", "k", "k")
	if got := conn.do("RPUSH", "ks", "3", "1", "2"); got != ":3\r\n" {
		t.Fatalf("RPUSH: %q", got)
	}
	const denied = "-NOPERM No permissions to access a key\r\n"
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"SORT", "ks", "BY", "nosort"}, "*3\r\n$1\r\n3\r\n$1\r\n1\r\n$1\r\n2\r\n"},
		{[]string{"SORT_RO", "ks", "by", "nosort", "LIMIT", "0", "1"}, "*1\r\n$1\r\n3\r\n"},
		{[]string{"SORT", "ks", "BY", "nosort", "STORE", "k{ks}"}, ":3\r\n"},
		{[]string{"SORT", "ks", "BY", "nosort", "STORE", "x{ks}"}, denied},
		{[]string{"SORT", "ks", "BY", "k*"}, denied},
		{[]string{"SORT", "ks", "BY", "nosort", "GET", "#"}, denied},
	} {
		if got := conn.do(tc.args...); got != tc.want {
			t.Errorf("%q: got %q, want %q", tc.args, got, tc.want)
		}
	}
}

// Passwords are kept as Redis 7 keeps them: a hash given twice is listed
// once, "<plain" and "!<hash>" remove one (a file Redis's ACL SETUSER
// habits produce loads), removing one the user lacks fails the load, and a
// hash in upper case is refused, as Redis refuses it.
func TestReviewACLPasswordRemoval(t *testing.T) {
	hash := func(p string) string { s := sha256.Sum256([]byte(p)); return hex.EncodeToString(s[:]) }
	for _, bad := range []string{
		"user alice on >a <b",
		"user alice on >a !" + hash("b"),
		"user alice on >a !" + hash("a")[:10],
		"user alice on #" + strings.ToUpper(hash("a")),
		"user alice on >a !" + strings.ToUpper(hash("a")),
	} {
		if _, err := proxy.ParseUsers(bad, ""); err == nil {
			t.Errorf("%q: loaded, want an error", bad)
		}
	}
	us := users(t, "user alice on >a >a >b <a ~* &* +@all\nuser bob on nopass >c !"+hash("c")+" ~* +@all", "")
	c := dialRaw(t, serveConfig(t, proxy.Config{Decider: router.NewMemory(0), Users: us}))
	for _, tc := range []struct{ user, pass, want string }{
		{"alice", "a", "-WRONGPASS"},
		{"alice", "b", "+OK"},
		{"bob", "c", "-WRONGPASS"},
		{"bob", "x", "-WRONGPASS"},
	} {
		if got := c.do("AUTH", tc.user, tc.pass); !strings.HasPrefix(got, tc.want) {
			t.Errorf("AUTH %s %s: %q, want %s", tc.user, tc.pass, got, tc.want)
		}
	}
	got := c.do("ACL", "LIST")
	for _, want := range []string{
		"user alice on #" + hash("b") + " ~* &* +@all\r\n",
		"user bob on ~* resetchannels +@all\r\n",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("ACL LIST: %q, want %q", got, want)
		}
	}
}
