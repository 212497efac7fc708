package proxy

import (
	"fmt"
	"testing"
	"time"

	"github.com/sluice-rl/sluice/router/clustertest"
)

// A loop stops reading a client at maxInFlight of what it has in flight,
// and a command split per slot has a part on the shards for each slot:
// counted as one command, a pipeline of 1,000 MGETs of 1,000 keys put a
// million parts on the shards before reading stopped. Its parts count,
// until they are answered.
func TestSplitCommandsPartsCountTowardInFlight(t *testing.T) {
	c := clustertest.New(t, clustertest.Config{Replicas: -1})
	r := connectedCluster(t, c)
	for deadline := time.Now().Add(5 * time.Second); r.Commands() == nil; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the router did not read the cluster's command table")
		}
	}
	s := New(Config{Decider: r, Forwarder: r})
	cl := s.newClient("test", nil, -1)
	args := [][]byte{[]byte("MGET")}
	for i := range 1000 {
		args = append(args, fmt.Appendf(nil, "key:%d", i))
	}
	var rd round
	s.take(&cl, &rd, args)
	if len(rd.fwd) < 500 {
		t.Fatalf("MGET of 1000 keys in %d parts", len(rd.fwd))
	}
	if got := cl.inFlight() + cl.split; got != len(rd.fwd) {
		t.Fatalf("an MGET split in %d parts counts %d toward maxInFlight", len(rd.fwd), got)
	}
	rd.replies = make([][]byte, len(rd.fwd))
	for j := range rd.replies {
		rd.replies[j] = []byte("*1\r\n$-1\r\n")
	}
	for j := range rd.fwd {
		rd.deliverPart(j, func(*client) {})
	}
	if cl.q[0].state != slotDecided || cl.split != 0 {
		t.Fatalf("answered: slot %v, %d parts still counted", cl.q[0].state, cl.split)
	}
}
