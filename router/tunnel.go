package router

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"maps"
	"net"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/sluice-rl/sluice/router/reply"
	"github.com/sluice-rl/sluice/router/slot"
)

// Tunnel is one subscriber's own connections to the nodes: what the
// client sends goes to a node as it is, and what the nodes send, replies
// and published messages alike, comes back whole as it arrives. A
// subscriber's messages come when they are published, not in answer to a
// command, so they cannot share the pipelined connections.
//
// Channels and patterns go to one node, a primary (PUBLISH reaches every
// node of a cluster): the one a first SUBSCRIBE's channel hashes to
// (homeConn), else any. A shard channel is served only by the primary of
// its slot, so the client gets a connection to each primary its shard
// channels live on, as a cluster client holds one per shard. The client
// sees sluice as one node, and so one connection: the count in a shard
// channel's confirmation, which each node gives for its own connection,
// becomes the client's shard channels on every node, as one node holding
// them all would count them.
//
// A command's replies are followed on every connection it went to by the
// answer to a fence, a PING of a token no client can guess: once a
// command's fences are back, all its replies are, and the tunnel says so
// (in the order the commands were sent), so that the client's later
// replies wait for them as they would from one node.
//
// A fence not back within the cluster's forward timeout ends the tunnel,
// as a lost connection does: the client's commands would otherwise wait
// for a hung node for ever. Only a pending fence is bounded: a subscriber
// may wait for messages for hours.
//
// RESET (Reset) leaves the connections to answer what was sent before it,
// as a node answers a pipeline's subscriptions before its RESET, and then
// closes them; later commands go to new ones.
type Tunnel struct {
	c      *Cluster
	onData func(data []byte, subscribed, answered bool)
	onEnd  func(error)

	mu sync.Mutex // guards the fields below
	// conns are those the client's commands go to: since the tunnel
	// opened, or since its last Reset.
	conns *tunnelConns
	// reset are the connections in use before a Reset, until they have
	// answered what was sent to them before it.
	reset []*tunnelConn
	// pending are the commands not yet answered wholly, in the order sent.
	pending []*tunnelCmd
	// held counts the bytes of the commands' held replies: a node that
	// stays slow must not make the others' pile up without bound.
	held   int
	closed bool // by Close, or when a connection failed
}

// tunnelConns are a tunnel's connections between two resets, and what
// the client is subscribed to on them: a confirmation counts only its
// own.
type tunnelConns struct {
	resp3  bool
	home   *tunnelConn   // channels and patterns; nil until used
	shards []*tunnelConn // shard channels, a connection per node, in the order opened
	// homeSubs is the client's channels and patterns, as home last said;
	// chans and pats split it (CLIENT LIST's sub and psub): each
	// confirmation's count moves by the one channel or pattern it names.
	homeSubs, chans, pats int64
}

func (g *tunnelConns) shardSubs() int64 {
	var n int64
	for _, tc := range g.shards {
		n += tc.count
	}
	return n
}

// shownSubs is the client's shard channels as the confirmations handed
// on to it count them: a node's confirmation held behind an earlier
// command's replies is not counted before its turn.
func (g *tunnelConns) shownSubs() int64 {
	var n int64
	for _, tc := range g.shards {
		n += tc.shown
	}
	return n
}

func (g *tunnelConns) subscribed() bool { return g.homeSubs+g.shardSubs() > 0 }

// tunnelCmd is one command of the client's: answered once the fences
// of every connection it went to are back.
type tunnelCmd struct {
	fences int
	done   bool // answered
	// held is what its connections sent for it, and after it, while an
	// earlier command was not answered: a faster node's replies must not
	// overtake a slower one's to earlier commands.
	held []heldReply
}

// heldReply is a reply held behind an earlier command's. A shard
// channel's confirmation (count, its node's, not -1) is given the
// client's count when handed on: another node may meanwhile have
// confirmed a later command, which the client must not see counted yet.
type heldReply struct {
	r     []byte
	tc    *tunnelConn
	count int64
}

// tunnelConn is one of a tunnel's connections.
type tunnelConn struct {
	addr  string
	set   *tunnelConns // it is of
	conn  net.Conn     // nil until dialled
	done  bool         // closed after a Reset: what it still sends is dropped
	left  bool         // closed as its node left the cluster (leave)
	queue [][]byte     // sent before the connection was up
	// count is the client's shard channels on this node, as it last said;
	// shown, as its last confirmation handed on to the client said.
	count, shown int64
	// sent are the shard commands the node has yet to confirm wholly, in
	// the order sent: what a MOVED answers, and which confirmations are
	// the client's own rather than a resharding's.
	sent []*shardCmd
	// fences are the commands whose fence this connection has yet to
	// answer, in the order sent.
	fences []sentFence
	// last is the command last sent on it: what the node sends after its
	// fence (a message, say) must not overtake that command's replies.
	last *tunnelCmd
	// hellos counts the HELLOs sent on it (SetProtocol) not yet answered:
	// their replies are not the client's.
	hellos int
	// pings are the PINGs sent on it, and on the set's other connections,
	// not yet answered, in the order sent.
	pings []*pingMerge
}

// pingMerge is a PING sent to every connection of a set: which of a
// subscriber's connections are still subscribed when it runs is known only
// then, so the client gets a subscriber's answer if any gave one, as one
// node holding all its subscriptions would answer.
type pingMerge struct {
	left       int
	sub, plain []byte
}

// sentFence is a fence written on a connection, for command of: the
// connection's read deadline is its sentAt plus the forward timeout.
type sentFence struct {
	of     *tunnelCmd
	sentAt time.Time
}

// shardCmd is an SSUBSCRIBE or SUNSUBSCRIBE sent to a node.
type shardCmd struct {
	cmd       []byte
	kind      string
	channels  [][]byte // those not confirmed yet
	all       *unsubAll
	redirects int
	of        *tunnelCmd
}

// unsubAll is an SUNSUBSCRIBE of every shard channel, sent to each of
// the client's shard connections. A node with none answers
// [sunsubscribe, nil, 0]; the client gets that answer once, and only when
// every node gave it, as a node holding all its channels would answer.
type unsubAll struct{ nodes, nulls int }

// errTunnelClosed ends a tunnel its client closed.
var errTunnelClosed = errors.New("router: tunnel closed")

// maxTunnelHeld bounds the replies a tunnel holds behind a slow node's, as
// Redis bounds a subscriber's output (client-output-buffer-limit pubsub).
const maxTunnelHeld = 32 << 20

var errTunnelHeld = errors.New("router: tunnel: replies held behind a slow node past 32 MB")

// Tunnel opens a subscriber's tunnel, in RESP3 when asked; its
// connections are made as commands need them. onData gets each whole
// reply or message, and whether the client still has a subscription
// afterwards; onEnd gets the error that ended a connection of the tunnel,
// which ends them all, once every command sent is answered (an error
// reply for each whose replies did not all come). Both are called one at
// a time, from the tunnel's goroutines (onEnd from Send too), never after
// Close has returned; they must not call the tunnel. answered is set
// (data may then be nil) once all the replies to the oldest command sent
// and not yet answered are delivered: one such call for each command
// sent, in order.
func (c *Cluster) Tunnel(resp3 bool, onData func(data []byte, subscribed, answered bool), onEnd func(error)) *Tunnel {
	t := &Tunnel{c: c, conns: &tunnelConns{resp3: resp3}, onData: onData, onEnd: onEnd}
	c.mu.Lock()
	c.tunnels[t] = struct{}{}
	c.mu.Unlock()
	return t
}

// errNodeLeft ends a tunnel connection to a node that left the cluster.
var errNodeLeft = errors.New("the node left the cluster")

// absent appends to addrs the nodes t is connected to that m does not
// name.
func (t *Tunnel) absent(m *topology, addrs []string) []string {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, tc := range append([]*tunnelConn{t.conns.home}, t.conns.shards...) {
		if tc != nil && tc.conn != nil && !tc.left && m.gone(tc.addr) {
			addrs = append(addrs, tc.addr)
		}
	}
	return addrs
}

// leave closes t's connections to the nodes in left. Closed, such a
// connection ends the tunnel (or is dropped, if it held nothing of the
// client's) as if its node had gone away, and the client, ended as a
// node's client is, subscribes again.
func (t *Tunnel) leave(left map[string]bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return
	}
	for _, tc := range append([]*tunnelConn{t.conns.home}, t.conns.shards...) {
		if tc != nil && tc.conn != nil && !tc.left && left[tc.addr] {
			tc.left = true
			tc.conn.Close()
		}
	}
}

// askLeftEvery is how often a node absent from the slot map that still
// holds subscribers, and did not say it left the cluster, is asked again:
// one emptied of its slots, or failed, may stay so for long.
const askLeftEvery = 5 * time.Second

// absentTunnelNodes are the nodes subscribers' tunnels are connected to
// that the slot map does not name, but for those asked in the last
// askLeftEvery.
func (c *Cluster) absentTunnelNodes(now time.Time) []string {
	m := c.topo.Load()
	c.mu.Lock()
	tunnels := slices.Collect(maps.Keys(c.tunnels))
	c.mu.Unlock()
	var addrs []string
	for _, tun := range tunnels {
		addrs = tun.absent(m, addrs)
	}
	slices.Sort(addrs)
	addrs = slices.Compact(addrs)
	c.mu.Lock()
	defer c.mu.Unlock()
	for addr := range c.stayed {
		if _, ok := slices.BinarySearch(addrs, addr); !ok {
			delete(c.stayed, addr) // named again, or no tunnel holds it
		}
	}
	return slices.DeleteFunc(addrs, func(addr string) bool {
		at, ok := c.stayed[addr]
		return ok && now.Sub(at) < askLeftEvery
	})
}

// closeLeft closes subscribers' tunnel connections to those of addrs
// that left the cluster. A node the slot map does not name may still be
// in it: a primary just demoted, which the other nodes learn of at its
// next ping only, up to half a node timeout later, or one emptied of its
// slots. PUBLISH still reaches such a node over the cluster's bus, and
// Redis keeps its subscribers. One that left (redis-cli --cluster
// del-node resets it: it knows no other node) gets no message again, and
// a subscriber kept on it would wait for ever.
//
// Close waits for it: ended by ctx, it asks no further node, and stops
// waiting for the one it is asking, which may never answer.
func (c *Cluster) closeLeft(ctx context.Context, addrs []string) {
	left := map[string]bool{}
	for _, addr := range addrs {
		if ctx.Err() != nil {
			return
		}
		if c.leftCluster(ctx, addr) {
			left[addr] = true
		} else {
			c.mu.Lock()
			c.stayed[addr] = time.Now()
			c.mu.Unlock()
		}
	}
	if len(left) == 0 {
		return
	}
	c.mu.Lock()
	tunnels := slices.Collect(maps.Keys(c.tunnels))
	c.mu.Unlock()
	for _, tun := range tunnels {
		tun.leave(left)
	}
}

var clusterInfoCmd = []byte("*2\r\n$7\r\nCLUSTER\r\n$4\r\nINFO\r\n")

// leftCluster tells whether the node at addr knows no node but itself:
// reset out of the cluster. One that cannot be asked (down, hung, or its
// ACL user refused CLUSTER INFO) has not, as far as this knows: a node
// that went away is seen by the subscribers' own connections.
func (c *Cluster) leftCluster(ctx context.Context, addr string) bool {
	conn, br, err := c.dial(addr, false, false, 4<<10, dialTimeout)
	if err != nil {
		return false
	}
	defer conn.Close()
	// A node that takes connections but does not answer would hold Close.
	defer context.AfterFunc(ctx, func() { conn.Close() })()
	conn.SetDeadline(time.Now().Add(dialTimeout))
	if _, err := conn.Write(clusterInfoCmd); err != nil {
		return false
	}
	r, err := reply.Read(br, nil)
	return err == nil && bytes.Contains(r, []byte("\r\ncluster_known_nodes:1\r\n"))
}

// Send sends one subscription command, or PING, to the node it is for.
func (t *Tunnel) Send(args [][]byte) error {
	cmd := AppendCommand(nil, args)
	name := string(bytes.ToLower(args[0]))
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return errTunnelClosed
	}
	// Pending before it is written: should a write end the tunnel, the
	// command is answered with the others.
	of := &tunnelCmd{}
	t.pending = append(t.pending, of)
	if err := t.route(name, args, cmd, of); err != nil {
		t.pending = t.pending[:len(t.pending)-1]
		return err
	}
	return nil
}

// route writes cmd, which args are, to the connections it is for; t.mu is
// held. It fails before writing anything, or not at all.
func (t *Tunnel) route(name string, args [][]byte, cmd []byte, of *tunnelCmd) error {
	g := t.conns
	for _, tc := range append([]*tunnelConn{g.home}, g.shards...) {
		// One its node closed, not yet seen by run: a command written on
		// it would fail, and end the tunnel.
		if tc != nil && tc.conn != nil && g.spare(tc) && !idleSound(tc.conn) {
			t.drop(tc)
		}
	}
	switch {
	case (name == "ssubscribe" || name == "sunsubscribe") && len(args) > 1:
		// The node refuses channels of several slots (CROSSSLOT) in
		// order with the connection's other replies.
		addr := t.c.addrOf(t.c.topo.Load(), slot.Of(string(args[1])))
		if addr == "" {
			return errNoSlotMap
		}
		chans := make([][]byte, len(args)-1)
		for i, a := range args[1:] {
			chans[i] = bytes.Clone(a)
		}
		t.sendShard(g, addr, &shardCmd{cmd: cmd, kind: name, channels: chans, of: of})
	case name == "sunsubscribe":
		all := &unsubAll{nodes: len(g.shards)}
		for _, tc := range g.shards {
			tc.sent = append(tc.sent, &shardCmd{cmd: cmd, kind: name, all: all})
			t.writeFenced(tc, cmd, of)
		}
		if all.nodes == 0 {
			// Home has no shard channel: it answers the null confirmation,
			// after what it was sent before.
			all.nodes = 1
			home, err := t.homeConn(AnySlot)
			if err != nil {
				return err
			}
			home.sent = append(home.sent, &shardCmd{cmd: cmd, kind: name, all: all})
			t.writeFenced(home, cmd, of)
		}
	case name == "ping":
		// A node answers PING as a subscriber's only on a connection
		// that subscribes: it goes to each, answered once all have.
		// Every PING is counted on each connection it goes to, also one
		// on a single connection: a pong still on its way there would
		// otherwise be taken for a later PING's, sent once the client
		// has shard channels, and the earlier PING answered nothing.
		conns := slices.DeleteFunc(append([]*tunnelConn{g.home}, g.shards...), func(tc *tunnelConn) bool { return tc == nil || tc.done })
		if len(conns) == 0 {
			home, err := t.homeConn(AnySlot)
			if err != nil {
				return err
			}
			conns = append(conns, home)
		}
		pm := &pingMerge{left: len(conns)}
		for _, tc := range conns {
			tc.pings = append(tc.pings, pm)
			t.writeFenced(tc, cmd, of)
		}
	default:
		sl := AnySlot
		if name == "subscribe" && len(args) > 1 {
			sl = slot.Of(string(args[1]))
		}
		home, err := t.homeConn(sl)
		if err != nil {
			return err
		}
		t.writeFenced(home, cmd, of)
	}
	return nil
}

var errNoSlotMap = errors.New("CLUSTERDOWN sluice has no slot map of the cluster yet")

// homeConn is the connection for channels and patterns, opened at first
// use, on the primary of sl; t.mu is held. A first SUBSCRIBE opens it
// where its first channel's PUBLISH goes (forwarded by the channel's
// slot): a client's PUBLISH and its SUBSCRIBE or UNSUBSCRIBE of that
// channel then run in order on one node, as they do on one connection,
// where on two nodes the message would cross the cluster's bus after
// either.
func (t *Tunnel) homeConn(sl int) (*tunnelConn, error) {
	g := t.conns
	if g.home == nil {
		addr := t.c.addrOf(t.c.topo.Load(), sl)
		if addr == "" {
			return nil, errNoSlotMap
		}
		g.home = &tunnelConn{addr: addr, set: g}
		go t.run(g.home, g.resp3)
	}
	return g.home, nil
}

// sendShard sends a shard command to the node at addr, on a connection
// of g; t.mu is held.
func (t *Tunnel) sendShard(g *tunnelConns, addr string, sc *shardCmd) {
	var tc *tunnelConn
	for _, s := range g.shards {
		if s.addr == addr && !s.done {
			tc = s
		}
	}
	if tc == nil {
		tc = &tunnelConn{addr: addr, set: g}
		g.shards = append(g.shards, tc)
		if g != t.conns {
			// A MOVED to a command sent before a Reset.
			t.reset = append(t.reset, tc)
		}
		go t.run(tc, g.resp3)
	}
	tc.sent = append(tc.sent, sc)
	t.writeFenced(tc, sc.cmd, sc.of)
}

// fence is the PING whose answer follows a command's replies on a
// connection. Its token is drawn at start, so a client cannot send it.
var fence = func() struct{ cmd, token []byte } {
	var b [12]byte
	rand.Read(b[:])
	token := "sluice-fence-" + hex.EncodeToString(b[:])
	return struct{ cmd, token []byte }{
		AppendCommand(nil, [][]byte{[]byte("PING"), []byte(token)}),
		[]byte(token),
	}
}()

// writeFenced writes cmd, one of the client's commands or a part of it,
// on tc, and a fence after it; t.mu is held.
func (t *Tunnel) writeFenced(tc *tunnelConn, cmd []byte, of *tunnelCmd) {
	of.fences++
	now := time.Now()
	if len(tc.fences) == 0 && tc.conn != nil {
		tc.conn.SetReadDeadline(now.Add(t.c.forwardTimeout()))
	}
	tc.fences = append(tc.fences, sentFence{of, now})
	tc.last = of
	t.write(tc, cmd)
	t.write(tc, fence.cmd)
}

// isFence reports whether r answers a fence: "$<n> token", or in a
// RESP2 subscriber's form, [pong, token].
func isFence(r []byte) bool {
	if !bytes.HasPrefix(r, []byte("$")) && !bytes.HasPrefix(r, []byte("*2\r\n$4\r\npong\r\n$")) {
		return false
	}
	n := len(fence.token)
	return len(r) > n+3 && r[len(r)-n-3] == '\n' && bytes.Equal(r[len(r)-n-2:len(r)-2], fence.token)
}

// fenced counts a fence answered on tc, and tells the client of every
// command now answered, oldest first; t.mu is held.
func (t *Tunnel) fenced(tc *tunnelConn) {
	if len(tc.fences) == 0 {
		return
	}
	tc.fences[0].of.fences--
	tc.fences[0] = sentFence{} // or the answered command stays reachable
	tc.fences = tc.fences[1:]
	t.setDeadline(tc)
	if tc.set != t.conns && len(tc.fences) == 0 {
		t.retire(tc)
	}
	for len(t.pending) > 0 && t.pending[0].fences == 0 {
		t.pending[0].done = true
		t.pending[0] = nil
		t.pending = t.pending[1:]
		t.onData(nil, t.conns.subscribed(), true)
		if len(t.pending) > 0 {
			next := t.pending[0]
			for _, h := range next.held {
				t.held -= len(h.r)
				t.hand(h, t.conns.subscribed())
			}
			next.held = nil
		}
	}
}

// setDeadline bounds the wait for tc's oldest fence, or lifts the bound
// when none is pending; t.mu is held.
func (t *Tunnel) setDeadline(tc *tunnelConn) {
	if tc.conn == nil {
		return // never made (unreached): nothing to bound
	}
	if len(tc.fences) > 0 {
		tc.conn.SetReadDeadline(tc.fences[0].sentAt.Add(t.c.forwardTimeout()))
	} else {
		tc.conn.SetReadDeadline(time.Time{})
	}
}

// write writes cmd on tc, or queues it until tc is up; t.mu is held.
func (t *Tunnel) write(tc *tunnelConn, cmd []byte) {
	if tc.conn == nil {
		tc.queue = append(tc.queue, cmd)
		return
	}
	// A hung node that stopped reading would block the write, with t.mu
	// held, once its socket's buffer is full.
	tc.conn.SetWriteDeadline(time.Now().Add(t.c.forwardTimeout()))
	if _, err := tc.conn.Write(cmd); err != nil {
		t.fail(tc, err)
	}
}

func (t *Tunnel) run(tc *tunnelConn, resp3 bool) {
	// A subscription waits for the handshake: a hung node answers it at
	// --forward-timeout, as a forwarded command, when that is shorter.
	conn, br, err := t.c.dial(tc.addr, resp3, false, 16<<10, min(dialTimeout, t.c.forwardTimeout()))
	t.mu.Lock()
	switch {
	case t.closed:
		if conn != nil {
			conn.Close()
		}
		t.mu.Unlock()
		return
	case err != nil:
		if !t.unreached(tc, err) {
			t.fail(tc, err)
		}
		t.mu.Unlock()
		return
	}
	tc.conn = conn
	t.setDeadline(tc)
	for _, cmd := range tc.queue {
		if t.write(tc, cmd); t.closed {
			break
		}
	}
	tc.queue = nil
	t.mu.Unlock()
	for {
		r, err := reply.Read(br, nil)
		t.mu.Lock()
		if t.closed || tc.done {
			t.mu.Unlock()
			return
		}
		if err != nil {
			if tc.left {
				err = errNodeLeft
			}
			if tc.set == t.conns && tc.set.spare(tc) {
				// A node's timeout spares only its subscribers: once the
				// client has unsubscribed, the node may close this
				// connection, which loses the client nothing.
				t.drop(tc)
			} else {
				t.fail(tc, err)
			}
			t.mu.Unlock()
			return
		}
		t.received(tc, r)
		t.mu.Unlock()
	}
}

// unreached answers the commands sent to tc, a connection its node did
// not take (down, its slots not failed over yet), with err, and forgets
// tc: the next command for that node dials again. The client keeps its
// subscriptions elsewhere, as a cluster client keeps its connections to
// the other nodes. Only when each of those commands went to tc alone: a
// PING, or an SUNSUBSCRIBE of all, is answered from every connection it
// went to, and so ends the tunnel (fail). t.mu is held.
func (t *Tunnel) unreached(tc *tunnelConn, err error) bool {
	if tc.set != t.conns || len(tc.pings) > 0 || tc.hellos > 0 {
		return false
	}
	for _, sc := range tc.sent {
		if sc.all != nil {
			return false
		}
	}
	for _, f := range tc.fences {
		if f.of.fences != 1 {
			return false
		}
	}
	t.drop(tc)
	r := errReply("ERR sluice: connection to " + tc.addr + " failed: " + oneLine(err.Error()))
	for len(tc.fences) > 0 && !t.closed {
		t.deliver(tc, r, -1)
		t.fenced(tc)
	}
	return true
}

// fail ends the tunnel for err, which tc met. The commands not yet
// answered are answered first, in order: with what their connections
// sent for them, and an error for those whose replies are not all back.
// t.mu is held.
func (t *Tunnel) fail(tc *tunnelConn, err error) {
	if t.closed {
		return
	}
	t.closeConns()
	r := errReply("ERR sluice: connection to " + tc.addr + " failed: " + oneLine(err.Error()))
	subscribed := t.conns.subscribed()
	for _, of := range t.pending {
		for _, h := range of.held {
			t.hand(h, subscribed)
		}
		if of.fences > 0 {
			t.onData(r, subscribed, true)
		} else {
			t.onData(nil, subscribed, true)
		}
	}
	t.pending, t.held = nil, 0
	t.onEnd(err)
}

// received hands on what tc's node sent; t.mu is held.
func (t *Tunnel) received(tc *tunnelConn, r []byte) {
	if tc.hellos > 0 && isHello(r) {
		tc.hellos--
		return
	}
	if isFence(r) {
		t.fenced(tc)
		return
	}
	if len(tc.pings) > 0 && isPong(r) {
		pm := tc.pings[0]
		tc.pings[0] = nil
		tc.pings = tc.pings[1:]
		if bytes.HasPrefix(r, []byte("*2\r\n")) {
			pm.sub = r
		} else if pm.plain == nil {
			pm.plain = r
		}
		if pm.left--; pm.left > 0 {
			return
		}
		if r = pm.sub; r == nil {
			r = pm.plain
		}
		t.deliver(tc, r, -1)
		return
	}
	kind, ch, n, ok := confirmation(r)
	g := tc.set
	if tc == g.home {
		switch {
		case ok && kind == "sunsubscribe" && ch == nil:
			// Home holds no shard channel: it answers this only when it was
			// the one node asked.
			if len(tc.sent) > 0 {
				all := tc.sent[0].all
				tc.sent = tc.sent[1:]
				t.unsubscribedAll(tc, all, r)
			}
			return
		case ok:
			switch kind {
			case "subscribe", "unsubscribe":
				g.chans += n - g.homeSubs
			case "psubscribe", "punsubscribe":
				g.pats += n - g.homeSubs
			}
			g.homeSubs = n
		}
		t.deliver(tc, r, -1)
		return
	}
	var head *shardCmd
	if len(tc.sent) > 0 {
		head = tc.sent[0]
	}
	switch {
	case len(r) > 0 && r[0] == '-':
		if head == nil {
			break
		}
		tc.sent = tc.sent[1:]
		if addr, ok := redirectAddr(r, tc.addr); ok && bytes.HasPrefix(r, []byte("-MOVED ")) && head.redirects < maxRedirects {
			// The slot moved: its new owner takes the command, and the
			// slot map is read again for the next ones.
			t.c.stale.Store(true)
			head.redirects++
			t.sendShard(g, addr, head)
			return
		}
	case ok && (kind == "ssubscribe" || kind == "sunsubscribe"):
		tc.count = n
		if head != nil && head.all != nil && kind == "sunsubscribe" {
			if n == 0 {
				tc.sent = tc.sent[1:]
			}
			if ch == nil {
				t.unsubscribedAll(tc, head.all, r)
				return
			}
		} else if head != nil && head.kind == kind && len(head.channels) > 0 && bytes.Equal(head.channels[0], ch) {
			if head.channels = head.channels[1:]; len(head.channels) == 0 {
				tc.sent = tc.sent[1:]
			}
		}
		// Otherwise the node dropped the channel itself: its slot moved
		// away (Redis 7 tells its subscribers so). The client is told as
		// it is, and subscribes again to follow the slot.
		t.deliver(tc, r, n)
		return
	}
	t.deliver(tc, r, -1)
}

// unsubscribedAll counts a node's null answer r to an SUNSUBSCRIBE of
// every shard channel: the client gets it once every node asked gave it.
func (t *Tunnel) unsubscribedAll(tc *tunnelConn, all *unsubAll, r []byte) {
	if all.nulls++; all.nulls == all.nodes {
		t.deliver(tc, r, 0)
	}
}

// deliver hands on r, which tc's node sent, unless it waits behind an
// earlier command's replies; count is the node's in a shard channel's
// confirmation, else -1. t.mu is held.
func (t *Tunnel) deliver(tc *tunnelConn, r []byte, count int64) {
	of := tc.last
	if len(tc.fences) > 0 {
		of = tc.fences[0].of
	}
	if of != nil && !of.done && of != t.pending[0] {
		if t.held += len(r); t.held > maxTunnelHeld {
			t.fail(tc, errTunnelHeld)
			return
		}
		of.held = append(of.held, heldReply{r, tc, count})
		return
	}
	t.hand(heldReply{r, tc, count}, t.conns.subscribed())
}

// hand hands h on to the client, a shard channel's confirmation with the
// count of the client's shard channels now; t.mu is held.
func (t *Tunnel) hand(h heldReply, subscribed bool) {
	if h.count >= 0 {
		h.tc.shown = h.count
		h.r = withCount(h.r, h.tc.set.shownSubs())
	}
	t.onData(h.r, subscribed, false)
}

// Subscribed reports whether the client has a subscription left, as the
// nodes last confirmed.
func (t *Tunnel) Subscribed() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.conns.subscribed()
}

// Counts are the client's channels, patterns and shard channels, as the
// nodes last confirmed (CLIENT LIST's sub, psub and ssub); none once the
// tunnel is closed.
func (t *Tunnel) Counts() (chans, pats, shards int64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return 0, 0, 0
	}
	g := t.conns
	return g.chans, g.pats, g.shardSubs()
}

// SetProtocol switches the client's connections to RESP3 or RESP2, as
// HELLO switches a node's: what they send after it, messages included, is
// in that protocol, and so are connections opened later.
func (t *Tunnel) SetProtocol(resp3 bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	g := t.conns
	if t.closed || g.resp3 == resp3 {
		return
	}
	g.resp3 = resp3
	proto := "2"
	if resp3 {
		proto = "3"
	}
	hello := AppendCommand(nil, [][]byte{[]byte("HELLO"), []byte(proto)})
	for _, tc := range append([]*tunnelConn{g.home}, g.shards...) {
		if tc == nil || tc.done {
			continue
		}
		tc.hellos++
		if t.write(tc, hello); t.closed {
			return
		}
	}
}

// isPong reports whether r answers a client's PING: PONG, its argument,
// a subscriber's [pong, argument], or an error of its arity.
func isPong(r []byte) bool {
	return bytes.Equal(r, []byte("+PONG\r\n")) || bytes.HasPrefix(r, []byte("*2\r\n$4\r\npong\r\n")) ||
		(len(r) > 0 && r[0] == '$') || bytes.Contains(r, []byte("'ping' command"))
}

// isHello reports whether r is HELLO's reply, a map (an array in RESP2)
// whose first key is "server".
func isHello(r []byte) bool {
	if len(r) == 0 || (r[0] != '%' && r[0] != '*') {
		return false
	}
	i := bytes.IndexByte(r, '\n')
	return i > 0 && bytes.HasPrefix(r[i+1:], []byte("$6\r\nserver\r\n"))
}

// Close ends the tunnel: its callbacks are not called again.
func (t *Tunnel) Close() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.closeConns()
}

// Reset ends the client's subscriptions, as RESET does. The commands sent
// before are still answered, each by the connections it went to, which
// then close: what their nodes send after that is dropped. Later commands
// go to new connections, in RESP2, as RESET leaves the client.
func (t *Tunnel) Reset() {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return
	}
	old := t.conns
	t.conns = &tunnelConns{}
	for _, tc := range append([]*tunnelConn{old.home}, old.shards...) {
		if tc == nil {
			continue
		}
		if len(tc.fences) > 0 {
			t.reset = append(t.reset, tc)
		} else {
			t.retire(tc)
		}
	}
}

// spare reports whether tc holds none of the client's subscriptions and
// waits for nothing from its node: losing it loses the client nothing.
func (g *tunnelConns) spare(tc *tunnelConn) bool {
	subs := tc.count
	if tc == g.home {
		subs = g.homeSubs
	}
	return subs == 0 && len(tc.fences) == 0 && tc.hellos == 0 && (tc.last == nil || tc.last.done)
}

// drop closes tc, a spare connection or one never made (unreached), and
// forgets it: the next command that needs its node opens a new one. t.mu
// is held.
func (t *Tunnel) drop(tc *tunnelConn) {
	tc.done = true
	if tc.conn != nil {
		tc.conn.Close()
	}
	g := tc.set
	if g.home == tc {
		g.home = nil
	}
	g.shards = slices.DeleteFunc(g.shards, func(s *tunnelConn) bool { return s == tc })
}

// retire closes tc, which answered the last command sent to it before a
// Reset; t.mu is held.
func (t *Tunnel) retire(tc *tunnelConn) {
	tc.done = true
	tc.conn.Close()
	t.reset = slices.DeleteFunc(t.reset, func(r *tunnelConn) bool { return r == tc })
}

// closeConns closes every connection of t; t.mu is held.
func (t *Tunnel) closeConns() {
	t.closed = true
	t.c.mu.Lock()
	delete(t.c.tunnels, t)
	t.c.mu.Unlock()
	for _, tc := range append(append([]*tunnelConn{t.conns.home}, t.conns.shards...), t.reset...) {
		if tc != nil && tc.conn != nil {
			tc.conn.Close()
		}
	}
}

// confirmation reads a subscription command's confirmation, [kind,
// channel, count] (a push in RESP3); ch is nil for a null channel.
func confirmation(r []byte) (kind string, ch []byte, count int64, ok bool) {
	if len(r) < 4 || (r[0] != '*' && r[0] != '>') || string(r[1:4]) != "3\r\n" {
		return "", nil, 0, false
	}
	// Every message passes here: those are told apart by their first
	// element before anything is allocated.
	switch r := r[4:]; {
	case bytes.HasPrefix(r, []byte("$7\r\nmessage\r\n")), bytes.HasPrefix(r, []byte("$8\r\nsmessage\r\n")):
		return "", nil, 0, false
	}
	br := bufio.NewReader(bytes.NewReader(r[4:]))
	elems := make([][]byte, 3)
	for i := range elems {
		e, err := reply.Read(br, nil)
		if err != nil {
			return "", nil, 0, false
		}
		elems[i] = e
	}
	name, isBulk := bulk(elems[0])
	if !isBulk || elems[2][0] != ':' {
		return "", nil, 0, false
	}
	switch string(name) {
	case "subscribe", "unsubscribe", "psubscribe", "punsubscribe", "ssubscribe", "sunsubscribe":
	default:
		return "", nil, 0, false
	}
	n, err := strconv.ParseInt(string(elems[2][1:len(elems[2])-2]), 10, 64)
	if err != nil {
		return "", nil, 0, false
	}
	ch, _ = bulk(elems[1])
	return string(name), ch, n, true
}

// bulk is the text of a bulk string reply; nil for a null.
func bulk(e []byte) ([]byte, bool) {
	if len(e) < 4 || e[0] != '$' || e[1] == '-' {
		return nil, false
	}
	i := bytes.IndexByte(e, '\n')
	return e[i+1 : len(e)-2], true
}

// withCount is confirmation r with its count set to n.
func withCount(r []byte, n int64) []byte {
	i := bytes.LastIndexByte(r[:len(r)-2], '\n')
	return append(strconv.AppendInt(append(r[:i+1:i+1], ':'), n, 10), '\r', '\n')
}
