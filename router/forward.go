// Passthrough: ordinary Redis commands forwarded to the primary that owns
// their slot, byte for byte, on connections of sluice's own.

package router

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/tidwall/redcon"
	"go.uber.org/zap"

	"github.com/sluice-rl/sluice/router/command"
	"github.com/sluice-rl/sluice/router/reply"
	"github.com/sluice-rl/sluice/router/slot"
)

// Forward is an ordinary command for the cluster: its whole RESP encoding
// and the slot its keys hash to, or AnySlot for a command without keys,
// which any primary may answer.
type Forward struct {
	Slot int
	// Addr is the primary the command goes to, when the caller routed it
	// already (Cluster.Route); "" routes it by the slot map when sent.
	Addr string
	Cmd  []byte
	// Replies is how many replies Cmd gets when it is several commands
	// (a transaction: MULTI, its commands, EXEC); the last one is the
	// answer. 0 means 1.
	Replies int
	// RESP3 sends the command on a connection that speaks RESP3 (HELLO
	// 3), so that its reply is in the protocol its client chose.
	RESP3 bool
	// ReadOnly marks a command that may be answered by a replica of its
	// slot's primary, with ClusterConfig.ReadFromReplicas.
	ReadOnly bool
	// Pin, when set, sends the command on its client's own connection
	// (after WATCH, until the transaction ends); Unpin lets the pin go
	// once the command is answered.
	Pin   *Pin
	Unpin bool
	// Blocked, when set, sends the command on a connection of its own: it
	// may wait at the node (BLPOP, XREAD BLOCK, ...), which must not hold
	// up the commands of other clients behind it.
	Blocked *Blocked
	// Own sends a command that does not wait on a connection of its own,
	// answered within the forward timeout as on a shared one: a KILL,
	// which the shared connection a busy script holds would not carry to
	// the node until the script ends.
	Own bool
	// Primary asks, of a command without keys meant for Slot's primary
	// (a part of FLUSHALL or CONFIG SET sent to every primary), that the
	// node it ran on still owns Slot after it: one that does not (a
	// replica now, after a failover sluice's slot map has not caught up
	// with) answers a check sent behind the command MOVED, and the
	// command is sent again to the new owner, as a redirect is followed:
	// ahead of the commands sent behind it on its connection, which
	// follow their own redirects there after it. With Slot AnySlot (a
	// keyless command that may write: EVAL, EVALSHA or FCALL without
	// keys), the primary is one of sluice's choosing, checked by a slot
	// of it.
	Primary bool
	// ScriptsGen is Cluster.ScriptsGen read as an EVAL's or a SCRIPT
	// LOAD's client sent it: one answered after a SCRIPT FLUSH sent behind
	// it is not remembered.
	ScriptsGen uint64
	// LoadsScript marks a part of a SCRIPT LOAD sent to every primary,
	// whose script is kept once they all load it (loadingScript).
	LoadsScript bool
	// Watched marks a transaction (MULTI ... EXEC on its client's Pin)
	// whose keys are all ones its client watches: one whose WATCH the
	// slot's source sent to the importing node (the keys left it) may
	// run there, with ASKING, where the watch is.
	Watched bool
	// Flush, on a part of a SCRIPT FLUSH, is the deletion of the scripts
	// kept in the cluster that ForgetScripts queued for it: the part is
	// answered once that is answered too.
	Flush *ScriptsFlush
}

// Blocked is a blocking command in flight on a connection of its own.
// Cancel gives up on it (its caller ended its side): one cancelled before
// it was sent runs without waiting instead, as Redis runs what a client
// sent before it went away: answered if the node can answer it at once.
// One sent already has its connection's write side shut, as the client's
// own end would reach the node: the node answers it if it did not wait
// (its answer may be on its way: closing the connection would drop it,
// and the element popped with it), else it frees the connection, which
// ends the wait, and the command is answered an error (Ended). Abort
// closes the connection at once: its caller is gone, or sluice closes.
type Blocked struct {
	bounded  bool       // Forward.Own: the node answers within the forward timeout
	mu       sync.Mutex // guards the fields below
	conn     net.Conn
	grace    time.Duration // how long a node may take to answer, once cancelled
	written  bool          // the command is in conn
	canceled bool
	aborted  bool
	shut     bool // conn's write side is shut
	ended    bool
	// answered: the node's answer is in, so the command no longer waits,
	// though its client has yet to get the answer.
	answered bool
	// unblocked is the answer CLIENT UNBLOCK gave the command (its
	// timeout's, or UNBLOCKED), unless the node answers it first.
	unblocked []byte
}

// Ended reports whether Cancel ended the command's wait, or found that it
// would wait: Redis frees such a client unanswered, and runs nothing it
// sent after the command. It is set before the command is answered.
func (b *Blocked) Ended() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.ended
}

// end gives the command up for Cancel (Ended), or answers it as Unblock
// asked: its client, unlike one that went away, is served on.
func (b *Blocked) end(f *forwarded) {
	b.mu.Lock()
	r := b.unblocked
	b.ended = r == nil
	b.mu.Unlock()
	if r == nil {
		r = errReply("ERR sluice: the client went away")
	}
	f.finish(r)
}

// Waits reports whether the command is in its connection to the node,
// unanswered: Redis flags a client blocked (CLIENT LIST's b, INFO's
// blocked_clients) only once its command ran and found nothing, so a
// writer that waits for the flag before adding an entry is not overtaken
// by an XREAD BLOCK of $ still on its way, which would miss the entry.
// Not once cancelled: Redis unblocks a client at CLIENT UNBLOCK, and
// frees one that goes away, while the node here has yet to answer the
// shut connection.
func (b *Blocked) Waits() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.written && b.conn != nil && !b.canceled
}

// Unblock ends the command's wait as CLIENT UNBLOCK does: it is answered
// reply, unless the node answered it before it saw the wait end (then its
// answer, an element popped, is not lost). False if it no longer waits.
func (b *Blocked) Unblock(reply []byte) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.canceled || b.answered {
		// Redis answers 0 for a client a push served: it has its
		// element, and is not told otherwise.
		return false
	}
	b.canceled, b.unblocked = true, reply
	if b.conn != nil && b.written {
		b.shutWrite()
	}
	return true
}

// Cancel ends the blocking command's wait, if it waits: its caller sent
// all it will.
func (b *Blocked) Cancel() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.canceled = true
	if b.conn != nil && b.written {
		b.shutWrite()
	}
}

// Abort ends the blocking command's wait at once, whether the node
// answered it meanwhile or not: no one will take the answer.
func (b *Blocked) Abort() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.canceled, b.aborted = true, true
	if b.conn != nil {
		b.conn.Close()
	}
}

// abandoned reports whether Abort came before the command was sent: no
// one takes its answer, so it is not sent at all; nor after an Unblock,
// whose answer it gets. Run without waiting, it would pop an element
// pushed meanwhile for no one: an element Redis would have kept, as it ran
// the command before the push, found nothing, and then freed its client.
func (b *Blocked) abandoned() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.aborted || b.unblocked != nil
}

// shutWrite tells the node that the command's client ended its side: as
// to a client of its own, the node answers what it can at once, and frees
// one that waits. A node that does not within grace (hung) is given up,
// as an ordinary command's would be. b.mu is held.
func (b *Blocked) shutWrite() {
	if b.shut {
		return
	}
	b.shut = true
	conn := b.conn
	if tc, ok := conn.(*tls.Conn); ok {
		// Its close_notify, then the end of the stream under it.
		if tc.CloseWrite() != nil {
			conn.Close()
			return
		}
		conn = tc.NetConn()
	}
	cw, ok := conn.(interface{ CloseWrite() error })
	if !ok || cw.CloseWrite() != nil {
		b.conn.Close()
		return
	}
	b.conn.SetReadDeadline(time.Now().Add(b.grace))
}

// use records the connection the command waits on; false if it was
// cancelled already, when the command must not wait (and the connection,
// not recorded, is not closed by a later Cancel). grace is how long the
// node may take to answer once the command is cancelled.
func (b *Blocked) use(conn net.Conn, grace time.Duration) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.canceled {
		// Not written yet on this one: after a MOVED, written is the
		// last connection's, and a Cancel before this write would shut
		// it under the command, which would fail unanswered.
		b.conn, b.grace, b.written, b.answered = conn, grace, false, false
	}
	return !b.canceled
}

// wrote records that the command is in its connection: a Cancel that came
// while it was written, which left the connection alone, takes effect.
func (b *Blocked) wrote() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.written = true
	if b.canceled && b.conn != nil {
		b.shutWrite()
	}
}

// release forgets the connection once the reply is in, and reports
// whether the connection may serve another blocking command. answered is
// false for a redirect, which sends the command again to wait elsewhere.
func (b *Blocked) release(answered bool) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.conn, b.answered = nil, answered
	return !b.canceled
}

// AnySlot routes a keyless command to a primary of sluice's choosing.
const AnySlot = -1

// maxRedirects bounds how often one command follows MOVED or ASK, as
// cluster clients bound it: a slot map that keeps moving is answered to
// the caller rather than chased for ever.
const maxRedirects = 5

// Commands is the cluster's command table, as its COMMAND reply describes
// it, or nil before it is read.
func (c *Cluster) Commands() map[string]*command.Spec {
	if p := c.commands.Load(); p != nil {
		return *p
	}
	return nil
}

// readCommands reads the cluster's command table: at connect, then at
// each tick of run until it has one.
func (c *Cluster) readCommands(ctx context.Context) {
	client := *c.client.Load()
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	msg, err := client.Do(ctx, client.B().Command().Build()).ToMessage()
	var specs map[string]*command.Spec
	if err == nil {
		specs, err = command.Parse(msg)
	}
	switch {
	case err == nil:
		c.commands.Store(&specs)
	case isFault(err):
		c.log.Debug("reading the cluster's commands", zap.Error(err))
	case !c.commandsRefused.Swap(true):
		// A refusal (NOPERM: a cluster user without COMMAND) lasts, and
		// is retried at every tick of the loop: said once, where the
		// default level shows it.
		c.log.Warn("the cluster refused COMMAND: ordinary commands are answered TRYAGAIN until the cluster user may run it",
			zap.Error(err))
	}
}

// Forward sends each cmds[i] to the primary that owns its slot and stores
// its reply, exactly as the primary sent it, in replies[i]. It reports
// replies through done as Submit reports results: done(idx) means
// replies[i] is set for every i in idx, from any goroutine, each exactly
// once. A redirect (the slot moved) is followed, up to maxRedirects
// times, rather than answered. A command the cluster cannot take now (no
// slot map, a lost connection) is answered a Redis error; a command may
// then have run or not, as with any Redis client whose connection breaks.
// Commands that share a connection go on via's when via is not nil: the
// caller's event loop then writes them, reads their replies and calls
// done on its own goroutine.
func (c *Cluster) Forward(ctx context.Context, via Pipes, cmds []Forward, replies [][]byte, done func(idx []int)) {
	via = c.pipes(via)
	topo := c.topo.Load()
	// One allocation per call, not per command; the commands themselves
	// come from a pool: they are the bulk of passthrough's garbage.
	b := &fwdBatch{replies: replies, done: done, idx: make([]int, len(cmds)), fs: takeForwarded(len(cmds))}
	b.left.Store(int64(len(cmds)))
	fs := *b.fs
	for i := range cmds {
		b.idx[i] = i
		f := &fs[i]
		*f = forwarded{c: c, via: via, cmd: cmds[i].Cmd, replies: max(cmds[i].Replies, 1), blocked: cmds[i].Blocked, pin: cmds[i].Pin, unpin: cmds[i].Unpin, resp3: cmds[i].RESP3, slot: cmds[i].Slot, scriptsGen: cmds[i].ScriptsGen, flush: cmds[i].Flush, watched: cmds[i].Watched, batch: b, i: i}
		if cmds[i].Own && f.blocked == nil {
			f.blocked = &Blocked{bounded: true}
		}
		if cmds[i].LoadsScript {
			if body, ok := scriptLoadBody(f.cmd); ok {
				f.loading = c.loadingScript(body, f.scriptsGen)
			}
		}
		addr := cmds[i].Addr
		if cmds[i].Primary && f.slot == AnySlot && addr == "" && f.pin == nil {
			// A keyless command that may write: to a primary of sluice's
			// choosing, by a slot of it, so that it is checked there.
			addr, f.slot = anyPrimary(topo)
		}
		if addr == "" {
			addr = c.addrOf(topo, f.slot)
		}
		if cmds[i].Pin != nil && cmds[i].Slot == AnySlot {
			// Not any primary: a transaction without keys sent to another
			// than the pin's would run there, unwatched.
			addr = cmds[i].Pin.addr()
		}
		if cmds[i].ReadOnly && c.cfg.ReadFromReplicas {
			if ra := c.replicaOf(topo, addr); ra != "" {
				addr, f.readonly = ra, true
			}
		}
		if addr == "" {
			f.answer(errReply("CLUSTERDOWN sluice has no slot map of the cluster yet"))
			continue
		}
		if cmds[i].Primary && f.slot != AnySlot && f.replies == 1 && f.blocked == nil && f.pin == nil {
			// Checked once it has a node: an answer of sluice's own
			// (CLUSTERDOWN above) has no check behind it.
			f.cmd, f.replies, f.check = slices.Concat(f.cmd, c.ownsCheck(f.slot)), 2, true
		}
		c.sendTo(addr, f)
	}
}

// sendTo sends f to the node at addr: on the node's shared connection, on
// one of its own when it may block, or on its client's pinned one (WATCH),
// which a redirect or a NOSCRIPT replay leaves.
func (c *Cluster) sendTo(addr string, f *forwarded) {
	f.addr = addr
	if f.blocked != nil {
		go c.sendBlocking(addr, f)
		return
	}
	first := f.redirects == 0 && !f.replayed
	if f.pin != nil && first {
		f.pin.send(f, addr)
		return
	}
	if f.via != nil && f.pin == nil && first {
		// A redirect or a replay (rare) goes on sluice's shared
		// connection below, answered on its reader's goroutine.
		f.via.Pipe(addr, f.resp3, f.readonly).send(f)
		return
	}
	c.backend(addr, f.resp3, f.readonly).send(f)
}

// replicaOf is a replica of the primary at addr, in turn, passing over
// those that failed a read in the last replicaRest; "" when it has none
// left.
func (c *Cluster) replicaOf(t *topology, addr string) string {
	if t == nil {
		return ""
	}
	rs := t.replicas[addr]
	if len(rs) == 0 {
		return ""
	}
	first, now := c.nextReplica.Add(1), time.Now().UnixNano()
	for i := range uint64(len(rs)) {
		r := rs[(first+i)%uint64(len(rs))]
		if at, ok := c.replicaDown.Load(r); !ok || now-at.(int64) > int64(replicaRest) {
			return r
		}
	}
	return ""
}

// replicaRest is how long a replica that failed a read gets no other:
// until the cluster drops a dead one from its slot map
// (cluster-node-timeout, 15 s by default) each read sent to it would
// wait for a refused connection, or the forward timeout.
const replicaRest = time.Second

// readAgain sends f, a read a replica could not answer (its connection
// failed, before or after f was sent), to its slot's primary, or any
// primary for a keyless one: a read runs again without harm. false when
// there is no primary to send it to.
func (f *forwarded) readAgain(replica string) bool {
	if !f.readonly || f.c == nil || f.onPin || f.blocked != nil {
		return false
	}
	f.c.replicaDown.Store(replica, time.Now().UnixNano())
	return f.readOnPrimary(replica)
}

// readOnPrimary sends f, a read the replica it was sent to refused, to a
// primary as readAgain does, without passing over that replica.
func (f *forwarded) readOnPrimary(replica string) bool {
	if !f.readonly || f.c == nil || f.onPin || f.blocked != nil {
		return false
	}
	primary := f.c.addrOf(f.c.topo.Load(), f.slot)
	if primary == "" || primary == replica {
		return false
	}
	f.readonly = false
	f.c.sendTo(primary, f)
	return true
}

// maxBlocking is ClusterConfig.MaxBlocking with its default.
func (c *Cluster) maxBlocking() int64 {
	if c.cfg.MaxBlocking > 0 {
		return int64(c.cfg.MaxBlocking)
	}
	return 1000
}

// idleBlocking is how many connections for blocking commands a node keeps
// between uses, in each of its pools (poolKey: per protocol, and whether
// they read from a replica).
const idleBlocking = 8

// sendBlocking runs f on a connection of its own, from the node's idle
// ones or a new one, and keeps the connection for the next blocking
// command if it is still sound.
func (c *Cluster) sendBlocking(addr string, f *forwarded) {
	if c.blocking.Add(1) > c.maxBlocking() {
		c.blocking.Add(-1)
		f.finish(errReply(fmt.Sprintf("ERR sluice: %d blocking commands are waiting already (--max-blocking)", c.maxBlocking())))
		return
	}
	pool := poolKey(addr, f.resp3, f.readonly)
	conn, br := c.idleConn(pool)
	if conn == nil {
		var err error
		if conn, br, err = c.dial(addr, f.resp3, f.readonly, 4<<10, dialTimeout); err != nil {
			c.blocking.Add(-1)
			fail([]*forwarded{f}, addr, err)
			return
		}
	}
	waits := f.blocked.use(conn, c.forwardTimeout())
	if !waits && f.blocked.abandoned() {
		c.keepConn(pool, conn, br)
		c.blocking.Add(-1)
		f.blocked.end(f)
		return
	}
	cmd, n := f.cmd, f.replies
	if !waits {
		// In a transaction a blocking command does not wait.
		cmd, n = slices.Concat(multiCmd, f.cmd, execCmd), n+2
	}
	if f.asking {
		cmd, n = append(slices.Clip(askingCmd), cmd...), n+1
	}
	var r, queued []byte
	_, err := conn.Write(cmd)
	if err == nil && waits {
		f.blocked.wrote()
	}
	if err == nil && f.blocked.bounded {
		err = conn.SetReadDeadline(time.Now().Add(c.forwardTimeout()))
	}
	for ; err == nil && n > 0; n-- {
		queued = r
		r, err = reply.Read(br, nil)
	}
	// Cancel shut the connection's write side (Abort closed it): a reply
	// read whole, before the node saw that, is the answer, as Redis's to
	// a client that had not gone yet, rather than an element lost.
	moved, ask := isRedirectReply(r)
	sound := f.blocked.release(err != nil || !moved && !ask) || !waits
	if err == nil && f.blocked.bounded && conn.SetReadDeadline(time.Time{}) != nil {
		// Not kept for blocking commands, which wait as long as they ask.
		sound = false
	}
	switch {
	case err != nil:
		conn.Close()
	case sound:
		c.keepConn(pool, conn, br)
	default:
		conn.Close()
	}
	// Its place under --max-blocking is let go before it is answered (or
	// redirected): its client, or the redirect, may send the next at once.
	c.blocking.Add(-1)
	switch {
	case err != nil && !sound:
		f.blocked.end(f)
		return
	case err != nil:
		fail([]*forwarded{f}, addr, err)
		return
	}
	if !waits {
		if r = ranAtOnce(r, queued); r == nil {
			f.blocked.end(f)
			return
		}
	}
	f.answer(r)
}

var (
	multiCmd = []byte("*1\r\n$5\r\nMULTI\r\n")
	execCmd  = []byte("*1\r\n$4\r\nEXEC\r\n")
)

// ranAtOnce is a blocking command's answer from the replies to it run in
// a transaction, EXEC's and the one to queuing it; nil if it would have
// waited (its answer in a transaction is a null): Redis would have
// ended that wait with the client. Refused when queued (MOVED, ASK,
// TRYAGAIN), EXEC answers EXECABORT: the refusal is the answer, and a
// redirect is followed.
func ranAtOnce(exec, queued []byte) []byte {
	r, ok := bytes.CutPrefix(exec, []byte("*1\r\n"))
	switch {
	case !ok && len(queued) > 0 && queued[0] == '-':
		return queued
	case !ok:
		return exec
	case string(r) == "*-1\r\n" || string(r) == "$-1\r\n" || string(r) == "_\r\n":
		return nil
	}
	return r
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// idleConn takes a sound idle blocking connection of pool, or nil. Those
// the node closed meanwhile (idleSound) are closed and forgotten.
func (c *Cluster) idleConn(pool string) (net.Conn, *bufio.Reader) {
	var closed []net.Conn
	defer func() {
		for _, conn := range closed {
			conn.Close()
		}
	}()
	c.mu.Lock()
	defer c.mu.Unlock()
	for {
		idle := c.idle[pool]
		if len(idle) == 0 {
			return nil, nil
		}
		ic := idle[len(idle)-1]
		c.idle[pool] = idle[:len(idle)-1]
		if ic.br.Buffered() == 0 && idleSound(ic.conn) {
			return ic.conn, ic.br
		}
		closed = append(closed, ic.conn)
	}
}

// keepConn keeps a blocking connection for reuse, or closes it.
func (c *Cluster) keepConn(pool string, conn net.Conn, br *bufio.Reader) {
	c.mu.Lock()
	if len(c.idle[pool]) < idleBlocking && c.ctx.Err() == nil {
		c.idle[pool] = append(c.idle[pool], idleConn{conn, br})
		conn = nil
	}
	c.mu.Unlock()
	if conn != nil {
		conn.Close()
	}
}

type idleConn struct {
	conn net.Conn
	br   *bufio.Reader
}

// Primaries are the first slot of each primary, in slot order: an order
// that a failover keeps (the promoted replica takes its primary's slots,
// and so its place), which SCAN's cursors, numbering the primaries, need.
func (c *Cluster) Primaries() []int {
	t := c.topo.Load()
	if t == nil {
		return nil
	}
	seen := map[*shard]bool{}
	var slots []int
	for sl := range slot.Count {
		if s := t.owner(sl); s != nil && !seen[s] {
			seen[s] = true
			slots = append(slots, sl)
		}
	}
	return slots
}

// Replicas are the addresses of the replicas that forwarded reads go to
// (ClusterConfig.ReadFromReplicas), sorted; none without it. A read-only
// script (EVAL_RO, FCALL_RO) runs on one of them, where its KILL must go.
func (c *Cluster) Replicas() []string {
	t := c.topo.Load()
	if t == nil || !c.cfg.ReadFromReplicas {
		return nil
	}
	var addrs []string
	for _, rs := range t.replicas {
		addrs = append(addrs, rs...)
	}
	slices.Sort(addrs)
	return addrs
}

// addrOf is the primary that owns sl, "" without a slot map.
func (c *Cluster) addrOf(t *topology, sl int) string {
	if t == nil {
		return ""
	}
	if sl == AnySlot {
		if s := pickPrimary(t); s != nil {
			return s.addr
		}
		return ""
	}
	if s := t.owner(sl); s != nil {
		return s.addr
	}
	return ""
}

// unreachable marks the primary at addr unhealthy when a connection to it
// is refused or times out. Without THROTTLE traffic to its shard nothing
// else would: a keyless command (TIME, CONFIG GET) would go on picking it
// among the primaries, and fail, until the node is back. The probe says
// when it is.
func (c *Cluster) unreachable(addr string, err error) {
	var ne net.Error
	if !errors.Is(err, syscall.ECONNREFUSED) && !errors.Is(err, syscall.EHOSTUNREACH) && !(errors.As(err, &ne) && ne.Timeout()) {
		return // not the node's doing: sluice out of descriptors, say
	}
	c.mu.Lock()
	s := c.shards[addr]
	c.mu.Unlock()
	if s != nil {
		c.fault(s, err)
	}
}

// pickPrimary is the primary a keyless command goes to, nil without
// one. Keyless commands are spread over the primaries by time: they are
// rare, and any primary answers them alike, so one known to be unhealthy
// is passed over while another is not.
func pickPrimary(t *topology) *shard {
	n := len(t.primaries)
	if n == 0 {
		return nil
	}
	first := int(time.Now().UnixNano() % int64(n))
	for i := range n {
		if s := t.primaries[(first+i)%n]; s.healthy.Load() {
			return s
		}
	}
	return t.primaries[first]
}

// isPrimaryIn reports whether the slot map t has a primary at addr.
func isPrimaryIn(t *topology, addr string) bool {
	if t == nil {
		return false
	}
	for _, s := range t.primaries {
		if s.addr == addr {
			return true
		}
	}
	return false
}

// anyPrimary is a primary picked as addrOf picks one for AnySlot, and a
// slot it owns by the slot map t (AnySlot if t knows of none); "" and
// AnySlot without a slot map.
func anyPrimary(t *topology) (addr string, sl int) {
	if t == nil {
		return "", AnySlot
	}
	s := pickPrimary(t)
	if s == nil {
		return "", AnySlot
	}
	if lo, ok := t.lowest[s]; ok {
		return s.addr, lo
	}
	return s.addr, AnySlot
}

// backend is sluice's connection to the node at addr for forwarded
// commands, made on first use and kept.
func (c *Cluster) backend(addr string, resp3, readonly bool) *backend {
	key := poolKey(addr, resp3, readonly)
	c.mu.Lock()
	defer c.mu.Unlock()
	b := c.backends[key]
	if b == nil {
		b = &backend{c: c, addr: addr, resp3: resp3, readonly: readonly}
		c.backends[key] = b
	}
	return b
}

// dropGone forgets the forwarding connections, and the idle blocking
// ones, to the nodes that t no longer names (removed from the cluster,
// or moved to a new address, left running), the idle blocking ones their
// node closed, and the replicas' rests that ended: kept, they would pile
// up as nodes are replaced. A backend with commands queued or in flight
// is left to finish, and looked at again at the next map. c.mu is held;
// the connections returned are for the caller to close once it is let
// go.
func (c *Cluster) dropGone(t *topology) []net.Conn {
	var gone []net.Conn
	for key, b := range c.backends {
		if !t.gone(b.addr) {
			continue
		}
		b.mu.Lock()
		if idle := len(b.queue) == 0 && b.sent.len() == 0 && !b.writing; idle {
			// A caller that took b from the map before this sends on the
			// map's next one (send).
			b.gone = true
			if b.conn != nil {
				gone = append(gone, b.conn)
				b.conn = nil
			}
			delete(c.backends, key)
		}
		b.mu.Unlock()
	}
	for pool, conns := range c.idle {
		if addr, _, _ := strings.Cut(pool, " "); t.gone(addr) {
			for _, ic := range conns {
				gone = append(gone, ic.conn)
			}
			delete(c.idle, pool)
			continue
		}
		// Those the node closed (a primary demoted closes the ones it
		// answered UNBLOCKED; a node killed, or its timeout) would
		// otherwise be found only when next taken, which a node that
		// stays a replica never is: each held an fd in CLOSE-WAIT.
		sound := conns[:0]
		for _, ic := range conns {
			if ic.br.Buffered() == 0 && idleSound(ic.conn) {
				sound = append(sound, ic)
			} else {
				gone = append(gone, ic.conn)
			}
		}
		clear(conns[len(sound):])
		c.idle[pool] = sound
	}
	// A rest that ended counts as none (replicaOf).
	now := time.Now().UnixNano()
	c.replicaDown.Range(func(r, at any) bool {
		if now-at.(int64) > int64(replicaRest) {
			c.replicaDown.CompareAndDelete(r, at)
		}
		return true
	})
	return gone
}

// poolKey names a node's connections of one protocol, and whether they
// read from a replica.
func poolKey(addr string, resp3, readonly bool) string {
	if resp3 {
		addr += " resp3"
	}
	if readonly {
		addr += " readonly"
	}
	return addr
}

// readonlyCmd lets a connection read from a replica.
var readonlyCmd = []byte("*1\r\n$8\r\nREADONLY\r\n")

// hello3 switches a connection to RESP3.
var hello3 = []byte("*2\r\n$5\r\nHELLO\r\n$1\r\n3\r\n")

// dialTimeout bounds connecting to a node and its handshake.
const dialTimeout = time.Second

// dial connects to a node: over TLS and authenticated when the cluster
// asks for that (ClusterConfig.TLS, Username, Password), in RESP3 when
// asked, and READONLY (to read from a replica) when asked. timeout bounds
// the connecting and the handshake.
func (c *Cluster) dial(addr string, resp3, readonly bool, bufSize int, timeout time.Duration) (net.Conn, *bufio.Reader, error) {
	d := &net.Dialer{Timeout: timeout}
	var conn net.Conn
	var err error
	if c.cfg.TLS != nil {
		conn, err = tls.DialWithDialer(d, "tcp", addr, c.cfg.TLS)
		if err == context.DeadlineExceeded {
			// A handshake out of the dial's time is said with a context's
			// bare error, which fault would take for a call's deadline and
			// word as the backend timeout, without the address. Unanswered,
			// as an AUTH below: nothing was written (notSent).
			err = notSent{fmt.Errorf("tls handshake with %s: %w", addr, os.ErrDeadlineExceeded)}
		}
	} else {
		conn, err = d.Dial("tcp", addr)
	}
	if err != nil {
		c.unreachable(addr, err)
		return nil, nil, err
	}
	br := bufio.NewReaderSize(conn, bufSize)
	conn.SetDeadline(time.Now().Add(timeout))
	for _, step := range []struct {
		on   bool
		name string
		cmd  []byte
		want byte
	}{
		{c.cfg.Password != "", "AUTH", c.authCmd(), '+'},
		{resp3, "HELLO 3", hello3, '%'},
		{readonly, "READONLY", readonlyCmd, '+'},
	} {
		if !step.on {
			continue
		}
		_, err := conn.Write(step.cmd)
		var r []byte
		if err == nil {
			r, err = reply.Read(br, nil)
		}
		if err != nil {
			// A node that takes connections but does not answer (paused,
			// or its host swamped) is down to a cluster client as one
			// that refuses them. One that answers with a refusal
			// (WRONGPASS) is not: retrying would not help.
			err = notSent{err}
		}
		if err == nil && (len(r) == 0 || r[0] != step.want) {
			// The reply, never the command: AUTH's holds the password.
			err = fmt.Errorf("router: %s to %s answered %q", step.name, addr, bytes.TrimRight(r[:min(len(r), 128)], "\r\n"))
		}
		if err != nil {
			conn.Close()
			return nil, nil, err
		}
	}
	conn.SetDeadline(time.Time{})
	return conn, br, nil
}

// authCmd is the AUTH a new connection sends first: AUTH user pass for an
// ACL user, AUTH pass for the default one.
func (c *Cluster) authCmd() []byte {
	args := [][]byte{[]byte("AUTH"), []byte(c.cfg.Password)}
	if c.cfg.Username != "" {
		args = [][]byte{args[0], []byte(c.cfg.Username), args[1]}
	}
	return AppendCommand(nil, args)
}

// closeBackends closes every forwarding connection.
func (c *Cluster) closeBackends() {
	c.mu.Lock()
	bs, idle := c.backends, c.idle
	c.backends, c.idle = map[string]*backend{}, map[string][]idleConn{}
	c.mu.Unlock()
	for _, conns := range idle {
		for _, ic := range conns {
			ic.conn.Close()
		}
	}
	for _, b := range bs {
		b.mu.Lock()
		conn := b.conn
		b.mu.Unlock()
		if conn != nil {
			b.broken(conn, errors.New("sluice is closing"))
		}
	}
}

// forwarded is one command on its way through a backend connection.
type forwarded struct {
	c         *Cluster
	via       Pipes // the caller's event loop's connections, or nil
	cmd       []byte
	asking    bool // send ASKING first: the slot is being imported there
	redirects int
	blocked   *Blocked // a blocking command's own connection
	pin       *Pin     // its client's own connection
	readonly  bool     // sent to a replica, on a READONLY connection
	unpin     bool     // the last command on it
	resp3     bool     // on a RESP3 connection
	replies   int      // how many replies cmd gets
	expect    int      // replies still to come, ASKING's included
	discarded []byte   // the reply of a transaction's command that made the node discard it
	queued    bool     // the node queued a command of its transaction
	onPin     bool     // counted in its pin's commands in flight
	replayed  bool     // an EVALSHA sent again as EVAL after NOSCRIPT
	loading   string   // a SCRIPT LOAD's: the SHA1 of its script (loadingScript)
	slot      int      // its keys' slot, or AnySlot
	addr      string   // the node it was sent to
	sentAt    time.Time
	// start and end: where its bytes begin and end in all that its pipe
	// writes (Pipe.written); on a backend, end only (backend.written).
	start, end int64
	batch      *fwdBatch // where its reply goes: batch.replies[i]
	i          int
	bucket     *bucketCall // or a script call of bucket steps, on a loop's pipe
	// check: cmd ends with ownsCheck (Forward.Primary), whose reply is
	// the last; ran is the command's own, the answer.
	check bool
	ran   []byte
	// scriptsGen is Forward.ScriptsGen.
	scriptsGen uint64
	flush      *ScriptsFlush // Forward.Flush, until its reply waits for it
	watched    bool          // Forward.Watched
}

// fwdBatch is the commands of one Forward call.
type fwdBatch struct {
	replies [][]byte
	done    func(idx []int)
	// idx[i] == i: done's argument for command i, without an allocation.
	// Not pooled with fs: the caller may keep it past done.
	idx  []int
	fs   *[]forwarded
	left atomic.Int64 // commands not finished yet: fs goes back at 0
}

// finish hands the command's reply to its caller, once. It is the last
// that touches f: the batch's last finish gives f back to the pool, so
// whoever finishes a command reads what it needs of it before.
func (f *forwarded) finish(r []byte) {
	if fl := f.flush; fl != nil {
		f.flush = nil
		if fl.hold(f, r) {
			return
		}
	}
	if f.loading != "" {
		f.c.loadedScript(f.loading, r)
	}
	if f.onPin {
		f.onPin = false
		defer f.pin.answered()
	}
	b, i := f.batch, f.i
	b.replies[i] = r
	b.done(b.idx[i : i+1 : i+1])
	if b.left.Add(-1) == 0 {
		giveForwarded(b.fs)
	}
}

// forwardedPool holds the commands of finished Forward calls.
var forwardedPool sync.Pool // of *[]forwarded

// takeForwarded is room for n commands, from the pool.
func takeForwarded(n int) *[]forwarded {
	p := fromPool[forwarded](&forwardedPool, n)
	*p = (*p)[:n] // zero: what goes back is cleared
	return p
}

// fromPool is an empty slice with room for n, from pool. A pool holds
// pointers to the slices, which go back and forth without an allocation.
func fromPool[T any](pool *sync.Pool, n int) *[]T {
	p, _ := pool.Get().(*[]T)
	if p == nil {
		p = new([]T)
	}
	if cap(*p) < n {
		*p = make([]T, 0, n)
	}
	*p = (*p)[:0]
	return p
}

// giveForwarded puts fs back, without the pins, clients' commands and
// connections it points to.
func giveForwarded(fs *[]forwarded) {
	clear(*fs)
	forwardedPool.Put(fs)
}

// ownsCheck is a command that a node answers MOVED unless it owns slot
// sl as a primary (on a connection not made READONLY), and that changes
// nothing: EXISTS of a key of sl.
func (c *Cluster) ownsCheck(sl int) []byte {
	key := probePrefix + "{" + c.tags[sl] + "}"
	return AppendCommand(nil, [][]byte{[]byte("EXISTS"), []byte(key)})
}

// answer hands the command's reply back, after following a redirect.
func (f *forwarded) answer(r []byte) {
	if f.bucket != nil {
		f.bucket.answer(r)
		return
	}
	if f.readonly && (bytes.HasPrefix(r, []byte("-LOADING ")) || bytes.HasPrefix(r, []byte("-MASTERDOWN "))) && f.readAgain(f.addr) {
		// The replica cannot serve reads (loading, or its link to the
		// primary down with replica-serve-stale-data no): the primary
		// can, as for a replica that cannot be reached.
		return
	}
	if f.readonly && isReadOnlyReply(r) && f.readOnPrimary(f.addr) {
		// A read-only script whose flags allow writes (EVAL_RO of a
		// shebang without no-writes, FCALL_RO of such a function), sent
		// without keys, which a replica refuses before running it: a
		// node answers it with the primary's refusal, READONLY would
		// have cluster clients retry it as after a failover.
		return
	}
	if f.discarded != nil {
		// The node discarded the transaction (EXEC answered EXECABORT,
		// though its client saw only QUEUED) for a command's MOVED or
		// ASK, which the whole block follows, or TRYAGAIN (its keys are
		// split between the two nodes of a slot being migrated), which is
		// the answer: cluster clients retry it.
		r, f.discarded = f.discarded, nil
		if _, ask := isRedirectReply(r); ask && f.queued {
			// A command was queued, its key still on the source, and
			// another's asked for on the target: the keys are split
			// between the two nodes of a migrating slot, which Redis
			// answers TRYAGAIN. Followed, the block could run on the
			// target once a MIGRATE moved the rest, after the commands
			// the client sent behind it had run on the source. (A
			// keyless command queued, PING, is taken for a key: the
			// answer is then TRYAGAIN where following would have run.)
			r = tryAgainReply
		}
	}
	if f.check {
		// r is the check's: MOVED if the node no longer owns the slot
		// (ASK is of a key, during a migration: the node still owns it).
		// A slot moved by a resharding, from a primary to another that
		// the slot map has as primaries both, is no failover: the node
		// that ran the command is a primary, and its answer stands (sent
		// again, the command would run twice).
		if moved, _ := isRedirectReply(r); moved && f.redirects < maxRedirects {
			f.c.stale.Store(true) // the slot map is behind
			if addr, ok := redirectAddr(r, f.addr); ok && !(isPrimaryIn(f.c.topo.Load(), f.addr) && isPrimaryIn(f.c.topo.Load(), addr)) {
				f.redirects++
				f.ran = nil
				f.c.sendTo(addr, f)
				return
			}
		}
		r, f.ran = f.ran, nil
	}
	moved, ask := isRedirectReply(r)
	if ask && f.onPin && f.replies == 1 && f.redirects < maxRedirects {
		// Its keys have left the source of a slot being migrated: a WATCH
		// watches them where they are, on the pin's connection to the
		// importing node, and a command of the client's meeting the same
		// ASK follows there, behind it, as on one connection (its write
		// to a watched key must come after the WATCH).
		if addr, ok := redirectAddr(r, f.addr); ok {
			if b := f.pin.asked(addr, isWatch(f.cmd)); b != nil {
				f.redirects++
				f.asking, f.addr = true, addr
				b.send(f)
				return
			}
		}
	}
	if (moved || ask) && f.onPin && (f.replies > 1 || isWatch(f.cmd)) {
		// The client's watches live on its pinned connection, whose node
		// no longer holds this key. WATCH followed elsewhere would watch
		// it on a connection that other clients share, and the
		// transaction would run unwatched: the watch is lost instead, and
		// the transaction aborted as one whose watched key changed (the
		// key did change on that node: it left).
		f.pin.lose()
		if moved {
			f.c.stale.Store(true) // the slot map is behind
		}
		if f.replies > 1 {
			f.finish(nullArray(f.resp3))
		} else {
			f.finish(okReply)
		}
		return
	}
	if (moved || ask) && f.redirects < maxRedirects {
		if addr, ok := redirectAddr(r, f.addr); ok {
			f.redirects++
			f.asking = ask
			if moved {
				f.c.stale.Store(true) // the slot map is behind
			}
			f.c.sendTo(addr, f)
			return
		}
	}
	if !f.readonly && f.c != nil && len(r) > 0 && (r[0] == '-' && isReadOnlyReply(r) ||
		f.replies > 1 && r[0] == '*' && bytes.Contains(r, []byte("\r\n-READONLY "))) {
		// A write that reached a replica where sluice's slot map has a
		// primary (a keyless command's or transaction's, or its script's,
		// after a failover): read the map now, not at the next periodic
		// reading.
		f.c.stale.Store(true)
	}
	// Redis's own words: a script's error reply may begin NOSCRIPT too,
	// and the script then ran.
	if bytes.HasPrefix(r, []byte("-NOSCRIPT No matching script")) && !f.replayed {
		if sha, ok := evalshaSHA(f.cmd); ok {
			// A node that lost the script (a promoted replica, a restart,
			// SCRIPT FLUSH): run it from its text, if any sluice saw it
			// loaded, or else answer the node's NOSCRIPT.
			f.c.scriptText(sha, func(body string, ok bool) {
				if !ok {
					f.finish(r)
					return
				}
				f.cmd, f.replayed = evalWith(f.cmd, body), true
				f.c.sendTo(f.addr, f)
			})
			return
		}
	}
	if len(r) > 0 && !f.replayed {
		// The node cached the script EVAL ran, as Redis caches it: an
		// EVALSHA of it, sent where its keys are, may meet a primary
		// that never ran it.
		if body, ok := evalBody(f.cmd); ok && (r[0] != '-' || raisedBy(r, body)) {
			f.c.rememberRan(body, f.scriptsGen)
		}
	}
	f.finish(r)
}

// evalBody is the script of an EVAL (or EVAL_RO) encoded as AppendCommand
// encodes it.
func evalBody(cmd []byte) ([]byte, bool) {
	_, rest, ok := bytes.Cut(cmd, []byte("\r\n")) // the array header
	switch {
	case !ok:
		return nil, false
	case len(rest) > 10 && bytes.EqualFold(rest[:10], []byte("$4\r\nEVAL\r\n")):
		rest = rest[10:]
	case len(rest) > 13 && bytes.EqualFold(rest[:13], []byte("$7\r\nEVAL_RO\r\n")):
		rest = rest[13:]
	default:
		return nil, false
	}
	return bulkAt(rest)
}

// bulkAt is the bulk string at the start of b.
func bulkAt(b []byte) ([]byte, bool) {
	head, body, ok := bytes.Cut(b, []byte("\r\n"))
	if !ok || len(head) < 2 || head[0] != '$' {
		return nil, false
	}
	n, err := strconv.Atoi(string(head[1:]))
	if err != nil || n < 0 || n > len(body) {
		return nil, false
	}
	return body[:n], true
}

// raisedBy reports whether r is an error that script body raised as it
// ran (Redis 7 names the script in it): the node compiled and cached
// the script, as it does not one refused before it ran (a compile
// error, CROSSSLOT, BUSY, ...), which replayed as EVAL would answer
// other than the NOSCRIPT Redis answers its EVALSHA.
func raisedBy(r, body []byte) bool {
	return bytes.Contains(r, []byte(" script: "+shaOf(body)+", on @user_script:"))
}

var okReply = []byte("+OK\r\n")

// queuedReply is a node's answer to a command it queued in a transaction.
var queuedReply = []byte("+QUEUED\r\n")

// tryAgainReply is Redis Cluster's answer to keys split between the two
// nodes of a slot being migrated.
var tryAgainReply = []byte("-TRYAGAIN Multiple keys request during rehashing of slot\r\n")

// nullArray is EXEC's answer to a transaction aborted by a watch.
func nullArray(resp3 bool) []byte {
	if resp3 {
		return []byte("_\r\n")
	}
	return []byte("*-1\r\n")
}

// isWatch reports whether cmd, encoded as AppendCommand encodes it, is a
// WATCH.
func isWatch(cmd []byte) bool { return isCommand5(cmd, "watch") }

// isHelloCmd reports whether cmd is a HELLO (isHello is its reply).
func isHelloCmd(cmd []byte) bool { return isCommand5(cmd, "hello") }

// isCommand5 reports whether cmd, encoded as AppendCommand encodes it, is
// the command of the five-letter name.
func isCommand5(cmd []byte, name string) bool {
	_, rest, ok := bytes.Cut(cmd, []byte("\r\n")) // the array header
	return ok && len(rest) >= 11 && string(rest[:4]) == "$5\r\n" && bytes.EqualFold(rest[4:9], []byte(name))
}

// isReadOnlyReply reports whether r is a replica's refusal of a write,
// or an error reply of a script whose write a replica refused.
func isReadOnlyReply(r []byte) bool {
	return bytes.HasPrefix(r, []byte("-READONLY "))
}

func isRedirectReply(r []byte) (moved, ask bool) {
	return bytes.HasPrefix(r, []byte("-MOVED ")), bytes.HasPrefix(r, []byte("-ASK "))
}

// redirectAddr reads the node of "-MOVED 3999 127.0.0.1:6381\r\n", as
// net.JoinHostPort writes it, as the slot map's addresses are. Redis
// writes "%s:%d" of the node's IP, which for IPv6 ("::1:6381") has no
// brackets: the port is after the last colon. A redirect without a host
// (":6381", from a cluster whose cluster-preferred-endpoint-type is
// unknown-endpoint) is to the host of from, the node that sent it.
func redirectAddr(r []byte, from string) (string, bool) {
	line := string(r)
	if len(line) < 2 || line[len(line)-2:] != "\r\n" {
		return "", false
	}
	line = line[:len(line)-2]
	sp := strings.LastIndexByte(line, ' ')
	if sp <= 0 {
		return "", false
	}
	addr := line[sp+1:]
	colon := strings.LastIndexByte(addr, ':')
	if colon < 0 {
		return "", false
	}
	host, port := addr[:colon], addr[colon+1:]
	if n, err := strconv.ParseUint(port, 10, 16); err != nil || n == 0 {
		return "", false
	}
	if len(host) > 1 && host[0] == '[' && host[len(host)-1] == ']' {
		host = host[1 : len(host)-1]
	}
	if host == "" {
		if host, _, _ = net.SplitHostPort(from); host == "" {
			return "", false
		}
	}
	return net.JoinHostPort(host, port), true
}

func errReply(msg string) []byte { return redcon.AppendError(nil, msg) }

// backend is one pipelined connection to a node: commands are written in
// the order they come, many per write, and replies, which Redis sends in
// the same order, are matched to them first in, first out. A writer and a
// reader goroutine run while there is a connection.
type backend struct {
	c        *Cluster
	addr     string
	resp3    bool // its connection speaks RESP3
	readonly bool // and reads from a replica

	mu      sync.Mutex // guards the fields below
	conn    net.Conn   // nil until dialled, and after it broke
	queue   []*forwarded
	sent    fifo // written, waiting for their replies, in order
	writing bool // the writer goroutine runs
	buf     []byte
	release bool // a pin let go: close the connection once nothing waits
	pin     *Pin // the pin it serves, whose watches end with its connection
	// gone: dropped from the cluster's backends, its node no longer in
	// the slot map (dropGone); what is sent on it goes on a new one.
	gone bool
	// written counts the bytes ever given to its connections to write,
	// which places each command's end (forwarded.end): a long write moves
	// the read deadline on only while the oldest command waiting is still
	// being written (writeLong).
	written int64
}

// Pin is one client's own pipelined connection to a node, for WATCH:
// keys are watched on a connection, so a client's commands from WATCH to
// the end of its transaction must all go on one.
type Pin struct {
	b *backend

	mu       sync.Mutex // guards the fields below
	inflight int        // its commands sent and not answered yet
	exec     *forwarded // the transaction, waiting for them
	execAddr string     // the primary of its slot
	lost     bool       // a WATCH or the transaction met a key its node does not hold
	watched  []int      // the slots of its WATCHes
	watches  int        // its WATCH commands sent
	// ask is its connection to the node importing a slot being migrated,
	// once a WATCH met that slot's ASK (asked): the watch lives there,
	// and a transaction of watched keys only runs there, unless another
	// WATCH did not follow it there (askWatches < watches) and watches on
	// the source.
	ask        *backend
	askWatches int
	// released: its client let it go (Release), perhaps before an ASK
	// its WATCH met is in: no connection is made for that one, which
	// nothing would close.
	released bool
	// switched: its client switched protocol (HELLO, sent on the pin's
	// node only), which a connection to the importing node, dialled in
	// the old one, would not follow: the watch there is lost instead.
	switched bool
}

// Pin makes a client's own connection to the primary of slot sl, dialled
// at its first command.
func (c *Cluster) Pin(sl int, resp3 bool) *Pin {
	p := &Pin{b: &backend{c: c, addr: c.addrOf(c.topo.Load(), sl), resp3: resp3}}
	p.b.pin = p
	return p
}

// addr is the node the pin's connection is to. run moves it under p.mu,
// and run is called on backends' reader goroutines too (a redirected
// command, a transaction let go by its last answer): read under the same
// lock, whichever goroutine moved it.
func (p *Pin) addr() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.b.addr
}

// send sends f, whose slot's primary is at addr by the slot map, on the
// pin's connection. The transaction (MULTI ... EXEC) waits until every
// command before it is answered: a client pipelines WATCH and EXEC, and a
// WATCH that meets a moved key (a lost watch) must be known before the
// transaction may run on the node.
func (p *Pin) send(f *forwarded, addr string) {
	p.mu.Lock()
	if f.replies > 1 && p.inflight > 0 {
		p.exec, p.execAddr = f, addr
		p.mu.Unlock()
		return
	}
	p.mu.Unlock()
	p.run(f, addr)
}

// run sends f; a transaction of a lost watch is aborted, and one on keys
// of another primary than the watched ones runs there, unwatched.
func (p *Pin) run(f *forwarded, addr string) {
	// Read now: once sent, f may be answered, and reused, at any time.
	unpin := f.unpin
	p.mu.Lock()
	if f.replies == 1 && addr != p.b.addr && isWatch(f.cmd) && len(p.watched) == 0 && !p.lost && p.b.down() {
		// The pin's first WATCH, routed by a slot map that moved its slot
		// since Pin read one: nothing is on the pin's node yet, so the pin
		// goes where the keys are now. Kept on the old node, the WATCH
		// met crossNode below and the pin, never dialled, aborted the
		// transaction.
		p.b.mu.Lock()
		p.b.addr = addr
		p.b.mu.Unlock()
	}
	if f.replies == 1 && isHelloCmd(f.cmd) {
		p.switched = true
		p.lost = p.lost || p.ask != nil
	}
	abort := f.replies > 1 && p.lost
	// A transaction of a watch on the importing node runs there, with
	// ASKING, if its keys are all watched ones: the source sent those
	// there, and a source never takes a key of a slot it migrates back.
	// Any other key may still be on the source, where the importing node,
	// asked, would take it for absent: the watch is lost instead.
	var asking *backend
	if f.replies > 1 && !abort && p.ask != nil {
		if f.watched && p.askWatches == p.watches && (addr == p.b.addr || addr == p.ask.addr) {
			asking = p.ask
		} else {
			abort, p.lost = true, true
		}
	}
	elsewhere := f.replies > 1 && !abort && asking == nil && addr != p.b.addr
	if elsewhere && slices.Contains(p.watched, f.slot) {
		// The watched slot itself is on another primary now (a failover,
		// a migration that ended, seen in the slot map before EXEC): the
		// watches on the pin's node count for nothing there, and the
		// transaction must not run unwatched. The watch is lost.
		abort, elsewhere, p.lost = true, false, true
	}
	// A WATCH of keys another primary holds than those watched already:
	// no transaction could use both, and on the pin's node it would meet
	// MOVED and lose every watch, silently.
	crossNode := f.replies == 1 && addr != p.b.addr && isWatch(f.cmd)
	// A WATCH of keys of the node the pin watches on with ASKING, the
	// slot's owner by now (the migration ended): watched there too, not
	// refused CROSSSLOT, and without ASKING, so that a node that does
	// not own them answers MOVED, which loses the watch.
	var toAsk *backend
	if crossNode && p.ask != nil && addr == p.ask.addr && !p.lost {
		toAsk, crossNode = p.ask, false
		p.askWatches++
	}
	// A WATCH after the watch was lost (its connection broke: a node
	// killed, its slots perhaps on a promoted replica by now) can watch
	// nothing that counts, since EXEC aborts: it answers OK, as the lost
	// watches' own did, rather than CROSSSLOT for its node's move or an
	// error of the dead node's, so the client's retry loop goes on to EXEC.
	lostWatch := f.replies == 1 && p.lost && isWatch(f.cmd)
	// A watch lost with its connection has nothing left on the pin's node,
	// which may be dead: with none of the pin's commands in flight, the
	// client's commands go where their keys are, as without a watch (the
	// transaction still aborts), and UNWATCH, the only other command
	// that unpins, has nothing to end.
	gone := f.replies == 1 && p.lost && p.inflight == 0 && p.b.down()
	f.onPin = !abort && !elsewhere && !crossNode && !lostWatch && !gone
	if f.onPin {
		p.inflight++
		if f.replies == 1 && isWatch(f.cmd) {
			p.watches++
			if !slices.Contains(p.watched, f.slot) {
				p.watched = append(p.watched, f.slot)
			}
		}
	}
	p.mu.Unlock()
	switch {
	case asking != nil:
		// Released once the transaction is sent: the connection to the
		// importing node holds the watch.
		p.runAsked(f, asking, unpin)
		return
	case toAsk != nil:
		f.addr = toAsk.addr
		toAsk.send(f)
	case lostWatch, gone && unpin:
		f.finish(okReply)
	case gone:
		// A read Forward sent to a replica needs that replica's READONLY
		// connection: on another the replica answers MOVED.
		p.b.c.backend(addr, f.resp3, f.readonly).send(f)
	case crossNode:
		f.finish(errReply("CROSSSLOT Keys in request don't hash to the same slot"))
	case abort:
		f.finish(nullArray(f.resp3))
	case elsewhere:
		p.b.c.backend(addr, f.resp3, false).send(f)
	default:
		p.b.send(f)
	}
	if unpin {
		// After the send: the connection, which holds the watches, must
		// stay until the transaction is answered.
		p.Release()
	}
}

// runAsked sends f, a transaction of watched keys, to the importing node
// the watch is on, once the source, asked on the pin's connection, still
// sends each watched slot there (ASK), or the importing node owns it
// (MOVED): a migration rolled back (SETSLOT STABLE or NODE on the source,
// a node importing the slot still) puts the keys on the source again,
// written there unseen by the watch, where the transaction on the
// importing node, with ASKING, would not find them. The watch is lost
// instead. Every watched slot is asked, not only the transaction's: a
// write to any watched key aborts it.
func (p *Pin) runAsked(f *forwarded, to *backend, unpin bool) {
	p.mu.Lock()
	slots := slices.Clone(p.watched)
	p.mu.Unlock()
	fs := takeForwarded(len(slots))
	b := &fwdBatch{replies: make([][]byte, len(slots)), idx: make([]int, len(slots)), fs: fs}
	// b.left is counted down after done, which acts on the last answer.
	var left atomic.Int64
	left.Store(int64(len(slots)))
	b.done = func([]int) {
		if left.Add(-1) > 0 {
			return
		}
		from := p.addr()
		sent := true
		for _, r := range b.replies {
			moved, ask := isRedirectReply(r)
			if at, ok := redirectAddr(r, from); !(moved || ask) || !ok || at != to.addr {
				sent = false
			}
		}
		if sent {
			f.asking, f.addr = true, to.addr
			to.send(f)
		} else {
			p.lose()
			f.finish(nullArray(f.resp3))
		}
		if unpin {
			p.Release()
		}
	}
	b.left.Store(int64(len(slots)))
	for i, sl := range slots {
		b.idx[i] = i
		// Redirects spent: the answer is the source's own.
		(*fs)[i] = forwarded{c: p.b.c, cmd: p.b.c.ownsCheck(sl), replies: 1, redirects: maxRedirects, slot: sl, batch: b, i: i}
		p.b.send(&(*fs)[i])
	}
}

// answered counts one of the pin's commands answered, and sends the
// transaction once nothing before it is in flight.
func (p *Pin) answered() {
	p.mu.Lock()
	p.inflight--
	f, addr := p.exec, p.execAddr
	if p.inflight > 0 {
		f = nil
	}
	if f != nil {
		p.exec = nil
	}
	p.mu.Unlock()
	if f != nil {
		p.run(f, addr)
	}
}

// asked is the pin's connection to the node at addr, importing a slot
// whose source answered one of the pin's commands ASK, for that command:
// made for a WATCH, so that the watch lives there; nil when the command
// is to follow the ASK as any other does (the watch, if it is one, lost):
// the pin watches elsewhere. Made too for a WATCH behind one the source
// answered itself, whose transaction aborts all the same (askWatches <
// watches): a client's WATCHes pipelined are all sent before the first
// one's ASK is in, so their count cannot tell that case from WATCHes
// that all follow the ASK.
func (p *Pin) asked(addr string, watch bool) *backend {
	p.mu.Lock()
	defer p.mu.Unlock()
	switch {
	case p.lost, p.released, p.switched:
		return nil
	case p.ask != nil:
		if p.ask.addr != addr {
			return nil
		}
	case !watch:
		return nil
	default:
		p.b.mu.Lock()
		resp3 := p.b.resp3
		p.b.mu.Unlock()
		p.ask = &backend{c: p.b.c, addr: addr, resp3: resp3, pin: p}
	}
	if watch {
		p.askWatches++
	}
	return p.ask
}

func (p *Pin) lose() {
	p.mu.Lock()
	p.lost = true
	p.mu.Unlock()
}

// down reports whether b has no connection and nothing to send or read.
func (b *backend) down() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.conn == nil && len(b.queue) == 0 && b.sent.len() == 0
}

// Protocol makes the pin's connection speak RESP3 or RESP2 should it be
// dialled again: its client switched with HELLO, sent on it.
func (p *Pin) Protocol(resp3 bool) {
	p.mu.Lock()
	bs := []*backend{p.b, p.ask}
	p.mu.Unlock()
	for _, b := range bs {
		if b != nil {
			b.mu.Lock()
			b.resp3 = resp3
			b.mu.Unlock()
		}
	}
}

// Release closes the pin's connection once the replies it waits for are
// in (which ends its WATCH on the node, as closing a connection does).
func (p *Pin) Release() {
	p.b.releaseConn()
	p.mu.Lock()
	p.released = true
	ask := p.ask
	p.mu.Unlock()
	if ask != nil {
		ask.releaseConn()
	}
}

// releaseConn closes b's connection once the replies it waits for are in.
func (b *backend) releaseConn() {
	b.mu.Lock()
	b.release = true
	conn := b.conn
	idle := b.sent.len() == 0 && len(b.queue) == 0
	if idle {
		b.conn = nil
	}
	b.mu.Unlock()
	if idle && conn != nil {
		conn.Close()
	}
}

// A node that holds a forwarded command longer than forwardTimeout
// (ClusterConfig.ForwardTimeout) is taken as hung: its connection is
// closed and every command on it answered an error, rather than leaving
// callers waiting for ever. No command on a shared connection waits at a
// node by design (a blocking one goes on a connection of its own, which
// this bounds only once its client is gone: Blocked), so only a hung node
// or a very slow command reaches it.
func (c *Cluster) forwardTimeout() time.Duration {
	if c.cfg.ForwardTimeout > 0 {
		return c.cfg.ForwardTimeout
	}
	return 10 * time.Second
}

// askingCmd precedes a command sent to a slot's importing node.
var askingCmd = []byte("*1\r\n$6\r\nASKING\r\n")

func (b *backend) send(f *forwarded) {
	b.mu.Lock()
	if b.gone {
		b.mu.Unlock()
		b.c.backend(b.addr, b.resp3, b.readonly).send(f)
		return
	}
	b.queue = append(b.queue, f)
	start := !b.writing
	b.writing = true
	b.mu.Unlock()
	if start {
		go b.write()
	}
}

// write sends what is queued, all of it in one write, until nothing is.
func (b *backend) write() {
	for {
		b.mu.Lock()
		if len(b.queue) == 0 {
			b.writing = false
			b.mu.Unlock()
			return
		}
		if b.conn == nil && b.pin != nil {
			// The pin's connection, and its watches, broke after Pin.run
			// let the transaction through: on a new connection it would
			// run unwatched. It is aborted, as a lost watch's is.
			var aborted []*forwarded
			b.queue = slices.DeleteFunc(b.queue, func(f *forwarded) bool {
				if f.replies > 1 {
					aborted = append(aborted, f)
				}
				return f.replies > 1
			})
			if len(aborted) > 0 {
				b.mu.Unlock()
				b.lostConn()
				for _, f := range aborted {
					f.finish(nullArray(f.resp3))
				}
				continue
			}
		}
		if b.conn == nil {
			resp3 := b.resp3 // a pin's client may switch (Pin.Protocol)
			b.mu.Unlock()
			// The queued commands wait for the handshake: a hung node
			// answers them at --forward-timeout, as on the event loops,
			// not at the handshake's own bound when that is longer.
			conn, br, err := b.c.dial(b.addr, resp3, b.readonly, 16<<10, min(dialTimeout, b.c.forwardTimeout()))
			if err == nil {
				if err = b.c.loadConn(conn, br, b.addr); err != nil {
					conn.Close()
				}
			}
			b.mu.Lock()
			if err != nil {
				failed := b.queue
				b.queue, b.writing = nil, false
				b.mu.Unlock()
				b.lostConn()
				fail(failed, b.addr, err)
				return
			}
			if br.Buffered() > 0 {
				conn.Close()
				failed := b.queue
				b.queue, b.writing = nil, false
				b.mu.Unlock()
				b.lostConn()
				fail(failed, b.addr, errors.New("the node sent what nothing asked for"))
				return
			}
			// Read on through heard, which keeps the node's deadline
			// from the last bytes it sent.
			br.Reset(heard{conn, b.c.forwardTimeout()})
			b.conn = conn
			go b.read(conn, br)
		}
		conn, buf, at := b.conn, b.buf[:0], b.written
		for _, f := range b.queue {
			if f.asking {
				buf = append(buf, askingCmd...)
			}
			buf = append(buf, f.cmd...)
			f.end = at + int64(len(buf))
		}
		b.written += int64(len(buf))
		now := time.Now()
		if b.sent.len() == 0 {
			conn.SetReadDeadline(now.Add(b.c.forwardTimeout()))
		}
		for _, f := range b.queue {
			f.sentAt = now
			f.expect, f.queued = f.replies, false
			if f.asking {
				f.expect++
			}
		}
		b.sent.push(b.queue...)
		clear(b.queue)
		b.queue = b.queue[:0]
		b.mu.Unlock()
		err := b.writeLong(conn, buf, at)
		b.mu.Lock()
		if cap(buf) <= 64<<10 {
			b.buf = buf
		}
		b.mu.Unlock()
		if err != nil {
			b.broken(conn, err)
		}
	}
}

// longWrite is the most of what a backend sends that is written at once.
const longWrite = 1 << 20

// writeLong writes buf, which starts at byte at of all the backend writes,
// longWrite at a time past that length, and moves the connection's read
// deadline on after each part while the oldest command waiting was still
// being written: a node taking a value of many MB a part at a time is
// alive, and its reply is due a timeout after the last part, as on the
// loops (Pipe.Wrote). As there, bytes taken after that command was whole
// count for nothing: a node that holds it (stopped behind buffers that
// take more, a proxy's, say) is hung from its write, however much more
// comes. Looked at under b.mu, where read clears the deadline once
// nothing waits: moved after a command that was answered, meanwhile or
// before its end, it would close an idle connection a timeout later (a
// pin's, with its watches).
func (b *backend) writeLong(conn net.Conn, buf []byte, at int64) error {
	if len(buf) <= longWrite {
		_, err := conn.Write(buf)
		return err
	}
	for len(buf) > 0 {
		n := min(len(buf), longWrite)
		if _, err := conn.Write(buf[:n]); err != nil {
			return err
		}
		buf = buf[n:]
		b.mu.Lock()
		if b.conn == conn && b.sent.len() > 0 && b.sent.all()[0].end > at {
			conn.SetReadDeadline(time.Now().Add(b.c.forwardTimeout()))
		}
		b.mu.Unlock()
		at += int64(n)
	}
	return nil
}

// read matches replies to the commands sent, in order.
func (b *backend) read(conn net.Conn, br *bufio.Reader) {
	for {
		r, err := reply.Read(br, nil)
		if err != nil {
			b.broken(conn, err)
			return
		}
		b.mu.Lock()
		if b.conn != conn {
			b.mu.Unlock()
			b.broken(conn, errors.New("a reply nothing asked for"))
			return
		}
		f, whole, err := matchReply(&b.sent, r)
		if err != nil {
			b.mu.Unlock()
			b.broken(conn, err)
			return
		}
		if !whole {
			b.mu.Unlock()
			continue
		}
		if b.sent.len() == 0 {
			// Nothing waits: the node may say nothing for as long as it
			// likes. (While commands wait, heard keeps the deadline.)
			conn.SetReadDeadline(time.Time{})
		}
		done := b.release && b.sent.len() == 0 && len(b.queue) == 0
		if done {
			b.conn = nil
		}
		b.mu.Unlock()
		f.answer(r)
		if done {
			conn.Close()
			return
		}
	}
}

// heard reads a backend's connection, and puts its read deadline off
// whenever bytes come: a node that sends a reply, or a backlog of them,
// for longer than the forward timeout (one huge value on a slow link, one
// client's pipeline of big values) is not hung while it keeps sending, as
// on a loop's pipe (Pipe.Deadline). A deadline put off after the last
// reply is in is cleared by read, which takes the reply on.
type heard struct {
	conn    net.Conn
	timeout time.Duration
}

func (h heard) Read(p []byte) (int, error) {
	n, err := h.conn.Read(p)
	if n > 0 {
		h.conn.SetReadDeadline(time.Now().Add(h.timeout))
	}
	return n, err
}

// broken closes conn and answers every command it carried an error: none
// of them will get its reply now.
func (b *backend) broken(conn net.Conn, err error) {
	b.mu.Lock()
	var lost []*forwarded
	current := b.conn == conn
	if current {
		b.conn = nil
		lost = b.sent.takeAll()
	}
	b.mu.Unlock()
	conn.Close()
	if current {
		b.lostConn()
	}
	fail(lost, b.addr, err)
}

// lostConn loses a pin's watches with its connection (before the
// commands on it are answered, so that its transaction knows): a new
// connection would run the transaction unwatched.
func (b *backend) lostConn() {
	if b.pin != nil {
		b.pin.lose()
	}
}

// CommandLen is the length of args encoded as a command (AppendCommand).
func CommandLen(args [][]byte) int {
	n := 1 + decimalLen(len(args)) + 2
	for _, a := range args {
		n += 1 + decimalLen(len(a)) + 2 + len(a) + 2
	}
	return n
}

func decimalLen(n int) int {
	d := 1
	for ; n >= 10; n /= 10 {
		d++
	}
	return d
}

// unsentCode is the error code of fail's answer to commands sent nowhere.
const unsentCode = "CLUSTERDOWN"

// Unsent reports whether r is fail's answer to a command that was sent
// nowhere (its node could not be connected to), which a client may retry.
func Unsent(r []byte) bool {
	return bytes.HasPrefix(r, []byte("-"+unsentCode+" sluice: connection to "))
}

// ErrNoReply is the failure of a node that held a command past its
// deadline (hung).
var ErrNoReply = errors.New("no reply within the timeout")

// notSent is a failure to connect met after the TCP connection was made:
// its handshake (TLS, AUTH, HELLO, READONLY, SCRIPT LOAD) got no answer,
// so none of the commands waiting for the connection was written.
type notSent struct{ error }

func (e notSent) Unwrap() error { return e.error }

// NotSent marks err as the failure of a connection that none of the
// commands it fails was written to: the event loop's, still being made
// when their deadline came.
func NotSent(err error) error { return notSent{err} }

func fail(fs []*forwarded, addr string, err error) {
	if len(fs) == 0 {
		return
	}
	code := "ERR"
	var oe *net.OpError
	if errors.As(err, &oe) && oe.Op == "dial" || errors.As(err, new(notSent)) {
		// The node could not be connected to, so nothing was sent: to a
		// cluster client the slot is not served now, as a node answers
		// for a slot whose primary is gone. ioredis, redis-py and
		// go-redis retry CLUSTERDOWN after a pause (and read the slot
		// map, sluice's, which does not change), as they retry a node
		// that refuses connections when they talk to the cluster
		// themselves; an ERR they hand to the application at once. A
		// command that may have run (the connection broke, or the node
		// held it past the timeout) keeps ERR: it is not to be retried
		// blindly.
		code = unsentCode
	}
	why := err.Error()
	if errors.As(err, &oe) && oe.Op == "read" && oe.Timeout() {
		// The goroutine path's read deadline: in the event loops' words,
		// without a local port that changes each time.
		why = ErrNoReply.Error()
	}
	r := errReply(code + " sluice: connection to " + addr + " failed: " + oneLine(why))
	for _, f := range fs {
		if f.bucket != nil {
			f.bucket.lost(err)
			continue
		}
		if f.readAgain(addr) {
			continue
		}
		// A node that cannot be reached may have been replaced: read the
		// slot map at the next tick, not the next periodic read, so that
		// passthrough alone finds a promoted replica as soon as a bucket
		// call would. (f is not to be read once finished.)
		if f.c != nil {
			f.c.stale.Store(true)
		}
		f.finish(r)
	}
}

func oneLine(s string) string {
	b := []byte(s)
	for i, c := range b {
		if c == '\r' || c == '\n' {
			b[i] = ' '
		}
	}
	return string(b)
}

// AppendCommand appends args as one RESP command, as a client sends it.
func AppendCommand(dst []byte, args [][]byte) []byte {
	dst = append(dst, '*')
	dst = strconv.AppendInt(dst, int64(len(args)), 10)
	dst = append(dst, '\r', '\n')
	for _, a := range args {
		dst = redcon.AppendBulk(dst, a)
	}
	return dst
}
