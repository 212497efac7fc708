package proxy

import (
	"bytes"
	"runtime"
	"strconv"
	"strings"
	"testing"
)

// An MGET split over slots is merged into a reply allocated once at its
// size: grown by append, 30 MB of values allocated about five times that.
func TestMergedMGETAllocatesItsSize(t *testing.T) {
	const parts, each = 8, 1 << 20
	value := "$" + strconv.Itoa(each) + "\r\n" + strings.Repeat("v", each) + "\r\n"
	replies := make([][]byte, parts)
	order := make([]int, parts)
	var want []byte
	want = appendArrayHeader(want, parts)
	for i := range replies {
		replies[i] = []byte("*1\r\n" + value)
		order[i] = parts - 1 - i
		want = append(want, value...)
	}
	it := &fwdItem{how: mergeArray, order: order}
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	got := it.merged(replies)
	runtime.ReadMemStats(&after)
	if !bytes.Equal(got, want) {
		t.Fatalf("merged %.40q..., want %.40q...", got, want)
	}
	if n := after.TotalAlloc - before.TotalAlloc; n > 3*uint64(len(want))/2 {
		t.Fatalf("allocated %d bytes for a reply of %d", n, len(want))
	}
}

// SCRIPT KILL's merge answers what the busy node said of its script
// whichever node answered first: one node out of reach must not hide
// another's UNKILLABLE or BUSY behind sluice's connection error.
func TestKillMergeNodesWordFirst(t *testing.T) {
	const (
		ok         = "+OK\r\n"
		notbusy    = "-NOTBUSY No scripts in execution right now.\r\n"
		unkillable = "-UNKILLABLE Sorry the script already executed write commands against the dataset.\r\n"
		busy       = "-BUSY Redis is busy running a function. You can only call FUNCTION KILL or SHUTDOWN NOSAVE.\r\n"
		lost       = "-ERR sluice: connection to 127.0.0.1:1 lost\r\n"
	)
	for _, c := range []struct {
		parts []string
		want  string
	}{
		{[]string{notbusy, lost, ok}, ok},
		{[]string{lost, unkillable, notbusy}, unkillable},
		{[]string{notbusy, lost, busy}, busy},
		{[]string{notbusy, lost, notbusy}, lost},
		{[]string{notbusy, notbusy, notbusy}, notbusy},
	} {
		parts := make([][]byte, len(c.parts))
		for i, p := range c.parts {
			parts[i] = []byte(p)
		}
		it := &fwdItem{how: mergeKill}
		if got := string(it.merged(parts)); got != c.want {
			t.Errorf("merged %q = %q, want %q", c.parts, got, c.want)
		}
	}
}
