package proxy_test

import (
	"context"
	"crypto/sha1"
	"encoding/hex"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sluice-rl/sluice/proxy"
	"github.com/sluice-rl/sluice/router"
	"github.com/sluice-rl/sluice/router/clustertest"
	"github.com/sluice-rl/sluice/router/slot"
)

// evalshaThenGet pipelines EVALSHA of incr (INCR of its key) and GET of
// the key through conn, and fails unless GET answers what the EVALSHA
// made the key, as one Redis runs them: in order.
func evalshaThenGet(t *testing.T, conn *rawConn, sha, k, what string) {
	t.Helper()
	conn.send([]string{"EVALSHA", sha, "1", k}, []string{"GET", k})
	ran, got := conn.read(), conn.read()
	n, ok := strings.CutPrefix(ran, ":")
	if !ok {
		t.Fatalf("%s: EVALSHA: %q", what, ran)
	}
	n = strings.TrimSuffix(n, "\r\n")
	if want := "$" + strconv.Itoa(len(n)) + "\r\n" + n + "\r\n"; got != want {
		t.Errorf("%s: GET pipelined behind EVALSHA (which answered %s): %q, want %q: the EVALSHA ran after it", what, n, got, want)
	}
}

const incrScript = "return redis.call('INCR', KEYS[1])"

// A node that lacks a script sluice remembers (restarted, or its cache
// flushed behind sluice's back) gets it on each new connection sluice
// makes to it, before any client's command: an EVALSHA pipelined with a
// GET of its key runs first, as on one Redis, rather than being replayed
// after the GET, on both serving paths.
func TestPassthroughEvalshaOnANewConnectionRunsInOrder(t *testing.T) {
	c := clustertest.New(t, clustertest.Config{Replicas: -1})
	r := newForwarding(t, c)
	ctx := context.Background()
	sum := sha1.Sum([]byte(incrScript))
	sha := hex.EncodeToString(sum[:])
	eachIOConfig(t, proxy.Config{Decider: r, Forwarder: r}, func(t *testing.T, cfg proxy.Config) {
		conn := dialRaw(t, serveConfig(t, cfg))
		if got := conn.do("SCRIPT", "LOAD", incrScript); got != "$40\r\n"+sha+"\r\n" {
			t.Fatalf("SCRIPT LOAD: %q", got)
		}
		k := "evorder:" + strconv.Itoa(cfg.Loops)
		node := primaryOf(t, c, k)
		for round := range 3 {
			if got := conn.do("GET", k); strings.HasPrefix(got, "-") {
				t.Fatalf("GET: %q", got) // connected to the node
			}
			// The node loses its scripts, and sluice's connections.
			if err := node.Do(ctx, "SCRIPT", "FLUSH").Error(); err != nil {
				t.Fatal(err)
			}
			if err := node.Do(ctx, "CLIENT", "KILL", "TYPE", "normal", "SKIPME", "yes").Error(); err != nil {
				t.Fatal(err)
			}
			waitUntil(t, "sluice connects to the node again", func() bool {
				got := conn.do("GET", k)
				if got[0] == '-' && !strings.HasPrefix(got, "-ERR sluice: connection to ") {
					t.Fatalf("GET after the node closed sluice's connections: %q", got)
				}
				return got[0] != '-'
			})
			evalshaThenGet(t, conn, sha, k, "round "+strconv.Itoa(round))
		}
	})
}

// The common case: a replica promoted by a failover never saw the
// scripts loaded on its primary (Redis 7 does not replicate them).
// sluice's connections to it load them first, on both serving paths.
func TestPassthroughEvalshaAfterAFailoverRunsInOrder(t *testing.T) {
	c := clustertest.New(t, clustertest.Config{})
	r := newForwarding(t, c)
	ctx := context.Background()
	conns, shas := map[int]*rawConn{}, map[int]string{}
	for _, loops := range []int{0, -1} {
		conns[loops] = dialRaw(t, serveConfig(t, proxy.Config{Decider: r, Forwarder: r, Loops: loops}))
		// A script of its own for each path: one path's replay would
		// load the other's on the node.
		script := incrScript + " -- " + strconv.Itoa(loops)
		sum := sha1.Sum([]byte(script))
		shas[loops] = hex.EncodeToString(sum[:])
		if got := conns[loops].do("SCRIPT", "LOAD", script); got != "$40\r\n"+shas[loops]+"\r\n" {
			t.Fatalf("SCRIPT LOAD: %q", got)
		}
	}
	k := "{evfailover}k"
	old := primaryOf(t, c, k)
	for _, conn := range conns {
		if got := conn.do("SET", k, "0"); got != "+OK\r\n" {
			t.Fatalf("SET: %q", got)
		}
	}
	var replica *clustertest.Node
	for _, n := range c.Nodes {
		role, err := n.Do(ctx, "ROLE").ToArray()
		if err != nil || len(role) < 3 {
			continue
		}
		kind, _ := role[0].ToString()
		port, _ := role[2].AsInt64()
		if kind == "slave" && strings.HasSuffix(old.Addr, ":"+strconv.FormatInt(port, 10)) {
			replica = n
		}
	}
	if replica == nil {
		t.Fatalf("no replica of %s", old.Addr)
	}
	for _, sha := range shas {
		if got, _ := replica.Do(ctx, "SCRIPT", "EXISTS", sha).ToString(); got == "1" {
			t.Fatal("the replica has the script: the test cannot tell")
		}
	}
	if err := replica.Do(ctx, "CLUSTER", "FAILOVER").Error(); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(15 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		p, err := c.Primary(ctx, slot.Of(k))
		if err == nil && p == replica {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the replica was not promoted")
		}
	}
	waitUntil(t, "sluice routes the key to the promoted replica", func() bool {
		fw := []router.Forward{{Slot: slot.Of(k)}}
		r.Route(fw)
		return fw[0].Addr == replica.Addr
	})
	for _, loops := range []int{0, -1} {
		evalshaThenGet(t, conns[loops], shas[loops], k, "loops "+strconv.Itoa(loops))
	}
}

// With --read-from-replicas an EVALSHA_RO goes to a replica, which never
// saw the scripts loaded on its primary: sluice's connections to it load
// them first too, so the EVALSHA_RO runs there as sent, not replayed
// (EVAL_RO) after the reads behind it, on both serving paths.
func TestPassthroughEvalshaROOnAReplicaIsNotReplayed(t *testing.T) {
	c := clustertest.New(t, clustertest.Config{})
	const k = "{evro}k"
	primary := primaryOf(t, c, k)
	replica := replicasOf(t, c, primary)[0]
	calls := func(cmd string) int { return cmdCalls(replica, cmd) }
	for _, loops := range []int{0, -1} {
		r := newRouterConfig(t, router.ClusterConfig{Seeds: c.Addrs(), ReadFromReplicas: true})
		waitRouter(t, r)
		conn := dialRaw(t, serveConfig(t, proxy.Config{Decider: r, Forwarder: r, Loops: loops}))
		script := "return redis.call('EXISTS', KEYS[1]) -- " + strconv.Itoa(loops)
		sum := sha1.Sum([]byte(script))
		sha := hex.EncodeToString(sum[:])
		if got := conn.do("SCRIPT", "LOAD", script); got != "$40\r\n"+sha+"\r\n" {
			t.Fatalf("SCRIPT LOAD: %q", got)
		}
		// A replica is in the slot map once it has replicated something.
		if got := conn.do("SET", k, "v"); got != "+OK\r\n" {
			t.Fatalf("SET: %q", got)
		}
		before := calls("evalsha_ro")
		waitUntil(t, "an EVALSHA_RO reaches the replica", func() bool {
			if got := conn.do("EVALSHA_RO", sha, "1", k); got != ":0\r\n" && got != ":1\r\n" {
				t.Fatalf("loops %d: EVALSHA_RO: %q", loops, got)
			}
			return calls("evalsha_ro") > before
		})
		if n := calls("eval_ro"); n > 0 {
			t.Errorf("loops %d: the replica ran %d EVAL_RO: sluice's replay of an EVALSHA_RO it answered NOSCRIPT", loops, n)
		}
	}
}
