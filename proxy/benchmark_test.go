package proxy_test

import (
	"net"
	"os/exec"
	"regexp"
	"strings"
	"testing"

	"github.com/sluice-rl/sluice/proxy"
	"github.com/sluice-rl/sluice/router/clustertest"
)

// redis-benchmark's own suite, pointed at sluice as a user would point it
// at Redis, runs to the end with no error, on both serving paths: every
// command it sends is routed, split (MSET of ten keys) or answered.
func TestRedisBenchmarkSuite(t *testing.T) {
	if _, err := exec.LookPath("redis-benchmark"); err != nil {
		clustertest.Require(t)
		t.Fatal("redis-benchmark is not on PATH (install redis-tools, or run make test)")
	}
	c := clustertest.New(t, clustertest.Config{Replicas: -1})
	r := newForwarding(t, c)
	tests := []string{"SET", "GET", "INCR", "LPUSH", "RPUSH", "LPOP", "RPOP", "SADD", "HSET", "SPOP", "ZADD", "LRANGE_100 (first 100 elements)", "MSET (10 keys)"}
	for _, loops := range []int{0, -1} {
		addr := serveConfig(t, proxy.Config{Decider: r, Forwarder: r, Loops: loops})
		host, port, _ := net.SplitHostPort(addr)
		out, err := exec.Command("redis-benchmark", "-h", host, "-p", port, "-q", "-n", "500", "-c", "10",
			"-t", "set,get,incr,lpush,rpush,lpop,rpop,sadd,hset,spop,zadd,lrange_100,mset").CombinedOutput()
		text := string(out)
		if err != nil {
			t.Fatalf("loops %d: redis-benchmark: %v\n%s", loops, err, text)
		}
		// Its only complaint is CONFIG GET, refused without --allow-admin.
		if strings.Contains(strings.ReplaceAll(text, "WARNING: Could not fetch server CONFIG", ""), "rror") {
			t.Errorf("loops %d: redis-benchmark reported an error:\n%s", loops, text)
		}
		for _, name := range tests {
			if !regexp.MustCompile(`(^|[\r\n])` + regexp.QuoteMeta(name) + `: [0-9.]+ requests per second`).MatchString(text) {
				t.Errorf("loops %d: no result for %s:\n%s", loops, name, text)
			}
		}
	}
}
