package proxy_test

import (
	"context"
	"strconv"
	"strings"
	"testing"

	"github.com/sluice-rl/sluice/proxy"
	"github.com/sluice-rl/sluice/router"
	"github.com/sluice-rl/sluice/router/clustertest"
)

// With --read-from-replicas and two replicas a primary, HSCAN, SSCAN and
// ZSCAN went to the replicas in turn: a cursor is one node's (each hashes
// with a seed of its own), so a full iteration of an unchanged key
// missed and repeated elements. Redis returns every element present
// throughout.
func TestReviewScanCursorCommandsStayOnOneNode(t *testing.T) {
	c := clustertest.New(t, clustertest.Config{Primaries: 1, Replicas: 2})
	ctx := context.Background()
	const n = 1000 // past the listpack sizes: a real table, scanned by cursor
	keys := map[string][]string{"HSCAN": {"{scanro}h", "HSET"}, "SSCAN": {"{scanro}s", "SADD"}, "ZSCAN": {"{scanro}z", "ZADD"}}
	primary := primaryOf(t, c, "{scanro}")
	replicas := replicasOf(t, c, primary)
	if len(replicas) != 2 {
		t.Fatalf("%d replicas of %s, want 2", len(replicas), primary.Addr)
	}
	r := newRouterConfig(t, router.ClusterConfig{Seeds: c.Addrs(), ReadFromReplicas: true})
	waitRouter(t, r)
	rc := dialRaw(t, serveConfig(t, proxy.Config{Decider: r, Forwarder: r, Loops: 1}))
	for _, kw := range keys {
		args := []string{kw[1], kw[0]}
		for i := range n {
			if kw[1] == "ZADD" {
				args = append(args, strconv.Itoa(i))
			}
			args = append(args, "m"+strconv.Itoa(i))
			if kw[1] == "HSET" {
				args = append(args, "v")
			}
		}
		if got := rc.do(args...); got != ":"+strconv.Itoa(n)+"\r\n" {
			t.Fatalf("%s: %q", kw[1], got)
		}
	}
	exists := func(nd *clustertest.Node) int {
		stats, _ := nd.Do(ctx, "INFO", "commandstats").ToString()
		_, after, ok := strings.Cut(stats, "cmdstat_exists:calls=")
		if !ok {
			return 0
		}
		v, _ := strconv.Atoi(after[:strings.IndexByte(after, ',')])
		return v
	}
	// Both replicas known to the router (a replica may join the slot map
	// after the cluster formed) and holding the keys.
	for _, rep := range replicas {
		waitUntil(t, "a read of the keys reaches "+rep.Addr, func() bool {
			before := exists(rep)
			return rc.do("EXISTS", "{scanro}h", "{scanro}s", "{scanro}z") == ":3\r\n" && exists(rep) > before
		})
	}
	for cmd, kw := range keys {
		seen := map[string]int{}
		cur := "0"
		for range 10 * n {
			rc.send([]string{cmd, kw[0], cur, "COUNT", "10"})
			v, err := readReply(rc.br)
			if err != nil {
				t.Fatal(err)
			}
			page, ok := v.([]any)
			if !ok || len(page) != 2 {
				t.Fatalf("%s: %v", cmd, v)
			}
			elems := page[1].([]any)
			for i := 0; i < len(elems); i++ {
				seen[elems[i].(string)]++
				if cmd != "SSCAN" {
					i++ // the value or score
				}
			}
			if cur = page[0].(string); cur == "0" {
				break
			}
		}
		if cur != "0" {
			t.Fatalf("%s did not end", cmd)
		}
		missed, twice := 0, 0
		for i := range n {
			switch seen["m"+strconv.Itoa(i)] {
			case 0:
				missed++
			case 1:
			default:
				twice++
			}
		}
		if missed > 0 || twice > 0 {
			t.Errorf("%s of an unchanged key: %d of %d elements missed, %d returned more than once", cmd, missed, n, twice)
		}
	}
}
