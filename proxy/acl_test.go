package proxy_test

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"slices"
	"strings"
	"testing"

	"github.com/sluice-rl/sluice/proxy"
	"github.com/sluice-rl/sluice/router"
	"github.com/sluice-rl/sluice/router/clustertest"
	cmdspec "github.com/sluice-rl/sluice/router/command"
)

func users(t *testing.T, text, requirepass string) *proxy.Users {
	t.Helper()
	us, err := proxy.ParseUsers(text, requirepass)
	if err != nil {
		t.Fatal(err)
	}
	return us
}

func TestParseUsers(t *testing.T) {
	for _, bad := range []string{
		"users alice on",
		"user",
		"user alice on >x\nuser alice on >y",
		"user alice on &* &chan:*",
		// A misspelt category: Redis refuses it, where ignoring it would
		// grant what it was meant to deny.
		"user alice on +@all -@dangerus",
		"user alice on %R~rate:*",
		"user alice on #abc",
		"user alice frobnicate",
		"user alice on >x ~* +@all skip-sanitize-payload",
	} {
		if _, err := proxy.ParseUsers(bad, ""); err == nil {
			t.Errorf("%q: loaded, want an error", bad)
		}
	}
	if _, err := proxy.ParseUsers("user default on >x +@all ~*", "y"); err == nil {
		t.Error("a default user in the file and --requirepass: loaded, want an error")
	}
	// Redis 8's module categories load (a cluster of Redis 8 reports its
	// module commands in them); a misspelt one does not.
	users(t, "user ops on >x ~* +@read +@json -@search +@timeseries +@bloom +@cuckoo +@cms +@topk +@tdigest", "")
	if _, err := proxy.ParseUsers("user ops on >x ~* +@jsn", ""); err == nil {
		t.Error("+@jsn: loaded, want an error")
	}
	// A line as Redis's ACL SAVE writes it (sanitize-payload: every user
	// made with reset has it).
	users(t, "user alice on sanitize-payload #2bb80d537b1da3e38bd30361aa855686bde0eacd7162fef6a25fe97bf527a25b ~* &* +@all", "")
	if us := users(t, "# a comment\n\nuser alice on >x ~* +@all", ""); us.AuthRequired() {
		t.Error("a file without a default user: authentication required, want the nopass default user")
	}
	if us := users(t, "", "secret"); !us.AuthRequired() {
		t.Error("--requirepass: authentication not required")
	}
	if us := users(t, "user default off", ""); !us.AuthRequired() {
		t.Error("default user off: authentication not required")
	}
}

// The auth matrix on the embedded backend: no auth, a wrong password, a
// user that is off, and users allowed and denied commands and keys.
func TestAuthMatrix(t *testing.T) {
	sum := sha256.Sum256([]byte("builder"))
	us := users(t, strings.Join([]string{
		"user default off",
		"user alice on >wonderland ~rate:* +throttle +ping +acl|whoami",
		"user bob on #" + hex.EncodeToString(sum[:]) + " ~* +@all -throttle.reset",
		"user carol off >x ~* +@all",
		"user dave on >d ~* +@all -@dangerous",
		`user erin on >e ~rate:[ab]\* ~tenant:[^0-9]* +throttle`,
	}, "\n"), "")
	addr := serveConfig(t, proxy.Config{Decider: router.NewMemory(0), Users: us})
	throttle := func(key string) []string { return []string{"THROTTLE", key, "10", "1", "1s"} }

	c := dialRaw(t, addr)
	for _, tc := range []struct {
		args []string
		want string // a prefix of the reply
	}{
		{[]string{"PING"}, "-NOAUTH Authentication required."},
		{throttle("rate:1"), "-NOAUTH Authentication required."},
		{[]string{"NOSUCH"}, "-ERR unknown command 'NOSUCH'"},
		{[]string{"HELLO", "3"}, "-NOAUTH HELLO must be called with the client already authenticated"},
		{[]string{"AUTH", "alice", "wrong"}, "-WRONGPASS invalid username-password pair or user is disabled."},
		{[]string{"AUTH", "carol", "x"}, "-WRONGPASS"},
		{[]string{"AUTH", "nobody", "x"}, "-WRONGPASS"},
		{[]string{"AUTH", "alice", "wonderland"}, "+OK"},
		{throttle("rate:1"), "*5\r\n:0\r\n"},
		{throttle("other:1"), "-NOPERM No permissions to access a key"},
		{[]string{"THROTTLE.RESET", "rate:1"}, "-NOPERM User alice has no permissions to run the 'throttle.reset' command"},
		{[]string{"ACL", "WHOAMI"}, "$5\r\nalice\r\n"},
		{[]string{"ACL", "LIST"}, "-NOPERM User alice has no permissions to run the 'acl|list' command"},
		{[]string{"ECHO", "x"}, "-NOPERM User alice has no permissions to run the 'echo' command"},
		{[]string{"RESET"}, "+RESET"},
		{[]string{"PING"}, "-NOAUTH"},
		{[]string{"HELLO", "2", "AUTH", "bob", "builder"}, "*"},
		{throttle("other:1"), "*5\r\n:0\r\n"},
		{[]string{"THROTTLE.RESET", "other:1"}, "-NOPERM User bob has no permissions to run the 'throttle.reset' command"},
		{[]string{"AUTH", "dave", "d"}, "+OK"},
		{[]string{"INFO"}, "-NOPERM User dave has no permissions to run the 'info' command"},
		{[]string{"THROTTLE.RESET", "other:1"}, "-NOPERM User dave has no permissions to run the 'throttle.reset' command"},
		{[]string{"ACL", "WHOAMI"}, "$4\r\ndave\r\n"},
		{[]string{"ACL", "LIST"}, "-NOPERM User dave has no permissions to run the 'acl|list' command"},
		{[]string{"CLIENT", "LIST"}, "-NOPERM User dave has no permissions to run the 'client|list' command"},
		{[]string{"CLIENT", "NO-EVICT", "on"}, "-NOPERM User dave has no permissions to run the 'client|no-evict' command"},
		{[]string{"CLIENT", "ID"}, ":"},
		// Redis's glob in key patterns: classes and escapes.
		{[]string{"AUTH", "erin", "e"}, "+OK"},
		{throttle("rate:b*"), "*5\r\n:0\r\n"},
		{throttle("rate:ab"), "-NOPERM No permissions to access a key"},
		{throttle("rate:c*"), "-NOPERM No permissions to access a key"},
		{throttle("tenant:x1"), "*5\r\n:0\r\n"},
		{throttle("tenant:1x"), "-NOPERM No permissions to access a key"},
		{[]string{"AUTH", "bob", "builder"}, "+OK"},
	} {
		if got := c.do(tc.args...); !strings.HasPrefix(got, tc.want) {
			t.Errorf("%q: got %q, want %q...", tc.args, got, tc.want)
		}
	}
	list := c.do("ACL", "LIST")
	if !strings.Contains(list, "user bob on #"+hex.EncodeToString(sum[:])) || strings.Contains(list, "wonderland") {
		t.Errorf("ACL LIST: %q, want users by their password hashes only", list)
	}

	// --requirepass alone: the default user's password.
	c = dialRaw(t, serveConfig(t, proxy.Config{Decider: router.NewMemory(0), Users: users(t, "", "secret")}))
	for _, tc := range []struct {
		args []string
		want string
	}{
		{throttle("k"), "-NOAUTH"},
		{[]string{"AUTH", "wrong"}, "-WRONGPASS"},
		{[]string{"AUTH", "secret"}, "+OK"},
		{throttle("k"), "*5\r\n:0\r\n"},
		{[]string{"AUTH", "default", "secret"}, "+OK"},
	} {
		if got := c.do(tc.args...); !strings.HasPrefix(got, tc.want) {
			t.Errorf("requirepass: %q: got %q, want %q...", tc.args, got, tc.want)
		}
	}

	// No users: nothing is asked, and AUTH says there is no password.
	c = dialRaw(t, serveConfig(t, proxy.Config{Decider: router.NewMemory(0)}))
	if got := c.do("AUTH", "x"); !strings.HasPrefix(got, "-ERR AUTH <password> called without any password configured") {
		t.Errorf("AUTH without users: %q", got)
	}
	if got := c.do("ACL", "WHOAMI"); got != "$7\r\ndefault\r\n" {
		t.Errorf("ACL WHOAMI without users: %q", got)
	}
}

// Passthrough commands are checked by the cluster's own ACL categories and
// key specs; a refused command inside MULTI aborts the transaction.
func TestAuthPassthrough(t *testing.T) {
	c := clustertest.New(t, clustertest.Config{Replicas: -1})
	r := newForwarding(t, c)
	us := users(t, "user default off\nuser reader on >r ~cache:* +@read +@scripting +sort +multi +exec +set +subscribe &ch", "")
	conn := dialRaw(t, serveConfig(t, proxy.Config{Decider: r, Forwarder: r, Users: us}))
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"GET", "cache:1"}, "-NOAUTH"},
		{[]string{"AUTH", "reader", "r"}, "+OK"},
		{[]string{"GET", "cache:1"}, "$-1"},
		{[]string{"MGET", "cache:1", "cache:2"}, "*2"},
		{[]string{"GET", "secret:1"}, "-NOPERM No permissions to access a key"},
		{[]string{"MGET", "cache:1", "secret:2"}, "-NOPERM No permissions to access a key"},
		{[]string{"DEL", "cache:1"}, "-NOPERM User reader has no permissions to run the 'del' command"},
		{[]string{"CONFIG", "GET", "maxmemory"}, "-NOPERM User reader has no permissions to run the 'config|get' command"},
		{[]string{"SET", "{cache:1}x", "v"}, "-NOPERM No permissions to access a key"},
		{[]string{"SORT", "cache:1", "BY", "secret:*"}, "-NOPERM No permissions to access a key"},
		{[]string{"SORT", "cache:1", "GET", "#"}, "-NOPERM No permissions to access a key"},
		// Without BY or GET, SORT's keys are its key and where it stores.
		{[]string{"SORT", "cache:1", "LIMIT", "0", "1", "ALPHA"}, "*0"},
		{[]string{"SORT", "cache:1", "STORE", "{cache:1}x"}, "-NOPERM No permissions to access a key"},
		{[]string{"SORT", "secret:1"}, "-NOPERM No permissions to access a key"},
		{[]string{"EVAL", "return redis.call('GET', 'secret:1')", "1", "cache:1"}, "-NOPERM User reader may use some keys or channels only"},
		{[]string{"MULTI"}, "+OK"},
		{[]string{"SET", "cache:1", "v"}, "+QUEUED"},
		{[]string{"DEL", "cache:1"}, "-NOPERM"},
		{[]string{"EXEC"}, "-EXECABORT"},
		{[]string{"GET", "cache:1"}, "$-1"},
		// RESET in subscribed mode signs the client out too.
		{[]string{"SUBSCRIBE", "ch"}, "*3"},
		{[]string{"RESET"}, "+RESET"},
		{[]string{"GET", "cache:1"}, "-NOAUTH"},
	} {
		if got := conn.do(tc.args...); !strings.HasPrefix(got, tc.want) {
			t.Errorf("%q: got %q, want %q...", tc.args, got, tc.want)
		}
	}
}

// Without --requirepass or --aclfile the default user runs everything, and
// ACL LIST says so, as Redis lists its own default user.
func TestACLListWithoutUsers(t *testing.T) {
	c := dialRaw(t, serveConfig(t, proxy.Config{Decider: router.NewMemory(0)}))
	if got := c.do("ACL", "LIST"); !strings.Contains(got, "user default on nopass ~* ") || !strings.HasSuffix(got, " +@all\r\n") {
		t.Errorf("ACL LIST without users: %q, want the default user with +@all", got)
	}
	// Extra arguments answer Redis's arity error of the subcommand.
	for _, sub := range []string{"WHOAMI", "list"} {
		want := "-ERR wrong number of arguments for 'acl|" + strings.ToLower(sub) + "' command\r\n"
		if got := c.do("ACL", sub, "extra"); got != want {
			t.Errorf("ACL %s extra: %q, want %q", sub, got, want)
		}
	}
}

// Redis 8.8's gcra.json puts GCRA in the rate_limit ACL category, so an
// ACL file written for Redis grants or denies it with @rate_limit.
func TestGCRARateLimitCategory(t *testing.T) {
	us := users(t, strings.Join([]string{
		"user default off",
		"user erin on >e ~* +@rate_limit",
		"user frank on >f ~* +@all -@rate_limit",
	}, "\n"), "")
	c := dialRaw(t, serveConfig(t, proxy.Config{Decider: router.NewMemory(0), Users: us}))
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"AUTH", "erin", "e"}, "+OK"},
		{[]string{"GCRA", "k", "5", "10", "60"}, "*5\r\n:0\r\n"},
		// sluice's own rate limiting commands are in the category too.
		{[]string{"THROTTLE", "t", "5", "1", "1s"}, "*5\r\n:0\r\n"},
		{[]string{"CL.THROTTLE", "c", "5", "1", "1"}, "*5\r\n:0\r\n"},
		{[]string{"THROTTLE.RESET", "t"}, "-NOPERM User erin has no permissions to run the 'throttle.reset' command"},
		{[]string{"AUTH", "frank", "f"}, "+OK"},
		{[]string{"GCRA", "k", "5", "10", "60"}, "-NOPERM User frank has no permissions to run the 'gcra' command"},
		{[]string{"THROTTLE", "t", "5", "1", "1s"}, "-NOPERM User frank has no permissions to run the 'throttle' command"},
		{[]string{"CL.THROTTLE", "c", "5", "1", "1"}, "-NOPERM User frank has no permissions to run the 'cl.throttle' command"},
	} {
		if got := c.do(tc.args...); !strings.HasPrefix(got, tc.want) {
			t.Errorf("%q: got %q, want %q...", tc.args, got, tc.want)
		}
	}
}

// Redis reads an ACL rule's keywords in any case (strcasecmp): -@ALL
// revokes every command as -@all does, and +@ALL grants them. Read as a
// category named "all", -@ALL revoked nothing and +@ALL granted nothing.
func TestACLKeywordsAnyCase(t *testing.T) {
	us := users(t, strings.Join([]string{
		"user default off",
		"user eve ON >e ALLKEYS +@all -@ALL +ping",
		"user fay on >f ~* +@ALL",
		"user gus on >g ~* +@all NOCOMMANDS +ping",
	}, "\n"), "")
	c := dialRaw(t, serveConfig(t, proxy.Config{Decider: router.NewMemory(0), Users: us}))
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"AUTH", "eve", "e"}, "+OK"},
		{[]string{"PING"}, "+PONG"},
		{[]string{"THROTTLE", "k", "10", "1", "1s"}, "-NOPERM User eve has no permissions to run the 'throttle' command"},
		{[]string{"AUTH", "fay", "f"}, "+OK"},
		{[]string{"THROTTLE", "k", "10", "1", "1s"}, "*5\r\n:0\r\n"},
		{[]string{"AUTH", "gus", "g"}, "+OK"},
		{[]string{"THROTTLE", "k", "10", "1", "1s"}, "-NOPERM User gus has no permissions to run the 'throttle' command"},
	} {
		if got := c.do(tc.args...); !strings.HasPrefix(got, tc.want) {
			t.Errorf("%q: got %q, want %q...", tc.args, got, tc.want)
		}
	}
}

// A client that has yet to authenticate gets Redis 7's smaller bounds: at
// most 10 arguments of at most 16 KiB, or a protocol error; once AUTH
// ran, even in the same pipeline, the usual ones.
func TestUnauthenticatedBounds(t *testing.T) {
	eachLoops(t, func(t *testing.T, loops int) {
		addr := serveConfig(t, proxy.Config{Decider: router.NewMemory(0), Loops: loops, Users: users(t, "", "secret")})
		for _, tt := range []struct{ name, send, want string }{
			{"11 arguments", "*11\r\n", "-ERR Protocol error: unauthenticated multibulk length"},
			{"a long argument", "*1\r\n$16385\r\n", "-ERR Protocol error: unauthenticated bulk length"},
			// RESET makes the client one yet to authenticate again, for
			// what it pipelined after it too.
			{"11 arguments after a RESET", "AUTH secret\r\nRESET\r\n*11\r\n", "-ERR Protocol error: unauthenticated multibulk length"},
			{"a long argument after a RESET", "AUTH secret\r\nRESET\r\n*1\r\n$16385\r\n", "-ERR Protocol error: unauthenticated bulk length"},
		} {
			t.Run(tt.name, func(t *testing.T) {
				conn, r := raw(t, addr)
				io.WriteString(conn, tt.send)
				if strings.HasPrefix(tt.send, "AUTH") {
					for _, want := range []string{"+OK\r\n", "+RESET\r\n"} {
						if line, err := r.ReadString('\n'); err != nil || line != want {
							t.Fatalf("got %q, %v, want %q", line, err, want)
						}
					}
				}
				if line, err := r.ReadString('\n'); err != nil || strings.TrimSpace(line) != tt.want {
					t.Fatalf("got %q, %v, want %q", line, err, tt.want)
				}
				if _, err := r.ReadByte(); err != io.EOF {
					t.Fatalf("connection still open after a protocol error (%v)", err)
				}
			})
		}
		conn, r := raw(t, addr)
		long := strings.Repeat("e", 20000)
		fmt.Fprintf(conn, "*2\r\n$4\r\nECHO\r\n$5\r\nshort\r\nAUTH secret\r\n*2\r\n$4\r\nECHO\r\n$%d\r\n%s\r\n", len(long), long)
		for _, want := range []string{"-NOAUTH", "+OK", "$20000"} {
			if line, err := r.ReadString('\n'); err != nil || !strings.HasPrefix(line, want) {
				t.Fatalf("got %.80q, %v, want %q", line, err, want)
			}
		}
	})
}

// Channels are checked as Redis 7 checks them: a user of the ACL file has
// none unless given (acl-pubsub-default is resetchannels), PUBLISH and
// SUBSCRIBE match &patterns as globs, PSUBSCRIBE only a pattern given
// literally, and a script, whose PUBLISH sluice cannot see, needs
// allchannels as it needs allkeys.
func TestACLChannels(t *testing.T) {
	c := clustertest.New(t, clustertest.Config{Replicas: -1})
	r := newForwarding(t, c)
	us := users(t, strings.Join([]string{
		"user default off",
		"user plain on >p ~* +@all",
		"user news on >n ~* +@all &news:* &exact",
		"user every on >e ~* &* +@all",
		"user reset on >r ~* allchannels resetchannels +@all",
	}, "\n"), "")
	addr := serveConfig(t, proxy.Config{Decider: r, Forwarder: r, Users: us})
	const denied = "-NOPERM No permissions to access a channel\r\n"
	checkUsers(t, addr, []userCase{
		{"plain", []string{"PUBLISH", "ch", "x"}, denied},
		{"plain", []string{"SUBSCRIBE", "ch"}, denied},
		{"plain", []string{"EVAL", "return 1", "0"}, "-NOPERM User plain may use some keys or channels only"},
		{"plain", []string{"FCALL_RO", "f", "0"}, "-NOPERM User plain may use some keys or channels only"},
		// What runs no script touches only what it names.
		{"plain", []string{"SCRIPT", "EXISTS", "0123456789012345678901234567890123456789"}, "*1\r\n:0\r\n"},
		{"reset", []string{"SPUBLISH", "ch", "x"}, denied},
		{"news", []string{"PUBLISH", "news:1", "x"}, ":0"},
		{"news", []string{"PUBLISH", "exact", "x"}, ":0"},
		{"news", []string{"PUBLISH", "other", "x"}, denied},
		{"news", []string{"SPUBLISH", "other", "x"}, denied},
		{"news", []string{"SUBSCRIBE", "news:1", "other"}, denied},
		{"news", []string{"SSUBSCRIBE", "other"}, denied},
		{"news", []string{"PSUBSCRIBE", "news:1*"}, denied},
		{"news", []string{"PSUBSCRIBE", "news:*"}, "*3\r\n$10\r\npsubscribe\r\n"},
		{"every", []string{"PUBLISH", "anything", "x"}, ":0"},
		{"every", []string{"EVAL", "return 1", "0"}, ":1"},
	})
	list := dialRaw(t, addr)
	list.do("AUTH", "every", "e")
	got := list.do("ACL", "LIST")
	for _, want := range []string{" ~* resetchannels +@all\r\n", " ~* resetchannels &news:* &exact +@all\r\n", " ~* &* +@all\r\n"} {
		if !strings.Contains(got, want) {
			t.Errorf("ACL LIST: %q, want a user listed with %q", got, want)
		}
	}
}

// A subcommand of sluice's own containers (COMMAND, CLUSTER, as CLIENT and
// ACL) is granted or denied by its own name, as in Redis 7: +command|count
// grants COMMAND COUNT alone, -cluster|nodes denies CLUSTER NODES alone.
func TestACLOwnSubcommands(t *testing.T) {
	us := users(t, "user default off\nuser sub on >s ~* -@all +command|count +cluster|info\nuser most on >m ~* &* +@all -command|docs -cluster|nodes", "")
	addr := serveConfig(t, proxy.Config{Decider: router.NewMemory(0), Users: us})
	checkUsers(t, addr, []userCase{
		{"sub", []string{"COMMAND", "COUNT"}, ":"},
		{"sub", []string{"CLUSTER", "INFO"}, "$"},
		{"sub", []string{"COMMAND", "DOCS", "get"}, "-NOPERM User sub has no permissions to run the 'command|docs' command\r\n"},
		{"sub", []string{"CLUSTER", "NODES"}, "-NOPERM User sub has no permissions to run the 'cluster|nodes' command\r\n"},
		{"most", []string{"COMMAND", "DOCS", "get"}, "-NOPERM User most has no permissions to run the 'command|docs' command\r\n"},
		{"most", []string{"CLUSTER", "NODES"}, "-NOPERM User most has no permissions to run the 'cluster|nodes' command\r\n"},
		{"most", []string{"COMMAND", "COUNT"}, ":"},
		{"most", []string{"CLUSTER", "INFO"}, "$"},
	})
}

// A command the user may not run is refused by name first, as Redis checks
// the command before its keys, even when sluice could not have checked its
// keys (SORT ... BY, a script).
func TestACLCommandBeforeKeys(t *testing.T) {
	c := clustertest.New(t, clustertest.Config{Replicas: -1})
	r := newForwarding(t, c)
	us := users(t, "user default off\nuser k on >k ~cache:* -@all +get", "")
	conn := dialRaw(t, serveConfig(t, proxy.Config{Decider: r, Forwarder: r, Users: us}))
	conn.do("AUTH", "k", "k")
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"SORT", "cache:1", "BY", "x*"}, "-NOPERM User k has no permissions to run the 'sort' command\r\n"},
		{[]string{"EVAL", "return 1", "1", "cache:1"}, "-NOPERM User k has no permissions to run the 'eval' command\r\n"},
		{[]string{"GET", "other"}, "-NOPERM No permissions to access a key\r\n"},
	} {
		if got := conn.do(tc.args...); got != tc.want {
			t.Errorf("%q: got %q, want %q", tc.args, got, tc.want)
		}
	}
}

// AUTH <password> for a default user that has no password is Redis's
// configuration error, even when that user is off.
func TestAuthOneArgumentNopassDefault(t *testing.T) {
	us := users(t, "user default off nopass\nuser x on nopass ~* +@all", "")
	c := dialRaw(t, serveConfig(t, proxy.Config{Decider: router.NewMemory(0), Users: us}))
	const want = "-ERR AUTH <password> called without any password configured for the default user. Are you sure your configuration is correct?\r\n"
	if got := c.do("AUTH", "anything"); got != want {
		t.Errorf("AUTH anything: %q, want %q", got, want)
	}
	if got := c.do("PING"); got != "-NOAUTH Authentication required.\r\n" {
		t.Errorf("PING after: %q, want NOAUTH", got)
	}
}

// ACL LIST lists users by name, as Redis 7 lists them (its users' radix
// tree), whatever their order in the file.
func TestACLListOrder(t *testing.T) {
	us := users(t, "user zed on nopass ~* &* +@all\nuser carl on nopass ~* +@all\nuser alice on nopass ~* +@all", "")
	c := dialRaw(t, serveConfig(t, proxy.Config{Decider: router.NewMemory(0), Users: us}))
	got := c.do("ACL", "LIST")
	var names []string
	for _, l := range strings.Split(got, "\r\n") {
		if f := strings.Fields(l); len(f) > 1 && f[0] == "user" {
			names = append(names, f[1])
		}
	}
	if want := "alice carl default zed"; strings.Join(names, " ") != want {
		t.Errorf("ACL LIST: users %v, want %s", names, want)
	}
}

// ACL LIST describes commands as Redis 7 does: from +@all or -@all, the
// rules before the last of those left out, as they no longer decide
// anything.
func TestACLListCommandRules(t *testing.T) {
	us := users(t, "user a on nopass ~* +get +set\nuser b on nopass ~* nocommands +ping allcommands -get\nuser c on nopass ~* +@all -@dangerous", "")
	c := dialRaw(t, serveConfig(t, proxy.Config{Decider: router.NewMemory(0), Users: us}))
	got := c.do("ACL", "LIST")
	for _, want := range []string{
		"user a on nopass ~* resetchannels -@all +get +set\r\n",
		"user b on nopass ~* resetchannels +@all -get\r\n",
		"user c on nopass ~* resetchannels +@all -@dangerous\r\n",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("ACL LIST: %q, want %q", got, want)
		}
	}
}

// The rules that match no command sluice checks are reported: a command
// neither sluice nor the cluster has (Redis refuses them at load; a
// misspelt deny denies nothing), and the deny form of a rule on a plain
// command's first argument (-select|9, which Redis refuses). Its allow
// form (+select|0, +echo|hi) is enforced, and sluice's own commands and
// subcommands and the cluster's are known.
func TestUnknownACLCommands(t *testing.T) {
	us := users(t, "user default on nopass ~* &* +@all -flushal -config|gett +config|get +throttle -acl|whoami +client|nosuch "+
		"+select|0 -select|9 +echo|hi +get -cluster|nodes -cluster|nosuch -debug|segfault +get|a|b +select|\nuser b on >x ~* -FLUSHAL +nosuch\n", "")
	specs := map[string]*cmdspec.Spec{
		"get":     {Name: "get"},
		"select":  {Name: "select"},
		"debug":   {Name: "debug"},
		"config":  {Name: "config", Subcommands: map[string]*cmdspec.Spec{"get": {Name: "config|get"}}},
		"cluster": {Name: "cluster", Subcommands: map[string]*cmdspec.Spec{"nodes": {Name: "cluster|nodes"}, "nosuch": {Name: "cluster|nosuch"}}},
	}
	got := us.UnknownCommands(specs)
	// By user, in name order (b, then default), each name once; CLUSTER
	// is sluice's, whose subcommands the cluster's do not add to.
	want := []string{"flushal", "nosuch", "config|gett", "client|nosuch", "select|9", "cluster|nosuch", "debug|segfault", "get|a|b", "select|"}
	if !slices.Equal(got, want) {
		t.Fatalf("unknown commands %q, want %q", got, want)
	}
	if got := users(t, "user default on nopass ~* &* +@all -get -config|get +client|list\n", "").UnknownCommands(specs); len(got) != 0 {
		t.Fatalf("unknown commands %q of a file whose commands are known", got)
	}
}

// A rule on a command's first argument (+get|cache:1), which Redis 7 still
// takes for a command without subcommands, allows that command with that
// first argument only, in any case, and applies in order with the rest
// (a later category may grant or deny the whole command): for sluice's own
// commands and for those it forwards.
func TestACLFirstArgument(t *testing.T) {
	c := clustertest.New(t, clustertest.Config{Replicas: -1})
	r := newForwarding(t, c)
	us := users(t, "user default off\n"+
		"user f on >f ~* -@all +get|cache:1 +echo|Hi +get|cache:2 -get +get|cache:3\n"+
		"user g on >g ~* -@all +get|cache:1 +@read\n"+
		"user h on >h ~* +@all -@read +get|cache:1 -@all +echo|hi\n"+
		// Redis folds case in ASCII only (strcasecmp): no Unicode folding
		// (ſ is not s, the Kelvin sign not k), and bytes that are not
		// UTF-8 are compared as they are.
		"user s on >s ~* -@all +get|stats +echo|\u212aey +echo|caf\xe9\n", "")
	addr := serveConfig(t, proxy.Config{Decider: r, Forwarder: r, Users: us})
	for _, tc := range []struct {
		user string
		args []string
		want string // a prefix of the reply
	}{
		{"f", []string{"GET", "cache:3"}, "$-1"},
		{"f", []string{"GET", "CACHE:3"}, "$-1"},
		{"f", []string{"GET", "cache:1"}, "-NOPERM User f has no permissions to run the 'get' command"},
		{"f", []string{"GET", "cache:4"}, "-NOPERM User f has no permissions to run the 'get' command"},
		{"f", []string{"ECHO", "hI"}, "$2"},
		{"f", []string{"ECHO", "bye"}, "-NOPERM User f has no permissions to run the 'echo' command"},
		{"f", []string{"MGET", "cache:3"}, "-NOPERM User f has no permissions to run the 'mget' command"},
		{"g", []string{"GET", "cache:9"}, "$-1"},
		{"h", []string{"GET", "cache:1"}, "-NOPERM User h has no permissions to run the 'get' command"},
		{"h", []string{"ECHO", "hi"}, "$2"},
		{"h", []string{"PING"}, "-NOPERM User h has no permissions to run the 'ping' command"},
		{"s", []string{"GET", "STATS"}, "$-1"},
		{"s", []string{"GET", "\u017ftats"}, "-NOPERM User s has no permissions to run the 'get' command"},
		{"s", []string{"ECHO", "key"}, "-NOPERM User s has no permissions to run the 'echo' command"},
		{"s", []string{"ECHO", "\u212aEY"}, "$5"},
		{"s", []string{"ECHO", "CAF\xe9"}, "$4"},
		{"s", []string{"ECHO", "caf\xff"}, "-NOPERM User s has no permissions to run the 'echo' command"},
	} {
		conn := dialRaw(t, addr)
		if got := conn.do("AUTH", tc.user, tc.user); got != "+OK\r\n" {
			t.Fatalf("AUTH %s: %q", tc.user, got)
		}
		if got := conn.do(tc.args...); !strings.HasPrefix(got, tc.want) {
			t.Errorf("%s %q: got %q, want %q...", tc.user, tc.args, got, tc.want)
		}
	}
}

// A script's redis.call runs as sluice's cluster user, where Redis checks
// it against the caller's rules: a user denied any command may not run a
// script or function, even with allkeys and allchannels, or -@dangerous
// and -set would not hold inside EVAL and FCALL.
func TestACLScriptsNeedEveryCommand(t *testing.T) {
	c := clustertest.New(t, clustertest.Config{Replicas: -1})
	r := newForwarding(t, c)
	us := users(t, strings.Join([]string{
		"user default off",
		"user safe on >s ~* &* +@all -@dangerous",
		"user few on >f ~* &* -@all +eval +evalsha +fcall +get",
		"user back on >b ~* &* +@all -set +@all",
	}, "\n"), "")
	addr := serveConfig(t, proxy.Config{Decider: r, Forwarder: r, Users: us})
	checkUsers(t, addr, []userCase{
		{"safe", []string{"EVAL", "return redis.call('flushdb')", "0"}, "-NOPERM User safe may run some commands only"},
		{"few", []string{"EVAL", "return redis.call('set', KEYS[1], 'v')", "1", "k"}, "-NOPERM User few may run some commands only"},
		{"few", []string{"FCALL", "f", "1", "k"}, "-NOPERM User few may run some commands only"},
		{"few", []string{"GET", "k"}, "$-1"},
		// A later +@all grants everything again.
		{"back", []string{"EVAL", "return 1", "0"}, ":1"},
	})
}

// GEORADIUS stores into its last STORE or STOREDIST, where its key specs
// name the first of each: every one is checked, or a user of ~k* could
// write y{kgeo} (same slot, so the node runs it) behind a STORE k{kgeo}.
func TestACLGeoradiusEveryStore(t *testing.T) {
	c := clustertest.New(t, clustertest.Config{Replicas: -1})
	r := newForwarding(t, c)
	us := users(t, "user default off\nuser admin on >a ~* &* +@all\nuser k on >k ~k* +@all", "")
	addr := serveConfig(t, proxy.Config{Decider: r, Forwarder: r, Users: us})
	admin := dialRaw(t, addr)
	admin.do("AUTH", "admin", "a")
	if got := admin.do("GEOADD", "kgeo", "0", "0", "m"); got != ":1\r\n" {
		t.Fatalf("GEOADD: %q", got)
	}
	conn := dialRaw(t, addr)
	conn.do("AUTH", "k", "k")
	const denied = "-NOPERM No permissions to access a key\r\n"
	for _, args := range [][]string{
		{"GEORADIUS", "kgeo", "0", "0", "1", "m", "STORE", "k{kgeo}", "STORE", "y{kgeo}"},
		{"GEORADIUS", "kgeo", "0", "0", "1", "m", "STOREDIST", "k{kgeo}", "STORE", "y{kgeo}"},
		{"GEORADIUSBYMEMBER", "kgeo", "m", "1", "m", "STORE", "k{kgeo}", "STOREDIST", "y{kgeo}"},
	} {
		if got := conn.do(args...); got != denied {
			t.Errorf("%q: got %q, want %q", args, got, denied)
		}
	}
	if got := admin.do("EXISTS", "y{kgeo}"); got != ":0\r\n" {
		t.Errorf("EXISTS y{kgeo}: %q, want :0 (written by a user of ~k*)", got)
	}
	if got := conn.do("GEORADIUS", "kgeo", "0", "0", "1", "m", "STORE", "k{kgeo}"); got != ":1\r\n" {
		t.Errorf("GEORADIUS ... STORE k{kgeo}: %q, want :1", got)
	}
}

// userCase is a command a user sends, and the start of the reply it gets.
type userCase struct {
	user string
	args []string
	want string
}

// checkUsers sends each case's command on a connection of its own,
// authenticated as its user (whose password is the name's first letter).
func checkUsers(t *testing.T, addr string, cases []userCase) {
	t.Helper()
	for _, tc := range cases {
		conn := dialRaw(t, addr)
		if got := conn.do("AUTH", tc.user, tc.user[:1]); got != "+OK\r\n" {
			t.Fatalf("AUTH %s: %q", tc.user, got)
		}
		if got := conn.do(tc.args...); !strings.HasPrefix(got, tc.want) {
			t.Errorf("%s %q: got %q, want %q...", tc.user, tc.args, got, tc.want)
		}
	}
}
