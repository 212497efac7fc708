package proxy_test

import (
	"context"
	"io"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/sluice-rl/sluice/proxy"
	"github.com/sluice-rl/sluice/router"
	"github.com/sluice-rl/sluice/router/clustertest"
)

// lineOf is the CLIENT LIST line of client id, or "".
func lineOf(list string, id int64) string {
	for _, line := range strings.Split(list, "\n") {
		if strings.HasPrefix(line, "id="+strconv.FormatInt(id, 10)+" ") {
			return line
		}
	}
	return ""
}

func TestClientList(t *testing.T) {
	eachIO(t, func(t *testing.T, serve serveFunc) {
		addr := serve(t, router.NewMemory(0))
		ctx := context.Background()
		a := goredis.NewClient(&goredis.Options{Addr: addr, PoolSize: 1, Protocol: 2})
		defer a.Close()
		b := goredis.NewClient(&goredis.Options{Addr: addr, PoolSize: 1, Protocol: 3})
		defer b.Close()
		if err := a.Do(ctx, "CLIENT", "SETNAME", "alpha").Err(); err != nil {
			t.Fatal(err)
		}
		idA, _ := a.Do(ctx, "CLIENT", "ID").Int64()
		idB, err := b.Do(ctx, "CLIENT", "ID").Int64()
		if err != nil {
			t.Fatal(err)
		}
		b.Do(ctx, "THROTTLE", "k", 5, 1, "1s")

		list, err := a.Do(ctx, "CLIENT", "LIST").Text()
		if err != nil {
			t.Fatal(err)
		}
		la, lb := lineOf(list, idA), lineOf(list, idB)
		for _, want := range []string{"name=alpha", "flags=N", "cmd=client|list ", "resp=2", "user=default", "db=0", "addr=127.0.0.1:"} {
			if !strings.Contains(la, want) {
				t.Errorf("A's line %q lacks %q", la, want)
			}
		}
		for _, want := range []string{"name= ", "cmd=throttle", "resp=3", "lib-name=go-redis"} {
			if !strings.Contains(lb, want) {
				t.Errorf("B's line %q lacks %q", lb, want)
			}
		}
		if info, err := b.Do(ctx, "CLIENT", "INFO").Text(); err != nil || !strings.HasPrefix(info, "id="+strconv.FormatInt(idB, 10)+" ") || !strings.Contains(info, " cmd=client|info ") {
			t.Errorf("B's CLIENT INFO: %q, %v", info, err)
		}

		// ID and TYPE filter.
		only, err := a.Do(ctx, "CLIENT", "LIST", "ID", idB, 99999).Text()
		if err != nil || strings.Count(only, "\n") != 1 || lineOf(only, idB) == "" {
			t.Errorf("CLIENT LIST ID %d: %q, %v", idB, only, err)
		}
		if pubsub, err := a.Do(ctx, "CLIENT", "LIST", "TYPE", "pubsub").Text(); err != nil || pubsub != "" {
			t.Errorf("CLIENT LIST TYPE pubsub: %q, %v, want none", pubsub, err)
		}
		if normal, err := a.Do(ctx, "CLIENT", "LIST", "TYPE", "normal").Text(); err != nil || lineOf(normal, idA) == "" || lineOf(normal, idB) == "" {
			t.Errorf("CLIENT LIST TYPE normal: %q, %v", normal, err)
		}
		// An ID no client has, 0 and negative ones included, matches none,
		// as in Redis 7.0: only one that is not a number is refused.
		for _, id := range []string{"0", "-1"} {
			if none, err := a.Do(ctx, "CLIENT", "LIST", "ID", id).Text(); err != nil || none != "" {
				t.Errorf("CLIENT LIST ID %s: %q, %v, want none", id, none, err)
			}
		}
		for _, bad := range [][]any{{"CLIENT", "LIST", "TYPE", "robot"}, {"CLIENT", "LIST", "ID", "x"}, {"CLIENT", "LIST", "NOPE"}} {
			if err := a.Do(ctx, bad...).Err(); err == nil || !strings.HasPrefix(err.Error(), "ERR ") {
				t.Errorf("%v: %v, want an ERR", bad, err)
			}
		}

		// A client that leaves is no longer listed.
		b.Close()
		waitUntil(t, "B gone from CLIENT LIST", func() bool {
			list, err := a.Do(ctx, "CLIENT", "LIST").Text()
			return err == nil && lineOf(list, idB) == "" && lineOf(list, idA) != ""
		})
	})
}

// TestClientListNamesSubcommands: cmd= names a container's subcommand as
// Redis 7.0.15 does: "client|info", the container alone when it is given
// none, NULL for a subcommand Redis does not know.
func TestClientListNamesSubcommands(t *testing.T) {
	eachIO(t, func(t *testing.T, serve serveFunc) {
		addr := serve(t, router.NewMemory(0))
		ctx := context.Background()
		a := goredis.NewClient(&goredis.Options{Addr: addr, PoolSize: 1, Protocol: 2})
		defer a.Close()
		b := goredis.NewClient(&goredis.Options{Addr: addr, PoolSize: 1, Protocol: 2})
		defer b.Close()
		idB, err := b.Do(ctx, "CLIENT", "ID").Int64()
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range []struct {
			args []any
			cmd  string
		}{
			{[]any{"CLIENT", "ID"}, "client|id"},
			{[]any{"client", "GetName"}, "client|getname"},
			{[]any{"CLIENT", "SETNAME", "a", "b"}, "client|setname"}, // wrong arity: still named
			{[]any{"CLIENT", "KILL", "ID", "1"}, "client|kill"},      // Redis's, refused by sluice
			{[]any{"CLIENT", "FOO"}, "NULL"},
			{[]any{"CLIENT"}, "client"},
			{[]any{"COMMAND", "COUNT"}, "command|count"},
			{[]any{"COMMAND"}, "command"},
			{[]any{"ACL", "WHOAMI"}, "acl|whoami"},
			{[]any{"CLUSTER", "INFO"}, "cluster|info"},
			{[]any{"CLUSTER", "COUNT-FAILURE-REPORTS", "x"}, "cluster|count-failure-reports"},
			{[]any{"THROTTLE", "k", 5, 1, "1s"}, "throttle"},
			{[]any{"NOSUCHCOMMAND", "x"}, "NULL"},
		} {
			b.Do(ctx, c.args...)
			list, err := a.Do(ctx, "CLIENT", "LIST", "ID", idB).Text()
			if line := lineOf(list, idB); err != nil || !strings.Contains(line, " cmd="+c.cmd+" ") {
				t.Errorf("after %v: %q, %v, want cmd=%s", c.args, line, err, c.cmd)
			}
		}
	})
}

func TestClientReply(t *testing.T) {
	eachIO(t, func(t *testing.T, serve serveFunc) {
		conn, r := raw(t, serve(t, router.NewMemory(0)))
		// OFF: nothing is answered, a decision included, until ON; SKIP:
		// the next command is not answered. The unanswered THROTTLE still
		// took its token: the last one is limited.
		io.WriteString(conn, "CLIENT REPLY OFF\r\nPING\r\nTHROTTLE r 1 1 1h\r\nNOSUCH\r\nCLIENT REPLY ON\r\n"+
			"CLIENT REPLY SKIP\r\nECHO a\r\nECHO b\r\nCLIENT REPLY SKIP\r\nCLIENT REPLY ON\r\nCLIENT NO-EVICT on\r\nTHROTTLE r 1 1 1h\r\nCLIENT REPLY sideways\r\n")
		want := "+OK\r\n$1\r\nb\r\n+OK\r\n+OK\r\n*5\r\n:1\r\n:1\r\n:0\r\n"
		got := make([]byte, len(want))
		if _, err := io.ReadFull(r, got); err != nil || string(got) != want {
			t.Fatalf("got %q, %v, want %q", got, err, want)
		}
		// The rest of the limited reply, then the syntax error.
		for range 2 {
			if _, err := r.ReadString('\n'); err != nil {
				t.Fatal(err)
			}
		}
		if line, err := r.ReadString('\n'); err != nil || line != "-ERR syntax error\r\n" {
			t.Fatalf("CLIENT REPLY sideways: %q, %v", line, err)
		}
	})
}

// TestClientInfoIdleIsSinceTheLastCommand: idle counts from the command
// just run, on a loop whose clients ran only sluice's own commands for a
// while (no round submitted since).
func TestClientInfoIdleIsSinceTheLastCommand(t *testing.T) {
	eachIOConfig(t, proxy.Config{}, func(t *testing.T, cfg proxy.Config) {
		if cfg.Loops == 0 {
			cfg.Loops = 1
		}
		cfg.Decider = router.NewMemory(0)
		ctx := context.Background()
		c := goredis.NewClient(&goredis.Options{Addr: serveConfig(t, cfg), PoolSize: 1, Protocol: 2})
		defer c.Close()
		if err := c.Do(ctx, "PING").Err(); err != nil {
			t.Fatal(err)
		}
		// Time must pass, there is nothing to poll: idle is in whole
		// seconds, and the round's start the bug kept shows only once
		// more than one has gone by since the PING.
		time.Sleep(1100 * time.Millisecond)
		info, err := c.Do(ctx, "CLIENT", "INFO").Text()
		if err != nil || !strings.Contains(info, " idle=0 ") {
			t.Errorf("CLIENT INFO right after a command: %q, %v, want idle=0", info, err)
		}
	})
}

// helpLines are the lines of a HELP reply (an array of simple strings,
// in RESP2 and RESP3 alike), or nil for anything else.
func helpLines(reply string) []string {
	head, rest, ok := strings.Cut(reply, "\r\n")
	if !ok || !strings.HasPrefix(head, "*") {
		return nil
	}
	lines := strings.Split(strings.TrimSuffix(rest, "\r\n"), "\r\n")
	if strconv.Itoa(len(lines)) != head[1:] {
		return nil
	}
	for i, l := range lines {
		if !strings.HasPrefix(l, "+") {
			return nil
		}
		lines[i] = l[1:]
	}
	return lines
}

// CLIENT HELP lists, in Redis's words, the subcommands sluice answers;
// those of Redis's that sluice does not answer are refused by name, not
// called unknown (which sent the client to a CLIENT HELP that was itself
// unknown).
func TestClientHelpAndRefusedSubcommands(t *testing.T) {
	c := clustertest.New(t, clustertest.Config{Primaries: 1, Replicas: -1})
	node := dialRaw(t, c.Nodes[0].Addr)
	redisHelp := helpLines(node.do("CLIENT", "HELP"))
	if len(redisHelp) < 10 {
		t.Fatalf("the node's CLIENT HELP: %q", redisHelp)
	}
	// Redis 7.2's words for SETINFO, which 7.0 lacks.
	setinfo := []string{"SETINFO <option> <value>", "    Set client meta attr. Options are:",
		"    * LIB-NAME: the client lib name.", "    * LIB-VER: the client lib version."}
	wrongArity := node.do("CLIENT", "HELP", "x")
	eachIO(t, func(t *testing.T, serve serveFunc) {
		conn := dialRaw(t, serve(t, router.NewMemory(0)))
		for _, hello := range []string{"2", "3"} {
			conn.do("HELLO", hello)
			help := helpLines(conn.do("CLIENT", "help"))
			if len(help) < 2 {
				t.Errorf("RESP%s: CLIENT HELP: %q", hello, help)
			}
			for _, line := range help[:max(len(help)-1, 0)] {
				if !slices.Contains(redisHelp, line) && !slices.Contains(setinfo, line) {
					t.Errorf("RESP%s: CLIENT HELP line %q is not Redis's", hello, line)
				}
			}
			for _, sub := range []string{"GETNAME", "ID", "INFO", "KILL <ip:port>", "LIST [options ...]", "NO-EVICT (ON|OFF)", "REPLY (ON|OFF|SKIP)", "SETNAME <name>", "SETINFO <option> <value>", "HELP"} {
				if !slices.Contains(help, sub) {
					t.Errorf("RESP%s: CLIENT HELP lacks %q: %q", hello, sub, help)
				}
			}
			if got := conn.do("CLIENT", "HELP", "x"); got != wrongArity {
				t.Errorf("RESP%s: CLIENT HELP x: %q, Redis %q", hello, got, wrongArity)
			}
			// Tracking is off, and nothing is paused: asked, turned off,
			// or unpaused, the answers are the node's for a connection
			// without tracking.
			node := dialRaw(t, c.Nodes[0].Addr)
			if hello == "3" {
				node.do("HELLO", "3")
			}
			for _, cmd := range [][]string{{"GETREDIR"}, {"TRACKINGINFO"}, {"TRACKING", "off"}, {"TRACKING", "off", "BCAST"},
				{"CACHING", "yes"}, {"UNPAUSE"}, {"KILL", "ID", "99999"}, {"UNBLOCK", "99999"}} {
				args := append([]string{"CLIENT"}, cmd...)
				if got, want := conn.do(args...), node.do(args...); got != want {
					t.Errorf("RESP%s: %q: %q, the node %q", hello, args, got, want)
				}
			}
			for _, cmd := range [][]string{{"PAUSE", "10"}} {
				sub := cmd[0]
				if !slices.ContainsFunc(redisHelp, func(l string) bool { return strings.HasPrefix(l, sub+" ") || l == sub }) {
					t.Fatalf("the node's CLIENT HELP does not list %s", sub)
				}
				if got := conn.do(append([]string{"CLIENT", strings.ToLower(sub)}, cmd[1:]...)...); !strings.HasPrefix(got, "-ERR sluice does not support CLIENT "+sub) {
					t.Errorf("RESP%s: CLIENT %q: %q, want it refused by name", hello, cmd, got)
				}
			}
		}
	})
}

// CLIENT LIST's P flag and TYPE pubsub follow the client's subscriptions,
// as Redis 7.0.15's do, in RESP2 and RESP3: once the last one is dropped
// the client is a normal one again (it stayed flags=P, listed as pubsub,
// for as long as it kept its tunnel).
func TestClientListPubsubFollowsSubscriptions(t *testing.T) {
	c := clustertest.New(t, clustertest.Config{Replicas: -1})
	r := newForwarding(t, c)
	eachIOConfig(t, proxy.Config{Decider: r, Forwarder: r, Backend: "cluster"}, func(t *testing.T, cfg proxy.Config) {
		addr := serveConfig(t, cfg)
		other := dialRaw(t, addr)
		for _, proto := range []string{"2", "3"} {
			sub := dialRaw(t, addr)
			sub.do("HELLO", proto)
			id := strings.TrimSuffix(strings.TrimPrefix(sub.do("CLIENT", "ID"), ":"), "\r\n")
			check := func(when, flags string, listed bool) {
				t.Helper()
				list := other.do("CLIENT", "LIST", "ID", id)
				if !strings.Contains(list, " flags="+flags+" ") {
					t.Errorf("RESP%s %s: %q, want flags=%s", proto, when, list, flags)
				}
				pubsub := other.do("CLIENT", "LIST", "TYPE", "pubsub")
				if strings.Contains(pubsub, "id="+id+" ") != listed {
					t.Errorf("RESP%s %s: TYPE pubsub %q, want it listed %v", proto, when, pubsub, listed)
				}
			}
			sub.do("SUBSCRIBE", "pf:a", "pf:b")
			sub.read() // the second confirmation
			check("subscribed", "P", true)
			sub.do("UNSUBSCRIBE", "pf:a")
			check("with one subscription left", "P", true)
			sub.do("UNSUBSCRIBE", "pf:b")
			check("unsubscribed", "N", false)
			sub.do("PSUBSCRIBE", "pf:*")
			check("psubscribed", "P", true)
			if proto == "3" {
				// Subscribed and in a transaction: Redis writes P first.
				sub.do("MULTI")
				check("in MULTI", "Px", true)
				sub.do("DISCARD")
			}
			sub.do("PUNSUBSCRIBE")
			check("punsubscribed", "N", false)
		}
	})
}

// In RESP2's subscribed mode, CLIENT LIST's cmd= names the command last
// read, as a node's does: a subscription command sent through the tunnel,
// and one refused in that mode (cmd= stayed "subscribe").
func TestClientListCmdInSubscribedMode(t *testing.T) {
	c := clustertest.New(t, clustertest.Config{Replicas: -1})
	r := newForwarding(t, c)
	steps := []struct {
		args []string
		cmd  string
	}{
		{[]string{"SUBSCRIBE", "sc:a"}, "subscribe"},
		{[]string{"PSUBSCRIBE", "sc:*"}, "psubscribe"},
		{[]string{"GET", "sc:k"}, "get"}, // refused in subscribed mode
		{[]string{"NOSUCH"}, "NULL"},
		{[]string{"GET"}, "get"}, // its arity refused first
		{[]string{"PING"}, "ping"},
		{[]string{"PUNSUBSCRIBE", "sc:*"}, "punsubscribe"},
	}
	run := func(t *testing.T, addr string) {
		other := dialRaw(t, addr)
		sub := dialRaw(t, addr)
		id := strings.TrimSuffix(strings.TrimPrefix(sub.do("CLIENT", "ID"), ":"), "\r\n")
		for _, st := range steps {
			sub.do(st.args...)
			list := other.do("CLIENT", "LIST", "ID", id)
			if !strings.Contains(list, " cmd="+st.cmd+" ") {
				t.Errorf("after %q: %q, want cmd=%s", st.args, list, st.cmd)
			}
		}
	}
	t.Run("node", func(t *testing.T) { run(t, c.Nodes[0].Addr) })
	eachIOConfig(t, proxy.Config{Decider: r, Forwarder: r, Backend: "cluster"}, func(t *testing.T, cfg proxy.Config) {
		run(t, serveConfig(t, cfg))
	})
}

// CLIENT LIST's cmd= names a command of the cluster's whose arity was
// refused, as a node names the command it last looked up, in a
// transaction too.
func TestClientListCmdOfARefusedArity(t *testing.T) {
	c := clustertest.New(t, clustertest.Config{Replicas: -1})
	r := newForwarding(t, c)
	steps := []struct {
		args []string
		cmd  string
	}{
		{[]string{"SET", "ca:{k}", "v"}, "set"},
		{[]string{"GET"}, "get"},
		{[]string{"MULTI"}, "multi"},
		{[]string{"SET"}, "set"},
		{[]string{"DISCARD"}, "discard"},
		{[]string{"EXEC", "x"}, "exec"},
	}
	run := func(t *testing.T, addr string) {
		other, conn := dialRaw(t, addr), dialRaw(t, addr)
		id := strings.TrimSuffix(strings.TrimPrefix(conn.do("CLIENT", "ID"), ":"), "\r\n")
		for _, st := range steps {
			conn.do(st.args...)
			if list := other.do("CLIENT", "LIST", "ID", id); !strings.Contains(list, " cmd="+st.cmd+" ") {
				t.Errorf("after %q: %q, want cmd=%s", st.args, list, st.cmd)
			}
		}
	}
	t.Run("node", func(t *testing.T) { run(t, nodeOf(t, c, "ca:{k}").Addr) })
	eachIOConfig(t, proxy.Config{Decider: r, Forwarder: r, Backend: "cluster"}, func(t *testing.T, cfg proxy.Config) {
		run(t, serveConfig(t, cfg))
	})
}

// fieldsOf is a CLIENT LIST line's fields, name to value, and their names
// in order.
func fieldsOf(line string) (map[string]string, []string) {
	m := map[string]string{}
	var names []string
	for _, f := range strings.Fields(line) {
		k, v, _ := strings.Cut(f, "=")
		m[k] = v
		names = append(names, k)
	}
	return m, names
}

// clientLine is a CLIENT LIST reply's text, a bulk string (RESP2) or
// verbatim one (RESP3).
func clientLine(t *testing.T, r string) string {
	t.Helper()
	head, body, ok := strings.Cut(r, "\r\n")
	if !ok || (head[0] != '$' && head[0] != '=') {
		t.Fatalf("CLIENT LIST: %q", r)
	}
	return strings.TrimPrefix(strings.TrimSuffix(body, "\r\n"), "txt:")
}

// CLIENT LIST's fields are Redis 7.0.15's, in its order, those of its
// own buffers and memory included (client libraries parse them: redis-py's
// client_info() raised KeyError without them), and 7.2's lib-name and
// lib-ver at the end; laddr is the address the client connected to, fd
// its socket's, sub, psub and ssub count its subscriptions, multi its
// queued commands (-1 outside a transaction), redir is -1: as a node's,
// in RESP2 and RESP3.
func TestClientListFieldsAsRedis(t *testing.T) {
	c := clustertest.New(t, clustertest.Config{Replicas: -1})
	r := newForwarding(t, c)
	var nodeNames []string
	run := func(t *testing.T, addr string, node bool) {
		other := dialRaw(t, addr)
		for _, proto := range []string{"2", "3"} {
			sub := dialRaw(t, addr)
			sub.do("HELLO", proto)
			id := strings.TrimSuffix(strings.TrimPrefix(sub.do("CLIENT", "ID"), ":"), "\r\n")
			check := func(when string, want map[string]string) {
				t.Helper()
				m, names := fieldsOf(clientLine(t, other.do("CLIENT", "LIST", "ID", id)))
				if node {
					if nodeNames == nil {
						nodeNames = names
					}
				} else {
					if wantNames := append(slices.Clone(nodeNames), "lib-name", "lib-ver"); !slices.Equal(names, wantNames) {
						t.Errorf("RESP%s %s: fields %q, want %q", proto, when, names, wantNames)
					}
					// The numbers redis-py reads with int(); fd is the
					// socket's, as a node's.
					for _, k := range []string{"fd", "qbuf", "qbuf-free", "argv-mem", "obl", "oll", "omem", "tot-mem"} {
						if n, err := strconv.Atoi(m[k]); err != nil || n < 0 {
							t.Errorf("RESP%s %s: %s=%q, want a number", proto, when, k, m[k])
						}
					}
					if fd, _ := strconv.Atoi(m["fd"]); fd < 3 {
						t.Errorf("RESP%s %s: fd=%s, want its socket's", proto, when, m["fd"])
					}
				}
				if m["laddr"] != addr || m["redir"] != "-1" {
					t.Errorf("RESP%s %s: laddr=%s redir=%s, want laddr=%s redir=-1", proto, when, m["laddr"], m["redir"], addr)
				}
				for k, v := range want {
					if m[k] != v {
						t.Errorf("RESP%s %s: %s=%s, want %s", proto, when, k, m[k], v)
					}
				}
			}
			none := map[string]string{"sub": "0", "psub": "0", "ssub": "0", "multi": "-1", "flags": "N"}
			check("new", none)
			sub.do("SUBSCRIBE", "lf:a", "lf:b")
			sub.read()
			sub.do("PSUBSCRIBE", "lf:*")
			sub.do("SSUBSCRIBE", "{lf}x", "{lf}y")
			sub.read()
			sub.do("SUBSCRIBE", "lf:a") // again: counted once
			check("subscribed", map[string]string{"sub": "2", "psub": "1", "ssub": "2", "multi": "-1", "flags": "P"})
			sub.do("UNSUBSCRIBE", "lf:a")
			sub.do("UNSUBSCRIBE", "lf:zz") // not subscribed
			sub.do("SUNSUBSCRIBE", "{lf}x")
			check("one of each left", map[string]string{"sub": "1", "psub": "1", "ssub": "1", "multi": "-1"})
			sub.do("UNSUBSCRIBE")
			sub.do("PUNSUBSCRIBE")
			sub.do("SUNSUBSCRIBE")
			check("unsubscribed", none)
			sub.do("MULTI")
			check("in MULTI", map[string]string{"multi": "0", "flags": "x"})
			sub.do("SET", "lf:k", "v")
			sub.do("GET", "lf:k")
			check("two queued", map[string]string{"multi": "2", "flags": "x"})
			sub.do("DISCARD")
			check("discarded", none)
			if proto == "3" {
				sub.do("SUBSCRIBE", "lf:a")
				sub.do("RESET")
				none["resp"] = "2" // RESET's
				check("reset", none)
			}
			sub.do("CLIENT", "NO-EVICT", "on")
			check("no-evict", map[string]string{"flags": "e"})
			sub.do("MULTI")
			check("no-evict in MULTI", map[string]string{"flags": "xe"})
			sub.do("DISCARD")
			sub.do("RESET") // which keeps it, in Redis 7.0
			check("no-evict after RESET", map[string]string{"flags": "e"})
			sub.do("CLIENT", "NO-EVICT", "off")
			check("no-evict off", map[string]string{"flags": "N"})
			sub.do("READONLY")
			check("read-only", map[string]string{"flags": "r"})
			sub.do("CLIENT", "NO-EVICT", "on")
			check("read-only, no-evict", map[string]string{"flags": "re"})
			sub.do("CLIENT", "NO-EVICT", "off")
			sub.do("READWRITE")
			check("read-write", map[string]string{"flags": "N"})
			sub.do("READONLY")
			sub.do("RESET")
			check("read-only after RESET", map[string]string{"flags": "N"})
		}
	}
	t.Run("node", func(t *testing.T) { run(t, c.Nodes[0].Addr, true) })
	eachIOConfig(t, proxy.Config{Decider: r, Forwarder: r, Backend: "cluster"}, func(t *testing.T, cfg proxy.Config) {
		run(t, serveConfig(t, cfg), false)
	})
}

// CLIENT LIST's options are read as Redis 7.0.15 reads them: TYPE alone,
// or ID alone, whose clients come in the order given, as often as given;
// an ID is a number as Redis reads one. (sluice took TYPE and ID
// together, sorted and deduplicated the IDs, and took "05", "+5", "-0".)
func TestClientListOptionsAsRedis(t *testing.T) {
	c := clustertest.New(t, clustertest.Config{Replicas: -1})
	r := newForwarding(t, c)
	run := func(t *testing.T, addr string) {
		a, b := dialRaw(t, addr), dialRaw(t, addr)
		idA := strings.TrimSuffix(strings.TrimPrefix(a.do("CLIENT", "ID"), ":"), "\r\n")
		idB := strings.TrimSuffix(strings.TrimPrefix(b.do("CLIENT", "ID"), ":"), "\r\n")
		ids := func(r string) string {
			var out []string
			for _, line := range strings.Split(strings.TrimSuffix(clientLine(t, r), "\n"), "\n") {
				switch {
				case strings.HasPrefix(line, "id="+idA+" "):
					out = append(out, "A")
				case strings.HasPrefix(line, "id="+idB+" "):
					out = append(out, "B")
				case line != "":
					out = append(out, "?")
				}
			}
			return strings.Join(out, ",")
		}
		for _, tc := range []struct {
			args []string
			want string // the clients listed, or the error
		}{
			{[]string{"ID", idB, idA}, "B,A"},
			{[]string{"ID", idA, idA, "99999", idB}, "A,A,B"},
			{[]string{"TYPE", "normal", "ID", idA}, "-ERR syntax error\r\n"},
			{[]string{"ID", idA, "TYPE", "normal"}, "-ERR Invalid client ID\r\n"},
			{[]string{"TYPE", "normal", "TYPE", "pubsub"}, "-ERR syntax error\r\n"},
			{[]string{"TYPE"}, "-ERR syntax error\r\n"},
			{[]string{"ID"}, "-ERR syntax error\r\n"},
			{[]string{"ID", "+" + idA}, "-ERR Invalid client ID\r\n"},
			{[]string{"ID", "0" + idA}, "-ERR Invalid client ID\r\n"},
			{[]string{"ID", "-0"}, "-ERR Invalid client ID\r\n"},
			{[]string{"ID", "0", "-1"}, ""},
		} {
			got := a.do(append([]string{"CLIENT", "LIST"}, tc.args...)...)
			if !strings.HasPrefix(got, "-") {
				got = ids(got)
			}
			if got != tc.want {
				t.Errorf("CLIENT LIST %q: %q, want %q", tc.args, got, tc.want)
			}
		}
	}
	t.Run("node", func(t *testing.T) { run(t, c.Nodes[0].Addr) })
	eachIOConfig(t, proxy.Config{Decider: r, Forwarder: r, Backend: "cluster"}, func(t *testing.T, cfg proxy.Config) {
		run(t, serveConfig(t, cfg))
	})
}
