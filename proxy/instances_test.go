package proxy_test

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sluice-rl/sluice/proxy"
	"github.com/sluice-rl/sluice/router"
	"github.com/sluice-rl/sluice/router/clustertest"
)

// infoField is the value of field in an INFO reply.
func infoField(t *testing.T, info, field string) string {
	t.Helper()
	for _, line := range strings.Split(info, "\r\n") {
		if v, ok := strings.CutPrefix(line, field+":"); ok {
			return v
		}
	}
	t.Fatalf("no %s in INFO", field)
	return ""
}

// Two instances on one cluster, one on each serving path: each counts
// only its own decisions in INFO, and one key alternated through them
// counts in one bucket. Two embedded instances do not share: each admits
// the whole limit.
func TestMultiInstancesCountTheirOwn(t *testing.T) {
	c := clustertest.New(t, clustertest.Config{Replicas: -1})
	ra, rb := newRouter(t, c), newRouter(t, c)
	a := dialRaw(t, serveConfig(t, proxy.Config{Decider: ra, Backend: "cluster"}))
	b := dialRaw(t, serveConfig(t, proxy.Config{Decider: rb, Backend: "cluster", Loops: -1}))
	for i := range 8 {
		conn := a
		if i%4 == 3 {
			conn = b
		}
		got := conn.do("THROTTLE", "mi", "5", "1", "1h")
		want := "*5\r\n:0\r\n:5\r\n:" + string(rune('0'+max(4-i, 0))) + "\r\n"
		if i >= 5 {
			want = "*5\r\n:1\r\n:5\r\n:0\r\n"
		}
		if !strings.HasPrefix(got, want) {
			t.Fatalf("call %d: %q, want it to start %q", i, got, want)
		}
	}
	if got := infoField(t, a.do("INFO", "backend"), "decisions_cluster"); got != "6" {
		t.Errorf("A's decisions_cluster %s, want its own 6", got)
	}
	if got := infoField(t, b.do("INFO", "backend"), "decisions_cluster"); got != "2" {
		t.Errorf("B's decisions_cluster %s, want its own 2", got)
	}
	ea := dialRaw(t, serveConfig(t, proxy.Config{Decider: router.NewMemory(1000), Backend: "embedded"}))
	eb := dialRaw(t, serveConfig(t, proxy.Config{Decider: router.NewMemory(1000), Backend: "embedded"}))
	for _, conn := range []*rawConn{ea, eb} {
		for i := range 5 {
			if got := conn.do("THROTTLE", "mi", "5", "1", "1h"); !strings.HasPrefix(got, "*5\r\n:0\r\n") {
				t.Fatalf("embedded call %d: %q, want allowed: embedded instances do not share", i, got)
			}
		}
	}
}

// INFO's instantaneous_ops_per_sec follows the commands as they come,
// on both serving paths.
func TestInfoInstantaneousOps(t *testing.T) {
	eachIOConfig(t, proxy.Config{Decider: router.NewMemory(0)}, func(t *testing.T, cfg proxy.Config) {
		conn := dialRaw(t, serveConfig(t, cfg))
		pings := make([][]string, 100)
		for i := range pings {
			pings[i] = []string{"PING"}
		}
		for deadline := time.Now().Add(10 * time.Second); ; {
			conn.send(pings...)
			for range pings {
				conn.read()
			}
			ops, err := strconv.Atoi(infoField(t, conn.do("INFO", "stats"), "instantaneous_ops_per_sec"))
			if err != nil {
				t.Fatal(err)
			}
			if ops > 0 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatal("instantaneous_ops_per_sec stayed 0 under a stream of PINGs")
			}
		}
	})
}
