package proxy_test

import (
	"bufio"
	"crypto/sha1"
	"encoding/hex"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sluice-rl/sluice/proxy"
	"github.com/sluice-rl/sluice/router"
	"github.com/sluice-rl/sluice/router/clustertest"
	"github.com/sluice-rl/sluice/router/reply"
	"github.com/sluice-rl/sluice/router/slot"
)

// failOverUnseen fails over the primary of key's slot with CLUSTER
// FAILOVER on its replica, and waits until every node agrees on the
// promoted one (and the old primary is its replica, in sync); the
// caller's routers, whose slot maps are read only on a sign that they
// moved, still send the shard's commands to the old primary.
func failOverUnseen(t *testing.T, c *clustertest.Cluster, key string) (promoted *clustertest.Node) {
	t.Helper()
	sl := slot.Of(key)
	old := primaryOf(t, c, key)
	for _, n := range c.Nodes {
		role, _ := nodeDo(n, "ROLE")
		if strings.HasPrefix(role, "*5\r\n$5\r\nslave\r\n") && slotOwnerOf(role[len("*5\r\n$5\r\nslave\r\n"):]) == old.Addr {
			promoted = n
		}
	}
	if promoted == nil {
		t.Fatalf("%s has no replica", old.Addr)
	}
	if got, err := nodeDo(promoted, "CLUSTER", "FAILOVER"); got != "+OK\r\n" {
		t.Fatalf("CLUSTER FAILOVER: %q %v", got, err)
	}
	agree := func() error {
		for _, n := range c.Nodes {
			slots, err := nodeDo(n, "CLUSTER", "SLOTS")
			if err != nil {
				return err
			}
			if owner := slotOwnerIn(slots, sl); owner != promoted.Addr {
				return fmt.Errorf("%s sees slot %d on %q", n.Addr, sl, owner)
			}
		}
		info, err := nodeDo(old, "INFO", "replication")
		if err != nil || !strings.Contains(info, "role:slave") || !strings.Contains(info, "master_link_status:up") {
			return fmt.Errorf("%s is not a replica in sync yet: %v", old.Addr, err)
		}
		return nil
	}
	deadline, asked := time.Now().Add(40*time.Second), time.Now()
	for err := agree(); err != nil; err = agree() {
		if info, _ := nodeDo(promoted, "INFO", "replication"); time.Since(asked) > 6*time.Second && strings.Contains(info, "role:slave") {
			// A manual failover gives up after 5 s (its primary's vote
			// refused, at times, right after another): ask again.
			nodeDo(promoted, "CLUSTER", "FAILOVER")
			asked = time.Now()
		}
		if time.Now().After(deadline) {
			for _, n := range []*clustertest.Node{promoted, old} {
				dir, _ := nodeDo(n, "CONFIG", "GET", "dir")
				lines := strings.Split(dir, "\r\n")
				b, _ := os.ReadFile(lines[len(lines)-2] + "/redis.log")
				t.Logf("%s:\n%s", n.Addr, b[max(0, len(b)-3000):])
			}
			t.Fatalf("the failover did not end: %v", err)
		}
		time.Sleep(20 * time.Millisecond) // polling the nodes, not synchronising with sluice
	}
	return promoted
}

// nodeDo sends one command to n on a connection of its own, and returns
// its raw reply.
func nodeDo(n *clustertest.Node, args ...string) (string, error) {
	conn, err := net.DialTimeout("tcp", n.Addr, time.Second)
	if err != nil {
		return "", err
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(2 * time.Second))
	bs := make([][]byte, len(args))
	for i, a := range args {
		bs[i] = []byte(a)
	}
	if _, err := conn.Write(router.AppendCommand(nil, bs)); err != nil {
		return "", err
	}
	b, err := reply.Read(bufio.NewReader(conn), nil)
	return string(b), err
}

// slotOwnerOf reads "$9\r\n127.0.0.1\r\n:7000\r\n..." as an address.
func slotOwnerOf(s string) string {
	parts := strings.SplitN(s, "\r\n", 4)
	if len(parts) < 3 || !strings.HasPrefix(parts[2], ":") {
		return ""
	}
	return net.JoinHostPort(parts[1], parts[2][1:])
}

// slotOwnerIn is the address of sl's primary in a CLUSTER SLOTS reply,
// "" if none.
func slotOwnerIn(slots string, sl int) string {
	// Each range: *N, :lo, :hi, then the primary's *M, $host, host, :port.
	lines := strings.Split(slots, "\r\n")
	for i := 0; i+6 < len(lines); i++ {
		if !strings.HasPrefix(lines[i], "*") || !strings.HasPrefix(lines[i+1], ":") || !strings.HasPrefix(lines[i+2], ":") {
			continue
		}
		lo, err1 := strconv.Atoi(lines[i+1][1:])
		hi, err2 := strconv.Atoi(lines[i+2][1:])
		if err1 != nil || err2 != nil || sl < lo || sl > hi || !strings.HasPrefix(lines[i+3], "*") {
			continue
		}
		return slotOwnerOf(strings.Join(lines[i+4:], "\r\n"))
	}
	return ""
}

// A command fanned out to every primary right after a failover, before
// sluice has read the new slot map (it reads it once a second, or on a
// sign that it moved: here only on such a sign), reaches the promoted
// replica, not only its old primary, now a replica: FLUSHALL answers OK
// and empties the promoted one (the client's later commands, pipelined
// behind it, run after it there), CONFIG SET and SCRIPT FLUSH are set
// and done there, and a script loaded is there for EVALSHA. One failover
// serves every case: each case's sluice has its own router, made before
// it, which learns of it only from its own fan-out.
func TestFanOutRightAfterAFailover(t *testing.T) {
	c := clustertest.New(t, clustertest.Config{})
	const key, seed = "fanoutfail", "{fanoutfail}seed"
	body := "return 'ran ' .. KEYS[1]"
	sum := sha1.Sum([]byte(body))
	sha := hex.EncodeToString(sum[:])
	onNode := func(t *testing.T, n *clustertest.Node, args ...string) string {
		t.Helper()
		return dialRaw(t, n.Addr).do(args...)
	}
	// Known to every node, so that a SCRIPT FLUSH missed shows.
	for _, n := range c.Nodes {
		onNode(t, n, "SCRIPT", "LOAD", body)
		onNode(t, n, "CONFIG", "SET", "maxmemory-samples", "5")
	}
	type path struct {
		name  string
		loops int
	}
	paths := []path{{"loops", 0}, {"goroutines", -1}}
	cases := []struct {
		name string
		run  func(t *testing.T, p path, conn *rawConn, promoted *clustertest.Node)
	}{
		{"FLUSHALL, CONFIG SET and SCRIPT LOAD pipelined", func(t *testing.T, p path, conn *rawConn, promoted *clustertest.Node) {
			if got := onNode(t, promoted, "SET", seed, "before"); got != "+OK\r\n" {
				t.Fatalf("SET on the promoted primary: %q", got)
			}
			samples := strconv.Itoa(6 + len(p.name)%2)        // the paths' differ
			body := "return 'ran ' .. KEYS[1] -- " + t.Name() // loaded nowhere yet
			sum := sha1.Sum([]byte(body))
			sha := hex.EncodeToString(sum[:])
			conn.send([]string{"FLUSHALL"}, []string{"SET", key, "after"}, []string{"GET", key},
				[]string{"CONFIG", "SET", "maxmemory-samples", samples}, []string{"SCRIPT", "LOAD", body})
			for i, want := range []string{"+OK\r\n", "+OK\r\n", "$5\r\nafter\r\n", "+OK\r\n", "$40\r\n" + sha + "\r\n"} {
				if got := conn.read(); got != want {
					t.Errorf("reply %d to FLUSHALL, SET, GET, CONFIG SET, SCRIPT LOAD: %q, want %q", i, got, want)
				}
			}
			if got := onNode(t, promoted, "EXISTS", seed); got != ":0\r\n" {
				t.Errorf("the promoted primary's EXISTS %s after FLUSHALL: %q, want 0", seed, got)
			}
			if got := onNode(t, promoted, "CONFIG", "GET", "maxmemory-samples"); !strings.HasSuffix(got, "$1\r\n"+samples+"\r\n") {
				t.Errorf("the promoted primary's maxmemory-samples after CONFIG SET: %q, want %s", got, samples)
			}
			// Before EVALSHA, which sluice would replay as EVAL, caching it.
			if got := onNode(t, promoted, "SCRIPT", "EXISTS", sha); got != "*1\r\n:1\r\n" {
				t.Errorf("SCRIPT EXISTS on the promoted primary after SCRIPT LOAD: %q, want 1", got)
			}
			want := "$" + strconv.Itoa(len("ran "+key)) + "\r\nran " + key + "\r\n"
			if got := conn.do("EVALSHA", sha, "1", key); got != want {
				t.Errorf("EVALSHA after SCRIPT LOAD: %q, want %q", got, want)
			}
		}},
		{"SCRIPT FLUSH", func(t *testing.T, p path, conn *rawConn, promoted *clustertest.Node) {
			if got := onNode(t, promoted, "SCRIPT", "LOAD", body); got != "$40\r\n"+sha+"\r\n" {
				t.Fatalf("SCRIPT LOAD on the promoted primary: %q", got)
			}
			if got := conn.do("SCRIPT", "FLUSH"); got != "+OK\r\n" {
				t.Errorf("SCRIPT FLUSH: %q", got)
			}
			if got := onNode(t, promoted, "SCRIPT", "EXISTS", sha); got != "*1\r\n:0\r\n" {
				t.Errorf("SCRIPT EXISTS on the promoted primary after SCRIPT FLUSH: %q, want 0", got)
			}
		}},
	}
	type setup struct {
		r    *router.Cluster
		conn *rawConn
	}
	setups := make(map[string]setup)
	for _, tc := range cases {
		for _, p := range paths {
			r := newRouterConfig(t, router.ClusterConfig{Seeds: c.Addrs(), Timeout: time.Second, HotThreshold: -1,
				TopologyInterval: time.Hour})
			waitRouter(t, r)
			conn := dialRaw(t, serveConfig(t, proxy.Config{AllowAdmin: true, Loops: p.loops, Decider: r, Forwarder: r}))
			if got := conn.do("SET", key, "before"); got != "+OK\r\n" {
				t.Fatalf("SET: %q", got)
			}
			setups[tc.name+"/"+p.name] = setup{r, conn}
		}
	}
	promoted := failOverUnseen(t, c, key)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			for _, p := range paths {
				t.Run(p.name, func(t *testing.T) {
					su := setups[tc.name+"/"+p.name]
					for _, s := range su.r.Stats().Cluster.Shards {
						if s.Addr == promoted.Addr {
							t.Fatalf("sluice read the slot map already: the test cannot tell")
						}
					}
					tc.run(t, p, su.conn, promoted)
				})
			}
		})
	}
}
