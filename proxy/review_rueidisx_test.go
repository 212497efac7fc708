package proxy_test

import (
	"context"
	"errors"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/redis/rueidis/rueidislock"

	"github.com/sluice-rl/sluice/proxy"
	"github.com/sluice-rl/sluice/router/clustertest"
)

// Redis tracks the keys a script reads for the client that ran it, so a
// tracking client that ran EVAL or EVALSHA (or queued one in MULTI) gets
// the invalidation of a declared key once it changes. Through sluice the
// push comes right after the reply; either way it comes before the reply
// of a PING sent after the key was written elsewhere.
func TestTrackedScriptKeysAreInvalidated(t *testing.T) {
	c := clustertest.New(t, clustertest.Config{Primaries: 1, Replicas: -1})
	r := newForwarding(t, c)
	const script = "return redis.call('GET', KEYS[1])"
	sha := dialRaw(t, c.Nodes[0].Addr).do("SCRIPT", "LOAD", script)
	sha = sha[len("$40\r\n") : len(sha)-2]
	eachIOConfig(t, proxy.Config{Decider: r, Forwarder: r}, func(t *testing.T, cfg proxy.Config) {
		addr := serveConfig(t, cfg)
		key := "trk:script:" + t.Name()
		writer := dialRaw(t, c.Nodes[0].Addr)
		for _, tc := range []struct {
			cmds  [][]string
			reads int
		}{
			{[][]string{{"EVAL", script, "1", key}}, 1},
			{[][]string{{"EVALSHA", sha, "1", key}}, 1},
			{[][]string{{"MULTI"}, {"EVAL", script, "1", key}, {"EXEC"}}, 3},
		} {
			for _, conn := range []*rawConn{dialRaw(t, addr), dialRaw(t, c.Nodes[0].Addr)} {
				conn.do("HELLO", "3")
				conn.do("CLIENT", "TRACKING", "ON")
				conn.send(tc.cmds...)
				for range tc.reads {
					conn.read()
				}
				writer.do("SET", key, "v")
				conn.send([]string{"PING"})
				if got := conn.read(); got != invalidate(key) {
					t.Errorf("%q then a write elsewhere: %q, want the invalidation %q", tc.cmds, got, invalidate(key))
				}
			}
		}
	})
}

// rueidislock, with its default client-side caching, waits for the
// invalidation of a lock key its script read: a waiter on another client
// takes the lock once its holder releases it.
func TestRueidislockWaiterTakesReleasedLock(t *testing.T) {
	c := clustertest.New(t, clustertest.Config{Replicas: -1})
	r := newForwarding(t, c)
	addr := serveConfig(t, proxy.Config{Decider: r, Forwarder: r})
	locker := func() rueidislock.Locker {
		l, err := rueidislock.NewLocker(rueidislock.LockerOption{ClientOption: rueidis.ClientOption{InitAddress: []string{addr}}})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(l.Close)
		return l
	}
	holder, waiter := locker(), locker()
	_, release, err := holder.WithContext(context.Background(), "lock")
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := waiter.TryWithContext(context.Background(), "lock"); !errors.Is(err, rueidislock.ErrNotLocked) {
		t.Fatalf("TryWithContext of a held lock: %v", err)
	}
	// The lock is released only once the waiter has tried it (a script
	// call more on the nodes): released before, the waiter would take it
	// free, with or without an invalidation.
	tried := scriptCalls(t, c)
	got := make(chan error, 1)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	go func() {
		_, unlock, err := waiter.WithContext(ctx, "lock")
		if err == nil {
			unlock()
		}
		got <- err
	}()
	waitUntil(t, "the waiter tries the held lock", func() bool { return scriptCalls(t, c) > tried })
	release()
	if err := <-got; err != nil {
		t.Fatalf("waiter, its holder released (lock keys valid 5 s): %v", err)
	}
}

// scriptCalls is how many EVAL and EVALSHA calls c's nodes have run.
func scriptCalls(t *testing.T, c *clustertest.Cluster) int {
	t.Helper()
	calls := regexp.MustCompile(`cmdstat_eval(?:sha)?:calls=(\d+)`)
	n := 0
	for _, node := range c.Nodes {
		s, err := node.Do(context.Background(), "INFO", "commandstats").ToString()
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range calls.FindAllStringSubmatch(s, -1) {
			k, _ := strconv.Atoi(m[1])
			n += k
		}
	}
	return n
}
