package proxy

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
)

// cmdStat is one command's line of INFO commandstats.
type cmdStat struct {
	calls, rejected, failed atomic.Int64
	ns                      atomic.Int64 // usec, in ns
}

// commandStats are INFO commandstats' counts, by the command's name as
// Redis names it (lower case, a subcommand as "client|list"). The names
// come from sluice's command table and the cluster's, never from what a
// client sends: an unknown command is counted nowhere, as in Redis.
type commandStats struct {
	mu sync.RWMutex
	by map[string]*cmdStat
}

func (cs *commandStats) of(name string) *cmdStat {
	cs.mu.RLock()
	st := cs.by[name]
	cs.mu.RUnlock()
	if st != nil {
		return st
	}
	cs.mu.Lock()
	defer cs.mu.Unlock()
	if st = cs.by[name]; st == nil {
		if cs.by == nil {
			cs.by = map[string]*cmdStat{}
		}
		st = new(cmdStat)
		cs.by[name] = st
	}
	return st
}

// write renders INFO's commandstats, as Redis: a line for each command
// called or refused at least once, here in name order.
func (cs *commandStats) write(b *strings.Builder) {
	cs.mu.RLock()
	by := maps.Clone(cs.by)
	cs.mu.RUnlock()
	for _, name := range slices.Sorted(maps.Keys(by)) {
		st := by[name]
		calls, usec := st.calls.Load(), st.ns.Load()/1000
		perCall := 0.0
		if calls > 0 {
			perCall = float64(usec) / float64(calls)
		}
		fmt.Fprintf(b, "cmdstat_%s:calls=%d,usec=%d,usec_per_call=%.2f,rejected_calls=%d,failed_calls=%d\r\n",
			infoSafe(name), calls, usec, perCall, st.rejected.Load(), st.failed.Load())
	}
}

// counted counts the command take just took from c, whose queue, replies
// and held replies were q0, out0 and held0 long before it. One answered
// now counts at once; one that waits for its answer (a decision, a node's
// reply) counts when it is answered (answered).
func (s *Server) counted(c *client, at int64, q0, out0, held0 int) {
	name := c.named
	if name == nil || c.queued {
		return
	}
	st := s.cmdStats.of(*name)
	if c.refused {
		st.rejected.Add(1)
		return
	}
	if n := len(c.q); n > q0 && c.q[n-1].state == slotWaiting {
		c.q[n-1].stat, c.q[n-1].at = st, at
		return
	}
	st.calls.Add(1)
	reply := c.out.b[min(out0, len(c.out.b)):]
	if len(c.q) > q0 {
		reply = c.held.b[min(held0, len(c.held.b)):]
	}
	if len(reply) > 0 && reply[0] == '-' {
		st.failed.Add(1)
	}
}

// answered counts a command read at at whose answer came now (ns).
func (st *cmdStat) answered(at, now int64, failed bool) {
	st.ns.Add(max(now-at, 0))
	st.ran(failed)
}

// ran counts a command that ran, failed or not.
func (st *cmdStat) ran(failed bool) {
	st.calls.Add(1)
	if failed {
		st.failed.Add(1)
	}
}
