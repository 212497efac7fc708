package router

import (
	"bufio"
	"net"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluice-rl/sluice/router/clustertest"
)

// A node absent from the slot map that holds a subscriber and says it is
// still in the cluster (a primary emptied of its slots, say, which may
// stay so for long) is asked again askLeftEvery later, not at every
// reading of the map (each second, or every 50 ms during an outage).
func TestNodeThatStayedIsNotAskedAtEveryReading(t *testing.T) {
	cc := clustertest.New(t, clustertest.Config{Replicas: -1})
	c := NewCluster(ClusterConfig{Seeds: cc.Addrs(), TopologyInterval: 20 * time.Millisecond})
	t.Cleanup(c.Close)
	if err := c.WaitConnected(t.Context()); err != nil {
		t.Fatal(err)
	}
	var asked atomic.Int64
	addr := serveEach(t, func(conn net.Conn) {
		defer conn.Close()
		br := bufio.NewReader(conn)
		for {
			line, err := br.ReadString('\n')
			if err != nil {
				return
			}
			if strings.EqualFold(strings.TrimSpace(line), "INFO") {
				asked.Add(1)
				info := "cluster_state:ok\r\ncluster_known_nodes:4\r\ncluster_size:3\r\n"
				conn.Write([]byte("$" + strconv.Itoa(len(info)) + "\r\n" + info + "\r\n"))
			}
		}
	})
	tun := c.Tunnel(false, func([]byte, bool, bool) {}, func(error) {})
	t.Cleanup(tun.Close)
	tunnelTo(t, tun, addr)

	pollFor(t, 10*time.Second, "the node absent from the slot map asked whether it left", func() bool { return asked.Load() > 0 })
	// A window of about 50 readings of the map, in which nothing should
	// be asked: what is checked is an absence, which no condition shows.
	time.Sleep(time.Second)
	if n := asked.Load(); n != 1 {
		t.Errorf("asked %d times in a second of readings every 20 ms, want once (again after %v)", n, askLeftEvery)
	}
	tun.mu.Lock()
	left := tun.conns.shards[len(tun.conns.shards)-1].left
	tun.mu.Unlock()
	if left {
		t.Error("the connection to a node still in the cluster was closed")
	}
}
