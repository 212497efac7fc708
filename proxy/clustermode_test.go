package proxy_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	goredis "github.com/redis/go-redis/v9"
	"github.com/redis/rueidis"

	"github.com/sluice-rl/sluice/proxy"
	"github.com/sluice-rl/sluice/router"
	"github.com/sluice-rl/sluice/router/clustertest"
	hashslot "github.com/sluice-rl/sluice/router/slot"
)

// respError is an error reply, told apart from a bulk string.
type respError string

// respStatus is a simple string reply.
type respStatus string

// command sends args on a new connection and reads one reply: int64,
// string (bulk), nil, respStatus, respError or []any.
func command(t *testing.T, addr string, args ...string) any {
	t.Helper()
	conn, r := raw(t, addr)
	if _, err := io.WriteString(conn, encode(args...)); err != nil {
		t.Fatal(err)
	}
	v, err := readReply(r)
	if err != nil {
		t.Fatalf("%v: %v", args, err)
	}
	return v
}

// exact sends args on a new connection and reads a reply of want's length.
func exact(t *testing.T, addr string, want string, args ...string) string {
	t.Helper()
	conn, r := raw(t, addr)
	io.WriteString(conn, encode(args...))
	got := make([]byte, len(want))
	n, err := io.ReadFull(r, got)
	if err != nil {
		t.Errorf("%v: read %q, %v", args, got[:n], err)
	}
	return string(got[:n])
}

func encode(args ...string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "*%d\r\n", len(args))
	for _, a := range args {
		fmt.Fprintf(&b, "$%d\r\n%s\r\n", len(a), a)
	}
	return b.String()
}

func readReply(r *bufio.Reader) (any, error) {
	line, err := r.ReadString('\n')
	if err != nil {
		return nil, err
	}
	if len(line) < 3 || !strings.HasSuffix(line, "\r\n") {
		return nil, fmt.Errorf("bad reply line %q", line)
	}
	body := line[1 : len(line)-2]
	switch line[0] {
	case '+':
		return respStatus(body), nil
	case '-':
		return respError(body), nil
	case ':':
		return strconv.ParseInt(body, 10, 64)
	case '$':
		n, err := strconv.Atoi(body)
		if err != nil || n < 0 {
			return nil, err
		}
		b := make([]byte, n+2)
		if _, err := io.ReadFull(r, b); err != nil {
			return nil, err
		}
		return string(b[:n]), nil
	case '*':
		n, err := strconv.Atoi(body)
		if err != nil || n < 0 {
			return nil, err
		}
		a := make([]any, n)
		for i := range a {
			if a[i], err = readReply(r); err != nil {
				return nil, err
			}
		}
		return a, nil
	}
	return nil, fmt.Errorf("bad reply line %q", line)
}

func TestClusterReplies(t *testing.T) {
	eachIO(t, func(t *testing.T, serve serveFunc) {
		addr := serve(t, router.NewMemory(0))
		host, portText, _ := net.SplitHostPort(addr)
		port, _ := strconv.Atoi(portText)

		id, ok := command(t, addr, "CLUSTER", "MYID").(string)
		if !ok || !regexp.MustCompile(`^[0-9a-f]{40}$`).MatchString(id) {
			t.Fatalf("CLUSTER MYID: got %q, want 40 lowercase hex digits", id)
		}
		if again := command(t, addr, "cluster", "myid"); again != id {
			t.Fatalf("CLUSTER MYID on another connection: got %v, want %s", again, id)
		}

		bulk := func(s string) string { return fmt.Sprintf("$%d\r\n%s\r\n", len(s), s) }
		nodes := fmt.Sprintf("%s %s:%d@0 myself,master - 0 0 1 connected 0-16383\n", id, host, port)
		info := "cluster_state:ok\r\ncluster_slots_assigned:16384\r\ncluster_slots_ok:16384\r\n" +
			"cluster_slots_pfail:0\r\ncluster_slots_fail:0\r\ncluster_known_nodes:1\r\ncluster_size:1\r\n" +
			"cluster_current_epoch:1\r\ncluster_my_epoch:1\r\ncluster_stats_messages_sent:0\r\n" +
			"cluster_stats_messages_received:0\r\ntotal_cluster_links_buffer_limit_exceeded:0\r\n"
		for _, tt := range []struct {
			args []string
			want string
		}{
			{[]string{"CLUSTER", "SLOTS"}, "*1\r\n*3\r\n:0\r\n:16383\r\n*4\r\n" + bulk(host) + fmt.Sprintf(":%d\r\n", port) + bulk(id) + "*0\r\n"},
			{[]string{"CLUSTER", "SHARDS"}, "*1\r\n*4\r\n" + bulk("slots") + "*2\r\n:0\r\n:16383\r\n" + bulk("nodes") + "*1\r\n*14\r\n" +
				bulk("id") + bulk(id) + bulk("port") + fmt.Sprintf(":%d\r\n", port) + bulk("ip") + bulk(host) +
				bulk("endpoint") + bulk(host) + bulk("role") + bulk("master") + bulk("replication-offset") + ":0\r\n" +
				bulk("health") + bulk("online")},
			{[]string{"CLUSTER", "NODES"}, bulk(nodes)},
			{[]string{"CLUSTER", "INFO"}, bulk(info)},
			{[]string{"CLUSTER", "KEYSLOT", "{a}b"}, ":15495\r\n"}, // as Redis 7.0 answers
			{[]string{"CLUSTER", "KEYSLOT", "user:1"}, ":10778\r\n"},
			{[]string{"CLUSTER", "LINKS"}, "*0\r\n"},
			{[]string{"CLUSTER", "REPLICAS", id}, "*0\r\n"},
			{[]string{"CLUSTER", "SLAVES", id}, "*0\r\n"},
			{[]string{"CLUSTER", "COUNT-FAILURE-REPORTS", id}, ":0\r\n"},
			{[]string{"CLUSTER", "REPLICAS", "abc"}, "-ERR Unknown node abc\r\n"},
			{[]string{"CLUSTER", "COUNT-FAILURE-REPORTS", "x"}, "-ERR Unknown node x\r\n"},
			{[]string{"CLUSTER", "MYSHARDID"}, "-ERR unknown subcommand 'MYSHARDID'. Try CLUSTER HELP.\r\n"},
			{[]string{"cluster", "fOO"}, "-ERR unknown subcommand 'fOO'. Try CLUSTER HELP.\r\n"},
			{[]string{"CLUSTER", "slots", "x"}, "-ERR wrong number of arguments for 'cluster|slots' command\r\n"},
			{[]string{"CLUSTER", "KEYSLOT"}, "-ERR wrong number of arguments for 'cluster|keyslot' command\r\n"},
			{[]string{"CLUSTER", "meet", "10.0.0.1", "7000"}, "-ERR sluice: CLUSTER MEET is cluster administration; run it on the cluster's nodes\r\n"},
			{[]string{"CLUSTER", "ADDSLOTS", "1"}, "-ERR sluice: CLUSTER ADDSLOTS is cluster administration; run it on the cluster's nodes\r\n"},
			{[]string{"CLUSTER", "FAILOVER"}, "-ERR sluice: CLUSTER FAILOVER is cluster administration; run it on the cluster's nodes\r\n"},
			{[]string{"CLUSTER", "RESET", "HARD"}, "-ERR sluice: CLUSTER RESET is cluster administration; run it on the cluster's nodes\r\n"},
			{[]string{"CLUSTER", "COUNTKEYSINSLOT", "1"}, "-ERR sluice: CLUSTER COUNTKEYSINSLOT reads a slot of a cluster's node, and the embedded backend has none\r\n"},
			{[]string{"CLUSTER", "GETKEYSINSLOT", "1", "10"}, "-ERR sluice: CLUSTER GETKEYSINSLOT reads a slot of a cluster's node, and the embedded backend has none\r\n"},
			{[]string{"READONLY"}, "+OK\r\n"},
			{[]string{"READWRITE"}, "+OK\r\n"},
			{[]string{"ASKING"}, "+OK\r\n"},
			{[]string{"READONLY", "x"}, "-ERR wrong number of arguments for 'readonly' command\r\n"},
		} {
			if got := exact(t, addr, tt.want, tt.args...); got != tt.want {
				t.Errorf("%v:\n got %q\nwant %q", tt.args, got, tt.want)
			}
		}
		help, ok := command(t, addr, "CLUSTER", "HELP").([]any)
		if !ok || len(help) < 10 || !strings.HasPrefix(string(help[0].(respStatus)), "CLUSTER <subcommand>") {
			t.Errorf("CLUSTER HELP: got %v", help)
		}
	})
}

// serveOn serves cfg on ln, for listeners serveConfig does not make.
func serveOn(t testing.TB, ln net.Listener, cfg proxy.Config) *proxy.Server {
	srv := proxy.New(cfg)
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	t.Cleanup(func() {
		srv.Close()
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	return srv
}

// The node's address is the announced one, else the served one, with an
// unspecified listen IP given as IPv4 loopback.
func TestClusterAnnouncedAddress(t *testing.T) {
	for _, tt := range []struct {
		name, network, listen, announce string
		host                            string
		port                            int // 0: the served port
		hostname                        bool
	}{
		{name: "served", network: "tcp4", listen: "127.0.0.1:0", host: "127.0.0.1"},
		{name: "every IPv4 address", network: "tcp4", listen: "0.0.0.0:0", host: "127.0.0.1"},
		{name: "every address", network: "tcp", listen: ":0", host: "127.0.0.1"},
		{name: "announced IP", network: "tcp4", listen: "127.0.0.1:0", announce: "10.1.2.3:7777", host: "10.1.2.3", port: 7777},
		{name: "announced IPv6", network: "tcp4", listen: "127.0.0.1:0", announce: "[fd00::1]:7777", host: "fd00::1", port: 7777},
		{name: "announced name", network: "tcp4", listen: "127.0.0.1:0", announce: "sluice.example:6380", host: "sluice.example", port: 6380, hostname: true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			ln, err := net.Listen(tt.network, tt.listen)
			if err != nil {
				t.Skipf("cannot listen on %s: %v", tt.listen, err)
			}
			serveOn(t, ln, proxy.Config{Decider: router.NewMemory(0), Announce: tt.announce})
			_, served, _ := net.SplitHostPort(ln.Addr().String())
			addr := net.JoinHostPort("127.0.0.1", served)
			port := tt.port
			if port == 0 {
				port, _ = strconv.Atoi(served)
			}

			id := command(t, addr, "CLUSTER", "MYID").(string)
			slots := command(t, addr, "CLUSTER", "SLOTS")
			if want := []any{[]any{int64(0), int64(16383), []any{tt.host, int64(port), id, []any{}}}}; fmt.Sprint(slots) != fmt.Sprint(want) {
				t.Errorf("CLUSTER SLOTS: got %v, want %v", slots, want)
			}
			node := command(t, addr, "CLUSTER", "SHARDS").([]any)[0].([]any)[3].([]any)[0].([]any)
			want := []any{"id", id, "port", int64(port), "ip", tt.host, "endpoint", tt.host}
			if tt.hostname {
				want = append(want, "hostname", tt.host)
			}
			want = append(want, "role", "master", "replication-offset", int64(0), "health", "online")
			if fmt.Sprint(node) != fmt.Sprint(want) {
				t.Errorf("CLUSTER SHARDS node: got %v, want %v", node, want)
			}
			line := fmt.Sprintf("%s %s:%d@0", id, tt.host, port)
			if tt.hostname {
				line += "," + tt.host
			}
			if got := command(t, addr, "CLUSTER", "NODES"); got != line+" myself,master - 0 0 1 connected 0-16383\n" {
				t.Errorf("CLUSTER NODES: got %q, want it to begin %q", got, line)
			}
		})
	}
}

// Instances behind one load balancer, announcing its address, are one
// node to a cluster client, whichever of them answers its topology query:
// the same ID at the same address, as a Redis node keeps its ID. A client
// that keys nodes by ID (Lettuce) would otherwise see the node replaced at
// each refresh that reaches another instance.
func TestClusterAnnouncedNodeIsOneNodeAcrossInstances(t *testing.T) {
	var addrs []string
	for range 2 {
		addrs = append(addrs, serveConfig(t, proxy.Config{Decider: router.NewMemory(0), Announce: "lb.example:6380"}))
	}
	for _, cmd := range [][]string{{"CLUSTER", "MYID"}, {"CLUSTER", "SLOTS"}, {"CLUSTER", "SHARDS"}, {"CLUSTER", "NODES"}} {
		if a, b := fmt.Sprint(command(t, addrs[0], cmd...)), fmt.Sprint(command(t, addrs[1], cmd...)); a != b {
			t.Errorf("%s: %s through one instance, %s through the other", cmd, a, b)
		}
	}
}

func TestClusterBadAnnounce(t *testing.T) {
	addr := serveConfig(t, proxy.Config{Decider: router.NewMemory(0), Announce: "sluice"})
	want := respError(`ERR sluice: the announced address "sluice" is not host:port`)
	if got := command(t, addr, "CLUSTER", "SLOTS"); got != want {
		t.Errorf("got %v, want %v", got, want)
	}
}

// shape is v's RESP types, with Redis's map keys spelled out and other
// values reduced to their type: replies from different nodes then compare
// equal exactly when they nest alike.
func shape(v any) string {
	switch v := v.(type) {
	case int64:
		return ":"
	case string:
		switch v {
		case "slots", "nodes", "id", "port", "tls-port", "ip", "endpoint", "hostname", "role", "replication-offset", "health":
			return v
		}
		return "$"
	case respStatus:
		return "+"
	case respError:
		return "-"
	case []any:
		parts := make([]string, len(v))
		for i, e := range v {
			parts[i] = shape(e)
		}
		return "[" + strings.Join(parts, " ") + "]"
	}
	return "null"
}

// infoFields are CLUSTER INFO's field names, each with ":" when its value
// is an integer and "$" when not.
func infoFields(t *testing.T, v any) []string {
	t.Helper()
	text, ok := v.(string)
	if !ok || !strings.HasSuffix(text, "\r\n") {
		t.Fatalf("CLUSTER INFO: got %q, want \\r\\n-ended lines in a bulk string", v)
	}
	var fields []string
	for _, line := range strings.Split(strings.TrimSuffix(text, "\r\n"), "\r\n") {
		name, value, ok := strings.Cut(line, ":")
		if !ok {
			t.Fatalf("CLUSTER INFO line %q is not name:value", line)
		}
		// A Redis node counts bus messages per type; a lone node sends none.
		if strings.HasPrefix(name, "cluster_stats_messages_") && strings.Count(name, "_") > 3 {
			continue
		}
		if _, err := strconv.ParseInt(value, 10, 64); err == nil {
			name += ":"
		} else {
			name += "$"
		}
		fields = append(fields, name)
	}
	return fields
}

// sluice's replies nest as a real Redis 7 cluster node's do.
func TestClusterRepliesMatchRedis(t *testing.T) {
	c := clustertest.New(t, clustertest.Config{Replicas: -1})
	node := c.Nodes[0].Addr
	addr := serve(t, router.NewMemory(0))

	redisSlots := command(t, node, "CLUSTER", "SLOTS").([]any)
	sluiceSlots := command(t, addr, "CLUSTER", "SLOTS").([]any)
	if got, want := shape(sluiceSlots[0]), shape(redisSlots[0]); got != want {
		t.Errorf("CLUSTER SLOTS range: got %s, Redis %s", got, want)
	}
	// In RESP3 a node's other endpoints are a map, empty here.
	redis3, sluice3 := dialRaw(t, node), dialRaw(t, addr)
	redis3.do("HELLO", "3")
	sluice3.do("HELLO", "3")
	if got, want := sluice3.do("CLUSTER", "SLOTS"), redis3.do("CLUSTER", "SLOTS"); !strings.HasSuffix(got, "\r\n%0\r\n") || !strings.Contains(want, "\r\n%0\r\n") {
		t.Errorf("CLUSTER SLOTS in RESP3: got %q, Redis %q", got, want)
	}
	redisShards := command(t, node, "CLUSTER", "SHARDS").([]any)
	sluiceShards := command(t, addr, "CLUSTER", "SHARDS").([]any)
	if got, want := shape(sluiceShards[0]), shape(redisShards[0]); got != want {
		t.Errorf("CLUSTER SHARDS shard:\n got %s\nRedis %s", got, want)
	}
	if got, want := infoFields(t, command(t, addr, "CLUSTER", "INFO")), infoFields(t, command(t, node, "CLUSTER", "INFO")); !slices.Equal(got, want) {
		t.Errorf("CLUSTER INFO fields:\n got %v\nRedis %v", got, want)
	}
	if got, want := command(t, addr, "CLUSTER", "INFO").(string), command(t, node, "CLUSTER", "INFO").(string); !strings.HasPrefix(want, "cluster_state:ok\r\n") || !strings.HasPrefix(got, "cluster_state:ok\r\n") {
		t.Errorf("CLUSTER INFO: got %q, Redis %q", got, want)
	}

	// A NODES line: id, ip:port@bus, flags, primary, ping and pong times,
	// config epoch, link state, slots.
	line := regexp.MustCompile(`^[0-9a-f]{40} [^ ]+:\d+@\d+ myself,master - \d+ \d+ \d+ connected \d+-\d+\n$`)
	redisNodes := strings.SplitAfter(command(t, node, "CLUSTER", "NODES").(string), "\n")
	mine := slices.IndexFunc(redisNodes, func(l string) bool { return strings.Contains(l, "myself") })
	if mine < 0 || !line.MatchString(redisNodes[mine]) {
		t.Fatalf("the pattern does not fit Redis's own CLUSTER NODES line: %q", redisNodes)
	}
	if got := command(t, addr, "CLUSTER", "NODES").(string); !line.MatchString(got) {
		t.Errorf("CLUSTER NODES: got %q, Redis's own line %q", got, redisNodes[mine])
	}
	// A call Redis refuses for its arguments gets Redis's error, though
	// sluice refuses the subcommand anyway: the caller learns what it got
	// wrong.
	for _, args := range [][]string{
		{"CLUSTER", "COUNTKEYSINSLOT"},
		{"CLUSTER", "COUNTKEYSINSLOT", "x"},
		{"CLUSTER", "COUNTKEYSINSLOT", "01"},
		{"CLUSTER", "COUNTKEYSINSLOT", "-1"},
		{"CLUSTER", "COUNTKEYSINSLOT", "16384"},
		{"CLUSTER", "COUNTKEYSINSLOT", "1", "2"},
		{"CLUSTER", "GETKEYSINSLOT", "1"},
		{"CLUSTER", "GETKEYSINSLOT", "x", "1"},
		{"CLUSTER", "GETKEYSINSLOT", "16384", "x"},
		{"CLUSTER", "GETKEYSINSLOT", "16384", "1"},
		{"CLUSTER", "GETKEYSINSLOT", "1", "-1"},
		{"CLUSTER", "MEET", "127.0.0.1"},
		{"CLUSTER", "SETSLOT", "1"},
		{"CLUSTER", "ADDSLOTS"},
		{"CLUSTER", "FLUSHSLOTS", "x"},
		{"CLUSTER", "FORGET"},
		// Checked by Redis as it runs them, before it changes anything.
		{"CLUSTER", "ADDSLOTSRANGE", "1", "2", "3"},
		{"CLUSTER", "delslotsrange", "1", "2", "3", "4", "5"},
		{"CLUSTER", "MEET", "127.0.0.1", "1", "2", "3"},
		{"cluster", "failover", "force", "x"},
		{"CLUSTER", "Reset", "hard", "x"},
		// Redis quotes 128 bytes of an unknown subcommand, a node's name
		// whole.
		{"CLUSTER", strings.Repeat("y", 200)},
		{"CLUSTER", strings.Repeat("é", 100)},
		{"CLUSTER", "REPLICAS", strings.Repeat("x", 200)},
		{"CLUSTER", "COUNT-FAILURE-REPORTS", strings.Repeat("x", 200)},
	} {
		if got, want := command(t, addr, args...), command(t, node, args...); got != want {
			t.Errorf("%v: got %v, Redis %v", args, got, want)
		}
	}
	for _, cmd := range []string{"MYID", "KEYSLOT", "READONLY", "READWRITE", "ASKING"} {
		args := []string{"CLUSTER", cmd}
		switch cmd {
		case "KEYSLOT":
			args = append(args, "user:{42}")
		case "READONLY", "READWRITE", "ASKING":
			args = args[1:]
		}
		if got, want := command(t, addr, args...), command(t, node, args...); shape(got) != shape(want) || (cmd != "MYID" && got != want) {
			t.Errorf("%v: got %v, Redis %v", args, got, want)
		}
	}
}

// Cluster-mode clients given sluice's address find a cluster of one node
// and send it their commands.
func TestClusterClients(t *testing.T) {
	addr := serve(t, router.NewMemory(0))
	ctx := context.Background()

	t.Run("rueidis", func(t *testing.T) {
		c, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{addr}, DisableCache: true})
		if err != nil {
			t.Fatalf("rueidis cannot connect: %v", err)
		}
		defer c.Close()
		if c.Mode() != rueidis.ClientModeCluster {
			t.Fatalf("rueidis mode: got %v, want cluster", c.Mode())
		}
		if _, ok := c.Nodes()[addr]; !ok || len(c.Nodes()) != 1 {
			t.Fatalf("rueidis nodes: got %v, want only %s", c.Nodes(), addr)
		}
		got, err := c.Do(ctx, c.B().Arbitrary("THROTTLE").Keys("k").Args("10", "1", "1s").Build()).AsIntSlice()
		if err != nil || !eq(got, []int64{0, 10, 9, -1, 1000}) {
			t.Fatalf("THROTTLE: got %v, %v", got, err)
		}
	})

	t.Run("go-redis", func(t *testing.T) {
		c := goredis.NewClusterClient(&goredis.ClusterOptions{Addrs: []string{addr}, MaxRedirects: -1})
		defer c.Close()
		var seen []string
		err := c.ForEachShard(ctx, func(ctx context.Context, shard *goredis.Client) error {
			seen = append(seen, shard.Options().Addr)
			return nil
		})
		if err != nil || !slices.Equal(seen, []string{addr}) {
			t.Fatalf("go-redis shards: got %v, %v, want [%s]", seen, err, addr)
		}
		got, err := c.Do(ctx, "THROTTLE", "g", 10, 1, "1s").Int64Slice()
		if err != nil || !eq(got, []int64{0, 10, 9, -1, 1000}) {
			t.Fatalf("THROTTLE: got %v, %v", got, err)
		}
	})

	t.Run("redis-cli", func(t *testing.T) {
		if _, err := exec.LookPath("redis-cli"); err != nil {
			if os.Getenv("SLUICE_REQUIRE_REDIS") != "" {
				t.Fatal("redis-cli is not on PATH and SLUICE_REQUIRE_REDIS is set")
			}
			t.Skip("redis-cli is not on PATH")
		}
		host, port, _ := net.SplitHostPort(addr)
		id := command(t, addr, "CLUSTER", "MYID").(string)
		out, err := exec.Command("redis-cli", "-c", "-h", host, "-p", port, "--no-raw", "CLUSTER", "SLOTS").CombinedOutput()
		want := fmt.Sprintf("1) 1) (integer) 0\n   2) (integer) 16383\n   3) 1) %q\n      2) (integer) %s\n      3) %q\n      4) (empty array)\n", host, port, id)
		if err != nil || string(out) != want {
			t.Errorf("redis-cli -c CLUSTER SLOTS: got %q, %v, want %q", out, err, want)
		}
		out, err = exec.Command("redis-cli", "-c", "-h", host, "-p", port, "THROTTLE", "cli", "10", "1", "1s").CombinedOutput()
		if err != nil || string(out) != "0\n10\n9\n-1\n1000\n" {
			t.Errorf("redis-cli -c THROTTLE: got %q, %v", out, err)
		}
	})
}

// Errors that quote what the client sent quote as much of it as Redis
// does: the unknown command's name and a subcommand cut at 128 bytes, its
// arguments until they take 128, a HELLO option and a client type whole.
func TestErrorsQuoteAsRedisDoes(t *testing.T) {
	c := clustertest.New(t, clustertest.Config{Replicas: -1})
	node := c.Nodes[0].Addr
	addr := serve(t, router.NewMemory(0))
	long := func(b byte, n int) string { return strings.Repeat(string(b), n) }
	for _, args := range [][]string{
		{long('n', 150), long('a', 100), long('b', 100), "x"},
		{long('n', 10), "a", long('b', 200)},
		{long('n', 10), long('a', 127), "bc"},
		{"CLIENT", long('s', 150)},
		{"COMMAND", long('s', 150)},
		{"HELLO", "3", long('o', 150)},
		{"CLIENT", "LIST", "TYPE", long('t', 150)},
	} {
		want := dialRaw(t, node).do(args...)
		if !strings.HasPrefix(want, "-ERR ") {
			t.Fatalf("%.40q: the node answered %q, want an error", args, want)
		}
		if got := dialRaw(t, addr).do(args...); got != want {
			t.Errorf("%.40q:\n got %q\nRedis %q", args, got, want)
		}
	}
}

// Before a cluster, CLUSTER COUNTKEYSINSLOT and GETKEYSINSLOT read the
// slot on the primary that owns it, which holds all of its keys: a
// cluster-mode client sees the one node of sluice's view own them. Bad
// arguments still get Redis's own error from sluice. Both serving paths.
func TestClusterSlotKeysForwarded(t *testing.T) {
	c := clustertest.New(t, clustertest.Config{Replicas: -1})
	r := newForwarding(t, c)
	slot := strconv.Itoa(hashslot.Of("{slotkeys}"))
	written := 0
	for _, loops := range []int{1, -1} {
		addr := serveConfig(t, proxy.Config{Decider: r, Forwarder: r, Loops: loops})
		rc := dialRaw(t, addr)
		want := map[string]bool{}
		for i := range 3 {
			key := fmt.Sprintf("{slotkeys}%d:%d", loops, i)
			rc.do("SET", key, "v")
			want[key] = true
		}
		written += len(want)
		if got := rc.do("CLUSTER", "COUNTKEYSINSLOT", slot); got != fmt.Sprintf(":%d\r\n", written) {
			t.Errorf("loops %d: COUNTKEYSINSLOT %s: %q, want the %d keys written", loops, slot, got, written)
		}
		keys, ok := command(t, addr, "CLUSTER", "GETKEYSINSLOT", slot, "100").([]any)
		seen := 0
		for _, k := range keys {
			if want[k.(string)] {
				seen++
			}
		}
		if !ok || seen != len(want) {
			t.Errorf("loops %d: GETKEYSINSLOT %s: %v, want %v among them", loops, slot, keys, want)
		}
		if got, want := rc.do("CLUSTER", "GETKEYSINSLOT", "16384", "1"), "-ERR Invalid slot or number of keys\r\n"; got != want {
			t.Errorf("loops %d: GETKEYSINSLOT of no slot: %q, want %q", loops, got, want)
		}
	}
}
