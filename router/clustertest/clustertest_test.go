package clustertest_test

import (
	"context"
	"net"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/sluice-rl/sluice/router/clustertest"
	"github.com/sluice-rl/sluice/router/slot"
)

func TestClusterServesEverySlot(t *testing.T) {
	c := clustertest.New(t, clustertest.Config{})
	if got := len(c.Nodes); got != 6 {
		t.Fatalf("got %d nodes, want 6", got)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	owners := map[string]bool{}
	for _, slot := range []int{0, 5460, 5461, 10922, 10923, 16383} {
		p, err := c.Primary(ctx, slot)
		if err != nil {
			t.Fatal(err)
		}
		owners[p.Addr] = true
	}
	if len(owners) != 3 {
		t.Fatalf("slots are served by %d primaries, want 3", len(owners))
	}

	cl, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: c.Addrs(), DisableCache: true})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	for _, k := range []string{"a", "b", "c", "{x}1", "{x}2"} {
		if err := cl.Do(ctx, cl.B().Set().Key(k).Value(k).Build()).Error(); err != nil {
			t.Fatalf("SET %s: %v", k, err)
		}
	}
	if got, err := cl.Do(ctx, cl.B().Get().Key("b").Build()).ToString(); err != nil || got != "b" {
		t.Fatalf("GET b: got %q, %v", got, err)
	}
}

func TestNodeRestartKeepsIdentity(t *testing.T) {
	c := clustertest.New(t, clustertest.Config{Primaries: 3, Replicas: -1})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	n := c.Nodes[1]
	n.Kill()
	if err := n.Do(ctx, "PING").Error(); err == nil {
		t.Fatal("a killed node still answers PING")
	}
	if err := n.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	id, err := n.Do(ctx, "CLUSTER", "MYID").ToString()
	if err != nil || id != n.ID {
		t.Fatalf("restarted node has ID %q (%v), want %q", id, err, n.ID)
	}
}

func TestMoveSlotTakesItsKeys(t *testing.T) {
	c := clustertest.New(t, clustertest.Config{Primaries: 3, Replicas: -1})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cl, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: c.Addrs(), DisableCache: true})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	const key = "{moved}k"
	sl, err := cl.Do(ctx, cl.B().ClusterKeyslot().Key(key).Build()).AsInt64()
	if err != nil {
		t.Fatal(err)
	}
	if err := cl.Do(ctx, cl.B().Set().Key(key).Value("v").Build()).Error(); err != nil {
		t.Fatal(err)
	}
	from, err := c.Primary(ctx, int(sl))
	if err != nil {
		t.Fatal(err)
	}
	to := c.Nodes[(slices.Index(c.Nodes, from)+1)%3]
	if err := c.MoveSlot(ctx, int(sl), to); err != nil {
		t.Fatal(err)
	}
	if p, err := c.Primary(ctx, int(sl)); err != nil || p != to {
		t.Fatalf("slot %d on %v (%v), want %s", sl, p, err, to.Addr)
	}
	if v, err := to.Do(ctx, "GET", key).ToString(); err != nil || v != "v" {
		t.Fatalf("GET on the new owner: %q, %v; want the key moved with its slot", v, err)
	}
}

// A primary added to a running cluster takes slots with their keys, and
// once it has given them back and been removed, the others no longer know
// it.
func TestAddPrimaryThenRemoveIt(t *testing.T) {
	c := clustertest.New(t, clustertest.Config{Replicas: -1})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	const key = "{added}k"
	sl := slot.Of(key)
	from, err := c.Primary(ctx, sl)
	if err != nil {
		t.Fatal(err)
	}
	if err := from.Do(ctx, "SET", key, "v").Error(); err != nil {
		t.Fatal(err)
	}
	n, err := c.AddPrimary(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Nodes) != 4 || c.Nodes[3] != n {
		t.Fatalf("the added primary is not the cluster's 4th node: %d nodes", len(c.Nodes))
	}
	if err := c.MoveSlot(ctx, sl, n); err != nil {
		t.Fatal(err)
	}
	if p, err := c.Primary(ctx, sl); err != nil || p != n {
		t.Fatalf("slot %d on %v (%v), want the added primary %s", sl, p, err, n.Addr)
	}
	if v, err := n.Do(ctx, "GET", key).ToString(); err != nil || v != "v" {
		t.Fatalf("GET on the added primary: %q, %v; want the key moved with its slot", v, err)
	}
	if err := c.MoveSlot(ctx, sl, from); err != nil {
		t.Fatal(err)
	}
	if err := c.Remove(ctx, n); err != nil {
		t.Fatal(err)
	}
	if len(c.Nodes) != 3 || slices.Contains(c.Nodes, n) {
		t.Fatalf("%d nodes after the removal, want the 3 first", len(c.Nodes))
	}
	for _, m := range c.Nodes {
		info, err := m.Do(ctx, "CLUSTER", "INFO").ToString()
		if err != nil || !strings.Contains(info, "cluster_known_nodes:3\r\n") || !strings.Contains(info, "cluster_state:ok") {
			t.Fatalf("CLUSTER INFO of %s after the removal: %q, %v", m.Addr, info, err)
		}
	}
	if v, err := from.Do(ctx, "GET", key).ToString(); err != nil || v != "v" {
		t.Fatalf("GET on the first primary again: %q, %v", v, err)
	}
}

// A TLS cluster whose clients authenticate as an ACL user: its nodes
// answer only on TLS, refuse a client without the user's password, and
// replicate and move slots (MIGRATE) with TLS and the same user.
func TestClusterTLSAndUser(t *testing.T) {
	c := clustertest.New(t, clustertest.Config{Primaries: 3, Replicas: 1, TLS: true, User: "sluice", Password: "s3cret"})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cl, err := rueidis.NewClient(c.ClientOption())
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if err := cl.Do(ctx, cl.B().Set().Key("k").Value("v").Build()).Error(); err != nil {
		t.Fatalf("SET over TLS as the user: %v", err)
	}
	if got, err := cl.Do(ctx, cl.B().AclWhoami().Build()).ToString(); err != nil || got != "sluice" {
		t.Fatalf("ACL WHOAMI: got %q, %v, want sluice", got, err)
	}
	if err := c.MoveSlot(ctx, slot.Of("k"), c.Nodes[0]); err != nil {
		t.Fatalf("moving a slot with its key: %v", err)
	}
	if got, err := cl.Do(ctx, cl.B().Get().Key("k").Build()).ToString(); err != nil || got != "v" {
		t.Fatalf("GET after the move: got %q, %v", got, err)
	}

	opt := c.ClientOption()
	opt.Password = "wrong"
	if _, err := rueidis.NewClient(opt); err == nil || !strings.Contains(err.Error(), "WRONGPASS") {
		t.Fatalf("a wrong password: got %v, want WRONGPASS", err)
	}
	opt = c.ClientOption()
	opt.TLSConfig = nil
	opt.Dialer = net.Dialer{Timeout: time.Second}
	if cl, err := rueidis.NewClient(opt); err == nil {
		cl.Close()
		t.Fatal("a client without TLS was served")
	}
}

// Every cluster has the settings its Config asks for, whether its nodes
// were started for it or were spares started ahead (the second and later
// clusters of a shape in a test binary), and keeps them across a Restart;
// its primaries know their replicas, whose CLUSTER FAILOVER then succeeds.
func TestEveryClusterHasItsSettings(t *testing.T) {
	for i, cfg := range []clustertest.Config{
		{},
		{Replicas: -1, NodeTimeout: 7 * time.Second, PartialCoverage: true},
		{NodeTimeout: 2 * time.Second, PartialCoverage: true},
		{Primaries: 2, NodeTimeout: 3 * time.Second},
		{Replicas: -1, Password: "s3cret"},
		{Password: "s3cret", PartialCoverage: true},
	} {
		c := clustertest.New(t, cfg)
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		timeout, full := "1000", "yes"
		if cfg.NodeTimeout > 0 {
			timeout = strconv.FormatInt(cfg.NodeTimeout.Milliseconds(), 10)
		}
		if cfg.PartialCoverage {
			full = "no"
		}
		check := func(n *clustertest.Node, when string) {
			t.Helper()
			got, err := n.Do(ctx, "CONFIG", "GET", "cluster-node-timeout").AsStrMap()
			if err != nil || got["cluster-node-timeout"] != timeout {
				t.Fatalf("cluster %d %s: %s has cluster-node-timeout %v (%v), want %s", i, when, n.Addr, got, err, timeout)
			}
			got, err = n.Do(ctx, "CONFIG", "GET", "cluster-require-full-coverage").AsStrMap()
			if err != nil || got["cluster-require-full-coverage"] != full {
				t.Fatalf("cluster %d %s: %s has cluster-require-full-coverage %v (%v), want %s", i, when, n.Addr, got, err, full)
			}
			// Spares idle at hz 10; a test's timeouts count on 100.
			got, err = n.Do(ctx, "CONFIG", "GET", "hz").AsStrMap()
			if err != nil || got["hz"] != "100" {
				t.Fatalf("cluster %d %s: %s has hz %v (%v), want 100", i, when, n.Addr, got, err)
			}
			for _, name := range []string{"requirepass", "masterauth"} {
				got, err = n.Do(ctx, "CONFIG", "GET", name).AsStrMap()
				if err != nil || got[name] != cfg.Password {
					t.Fatalf("cluster %d %s: %s has %s %v (%v), want %q", i, when, n.Addr, name, got, err, cfg.Password)
				}
			}
		}
		for _, n := range c.Nodes {
			check(n, "once made")
		}
		if cfg.Replicas >= 0 {
			failover(t, ctx, c.Nodes[len(c.Nodes)-1])
		}
		n := c.Nodes[0]
		n.Kill()
		if err := n.Restart(ctx); err != nil {
			t.Fatalf("cluster %d: %v", i, err)
		}
		check(n, "after a restart")
	}
}

// failover has replica take its primary's place, and waits until it has.
func failover(t *testing.T, ctx context.Context, replica *clustertest.Node) {
	t.Helper()
	if err := replica.Do(ctx, "CLUSTER", "FAILOVER").Error(); err != nil {
		t.Fatalf("CLUSTER FAILOVER: %v", err)
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		role, err := replica.Do(ctx, "ROLE").ToArray()
		if err == nil && len(role) > 0 {
			if r, _ := role[0].ToString(); r == "master" {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("the replica %s is not a primary 10s after CLUSTER FAILOVER", replica.Addr)
		}
	}
}

// A cluster's replicas get its writes from the start: a primary holds
// them back from a replica that has not acknowledged its first sync yet,
// so a write made just after New, its primary then killed, was lost. Each
// cluster but the first is of spares, whose replicas sync as New adopts
// them.
func TestWritesReachTheReplicasAtOnce(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for i := range 3 {
		c := clustertest.New(t, clustertest.Config{})
		for _, p := range c.Nodes[:3] {
			key := ""
			for j := 0; key == ""; j++ {
				if n, err := c.Primary(ctx, slot.Of("k"+strconv.Itoa(j))); err != nil {
					t.Fatal(err)
				} else if n == p {
					key = "k" + strconv.Itoa(j)
				}
			}
			// One connection for both: WAIT waits for the offset of its
			// connection's last write, none on another (0, which a
			// replica whose stream is held back has acknowledged).
			cl, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{p.Addr}, ForceSingleClient: true, DisableCache: true})
			if err != nil {
				t.Fatal(err)
			}
			var n int64
			err = cl.Dedicated(func(d rueidis.DedicatedClient) error {
				if err := d.Do(ctx, d.B().Set().Key(key).Value("v").Build()).Error(); err != nil {
					return err
				}
				// A replica acknowledges what it is sent within
				// milliseconds; what is held back waits for its cron, up
				// to a second.
				n, err = d.Do(ctx, d.B().Wait().Numreplicas(1).Timeout(200).Build()).AsInt64()
				return err
			})
			cl.Close()
			if err != nil || n != 1 {
				t.Fatalf("cluster %d: %s's replica acknowledged a write in 200 ms: %d (%v), want 1", i, p.Addr, n, err)
			}
		}
	}
}
