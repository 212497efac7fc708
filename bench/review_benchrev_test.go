package main

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/sluice-rl/sluice/router/clustertest"
)

// The article script's keys outlive a direct run by 11 s at the default
// limits; left in place they expire inside a later run's CPU window. After
// dropKeys of directKeys no node, replicas included, holds one of this
// invocation's, and nothing else is touched; likewise sluice's buckets,
// which a calibration leaves to expire in the direct run after it.
func TestDropDirectKeys(t *testing.T) {
	c := clustertest.New(t, clustertest.Config{})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	nt := &neutral{id: "m0ck1d"}
	defer func() {
		for _, n := range nt.nodes {
			n.c.Close()
		}
	}()
	if err := nt.connectNodes(ctx, c.Nodes[0].Addr); err != nil {
		t.Fatal(err)
	}
	sha, err := nt.loadArticle(ctx)
	if err != nil {
		t.Fatal(err)
	}
	cl, err := rueidis.NewClient(c.ClientOption())
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	var direct []string
	for _, tag := range []string{"a", "b", "c", "d", "e", "f"} {
		direct = append(direct, "rate:{"+tag+"}:m0ck1d:u:000000000001")
	}
	direct = append(direct, "rate:hot:m0ck1d")
	for _, k := range direct {
		if err := cl.Do(ctx, cl.B().Evalsha().Sha1(sha).Numkeys(1).Key(k).Arg("100", "10", "1", "1000").Build()).Error(); err != nil {
			t.Fatal(err)
		}
	}
	kept := []string{"sluice:m0ck1d:u:000000000001", "rate:{a}:0th3r:u:000000000001"}
	for _, k := range kept {
		if err := cl.Do(ctx, cl.B().Set().Key(k).Value("x").Build()).Error(); err != nil {
			t.Fatal(err)
		}
	}
	if err := nt.dropKeys(ctx, directKeys(nt.id)); err != nil {
		t.Fatal(err)
	}
	for _, n := range nt.nodes {
		left, err := n.c.Do(ctx, n.c.B().Keys().Pattern(directKeys(nt.id)).Build()).AsStrSlice()
		if err != nil || len(left) > 0 {
			t.Errorf("%s (primary %v): %v left, %v", n.addr, n.serving(), left, err)
		}
	}
	for _, k := range kept {
		if got, err := cl.Do(ctx, cl.B().Exists().Key(k).Build()).AsInt64(); got != 1 || err != nil {
			t.Errorf("%s: EXISTS %d, %v; want kept", k, got, err)
		}
	}
	if err := nt.dropKeys(ctx, sluiceKeys(nt.id)); err != nil {
		t.Fatal(err)
	}
	if got, err := cl.Do(ctx, cl.B().Exists().Key(kept[0]).Build()).AsInt64(); got != 0 || err != nil {
		t.Errorf("%s: EXISTS %d, %v; want it dropped", kept[0], got, err)
	}
	if got, err := cl.Do(ctx, cl.B().Exists().Key(kept[1]).Build()).AsInt64(); got != 1 || err != nil {
		t.Errorf("%s: EXISTS %d, %v; want it kept (another invocation's)", kept[1], got, err)
	}
}

// redis-benchmark's own keys (key:<12 digits>, key:{tag}:<12 digits>) are
// dropped before the passthrough rows, so that values left under them
// weigh on neither path's GETs; keys of other shapes are not touched.
func TestDropBenchmarkKeys(t *testing.T) {
	c := clustertest.New(t, clustertest.Config{})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	nt := &neutral{}
	defer func() {
		for _, n := range nt.nodes {
			n.c.Close()
		}
	}()
	if err := nt.connectNodes(ctx, c.Nodes[0].Addr); err != nil {
		t.Fatal(err)
	}
	cl, err := rueidis.NewClient(c.ClientOption())
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	dropped := []string{"key:000000000001", "key:000000099999", "key:{06S}:000000000467", "key:{8M}}:000000000515"}
	kept := []string{"key:1", "key:0000000000011", "mykey:000000000001", "key:{06S}:1", "key:abcdefghijkl"}
	for _, k := range append(slices.Clone(dropped), kept...) {
		if err := cl.Do(ctx, cl.B().Set().Key(k).Value("x").Build()).Error(); err != nil {
			t.Fatal(err)
		}
	}
	for _, pattern := range benchmarkKeys {
		if err := nt.dropKeys(ctx, pattern); err != nil {
			t.Fatal(err)
		}
	}
	for _, k := range dropped {
		if got, err := cl.Do(ctx, cl.B().Exists().Key(k).Build()).AsInt64(); got != 0 || err != nil {
			t.Errorf("%s: EXISTS %d, %v; want it dropped", k, got, err)
		}
	}
	for _, k := range kept {
		if got, err := cl.Do(ctx, cl.B().Exists().Key(k).Build()).AsInt64(); got != 1 || err != nil {
			t.Errorf("%s: EXISTS %d, %v; want it kept", k, got, err)
		}
	}
}
