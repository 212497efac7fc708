package router

import (
	"context"
	"testing"

	"github.com/sluice-rl/sluice/router/slot"
)

// A part of a fan-out (Forward.Primary, by a slot) that finds no node for
// its slot is answered CLUSTERDOWN, as an unchecked command is: not an
// empty reply, taken for the check's.
func TestCheckedCommandWithoutANodeIsAnsweredClusterDown(t *testing.T) {
	c := &Cluster{tags: slot.NewTags()}
	replies := make([][]byte, 2)
	done := 0
	c.Forward(context.Background(), nil, []Forward{
		{Slot: 0, Cmd: AppendCommand(nil, [][]byte{[]byte("FLUSHALL")}), Primary: true},
		{Slot: 0, Cmd: AppendCommand(nil, [][]byte{[]byte("FLUSHALL")})},
	}, replies, func(idx []int) { done += len(idx) })
	if done != 2 {
		t.Fatalf("%d of 2 answered", done)
	}
	if string(replies[0]) != string(replies[1]) {
		t.Fatalf("checked: %q, unchecked: %q", replies[0], replies[1])
	}
}
