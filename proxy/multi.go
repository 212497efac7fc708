package proxy

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/sluice-rl/sluice/router"
	cmdspec "github.com/sluice-rl/sluice/router/command"
	"github.com/sluice-rl/sluice/router/reply"
	hashslot "github.com/sluice-rl/sluice/router/slot"
)

// A transaction (MULTI ... EXEC) is queued in sluice, checked as Redis
// Cluster checks it (each command's keys in one slot when it is queued,
// all the transaction's keys in one slot at EXEC), and sent at EXEC as one
// block, MULTI, the commands and EXEC, to the primary of that slot. The
// node runs it atomically; the client gets EXEC's reply. No connection is
// pinned to the client for a transaction alone; WATCH, whose effect lasts
// between a client's round trips, pins one (router.Pin) until EXEC,
// DISCARD or UNWATCH, and every command of the client goes on it. The
// router follows a block's MOVED and ASK (a slot moving), and aborts a
// watched one whose keys left the pinned connection's node (router.Pin).
type txn struct {
	slot int // of its keys; router.AnySlot while none
	// pub is the slot of its first PUBLISH's channel (router.AnySlot if
	// none): where a transaction without keys goes, as a PUBLISH outside
	// one does, so that one publisher's messages arrive in order.
	pub   int
	cmds  []byte // the queued commands, encoded
	n     int    // how many
	dirty bool   // a command was refused: EXEC answers EXECABORT
	cross bool   // its commands' keys are in several slots: EXEC answers CROSSSLOT
	// unwatched: a command names a key its client does not watch, or
	// none (a script, PUBLISH): not router.Forward.Watched.
	unwatched bool
	// stats are the queued commands' counts, in which they count as
	// forwarded once EXEC sends them.
	stats []*cmdStat
	// track: its client tracks keys (RESP3), whose state no command of a
	// transaction changes (CLIENT and HELLO are not queued). inval are the
	// keys its reads name, invalN of them, invalidated after EXEC's reply.
	track  bool
	inval  []byte
	invalN int
}

// maxQueued bounds the bytes one client may queue in a transaction: they
// are held in sluice until EXEC.
const maxQueued = 64 << 20

// held is what t holds, against maxQueued: its commands and a stats
// pointer for each, which is half as much again for the shortest (a PING,
// 14 bytes): counted alone, the commands let a transaction of PINGs hold
// near twice the bound.
func (t *txn) held() int { return len(t.cmds) + 8*len(t.stats) }

var (
	errNested      = errors.New("ERR MULTI calls can not be nested")
	errExecNoMulti = errors.New("ERR EXEC without MULTI")
	errDiscard     = errors.New("ERR DISCARD without MULTI")
	errWatchInside = errors.New("ERR WATCH inside MULTI is not allowed")
	errExecAbort   = errors.New("EXECABORT Transaction discarded because of previous errors.")
	errNoMulti     = errors.New("Command not allowed inside a transaction")
)

// transaction answers MULTI, EXEC, DISCARD, WATCH and UNWATCH outside a
// transaction. It reports false for other commands.
func (s *Server) transaction(c *client, r *round, name string, args [][]byte) (bool, error) {
	switch name {
	case "multi":
		c.multi = &txn{slot: router.AnySlot, pub: router.AnySlot, track: c.invalidates()}
		c.published()
		s.replyNow(c, "+OK\r\n")
	case "exec":
		return true, errExecNoMulti
	case "discard":
		return true, errDiscard
	case "watch":
		return true, s.watch(c, r, args)
	case "unwatch":
		if c.pin == nil {
			s.replyNow(c, "+OK\r\n") // nothing is watched
			break
		}
		s.forwardOne(c, r, router.Forward{Slot: router.AnySlot, Cmd: r.command(args), Pin: c.pin, Unpin: true})
		c.unpinned()
	default:
		return false, nil
	}
	return true, nil
}

// watch sends WATCH on c's own connection to the keys' primary, pinning
// one if c has none.
func (s *Server) watch(c *client, r *round, args [][]byte) error {
	sl, err := watchSlot(args)
	if err != nil {
		return err
	}
	if c.pin == nil {
		if c.inFlight() > 0 {
			// On a connection of its own, it could run before a command
			// c sent before it on another (a write to a key it watches,
			// which would abort EXEC): it waits until they are answered,
			// as what follows its end does (unpinned).
			return errRouteAgain
		}
		c.pin = s.cfg.Forwarder.Pin(sl, c.resp3)
	}
	s.forwardOne(c, r, router.Forward{Slot: sl, Cmd: r.command(args), Pin: c.pin})
	for _, k := range args[1:] {
		if len(c.watching) == maxWatching {
			c.watchingMore = true
			break
		}
		c.watching = append(c.watching, string(k))
	}
	return nil
}

// maxWatching bounds the watched keys a client's transaction is checked
// against (client.watching): a transaction of a WATCH of more never runs
// on a slot's importing node.
const maxWatching = 16

// watchSlot is the slot of WATCH's keys, which Redis Cluster wants in
// one.
func watchSlot(args [][]byte) (int, error) {
	sl := hashslot.Of(string(args[1]))
	for _, k := range args[2:] {
		if hashslot.Of(string(k)) != sl {
			return 0, errCrossSlot
		}
	}
	return sl, nil
}

// queue takes a command inside MULTI: EXEC and DISCARD end the
// transaction, anything else is checked and queued, or refused (which
// makes EXEC abort, as in Redis).
func (s *Server) queue(c *client, r *round, cmd *command, args [][]byte) error {
	t := c.multi
	name := lowerName(args[0])
	specs := s.cfg.Forwarder.Commands()
	var lookupErr error
	if specs != nil {
		var spec *cmdspec.Spec
		spec, lookupErr = cmdspec.Lookup(specs, args)
		if spec != nil && cmd == nil {
			c.named = &spec.Name
		}
		// CLIENT LIST names what was last read, queued or not, as Redis.
		switch {
		case cmd != nil: // sluice's own, named already
		case spec != nil: // its arity refused too
			c.view.cmd.Store(&spec.Name)
		case strings.HasPrefix(lookupErr.Error(), "ERR unknown"):
			c.view.cmd.Store(nil)
		}
	}
	switch name {
	case "exec", "discard", "multi", "watch":
		// Their arity checked first, as Redis checks it: a refused one
		// aborts the transaction, and EXEC's ends it.
		if lookupErr != nil {
			if name == "exec" {
				return execRefused(c, lookupErr)
			}
			t.dirty = true
			return lookupErr
		}
	}
	switch name {
	case "exec":
		sl := t.slot
		if sl == router.AnySlot && c.pin == nil {
			// Not while watching: keyless, it runs on the watch's node.
			sl = t.pub
		}
		exec := router.Forward{Slot: sl, Replies: t.n + 2, Pin: c.pin, Unpin: c.pin != nil,
			Watched: c.pin != nil && !t.unwatched && !c.watchingMore}
		if !t.cross && !t.dirty && t.n > 0 && c.pin == nil && sl != router.AnySlot {
			// Routed as a command by its keys outside a transaction
			// (forward): a push pipelined before it, routed by an older
			// slot map and redirected, must not be overtaken by it.
			fs := []router.Forward{exec}
			if !s.routeNow(c, fs) {
				return errRouteAgain
			}
			exec.Addr = fs[0].Addr
		}
		c.multi = nil
		c.published()
		switch {
		case t.cross:
			// Redis Cluster checks the queued commands' slots before
			// EXEC looks for a refused one.
			c.unpin() // EXEC ends the watches, whatever it answers
			return errCrossSlot
		case t.dirty:
			c.unpin()
			return errExecAbort
		case t.n == 0 && c.pin == nil:
			s.replyNow(c, "*0\r\n")
			return nil
		}
		exec.Cmd = append(append([]byte("*1\r\n$5\r\nMULTI\r\n"), t.cmds...), "*1\r\n$4\r\nEXEC\r\n"...)
		s.forwardOne(c, r, exec)
		c.q[len(c.q)-1].txn = t.stats
		if t.invalN > 0 {
			r.items[len(r.items)-1].inval = invalidation(t.invalN, t.inval)
		}
		if c.pin != nil {
			c.unpinned()
		}
		s.cmdStats.of("multi").forwarded.Add(1)
		for _, st := range t.stats {
			st.forwarded.Add(1)
		}
		s.cmdStats.of("exec").forwarded.Add(1)
		return nil
	case "discard":
		c.multi = nil
		c.published()
		c.unpin()
		s.replyNow(c, "+OK\r\n")
		return nil
	case "multi":
		return errNested // as in Redis, the transaction goes on
	case "watch":
		// Redis Cluster checks its keys' slots first, and refuses it as
		// a command of the transaction, which EXEC then aborts.
		if _, err := watchSlot(args); err != nil {
			t.dirty = true
			return err
		}
		return errWatchInside
	}
	st, err := s.queueable(c, t, cmd, name, args)
	if err == nil && t.held() > maxQueued {
		err = fmt.Errorf("sluice: a transaction may queue at most %d MiB", maxQueued>>20)
	}
	if err != nil {
		t.dirty = true
		return err
	}
	if !t.dirty {
		// Redis queues nothing once a command was refused, though it
		// answers QUEUED: CLIENT LIST's multi= stops counting, and
		// nothing is held for an EXEC that aborts.
		t.cmds = router.AppendCommand(t.cmds, args)
		t.n++
		t.stats = append(t.stats, st)
		c.published() // CLIENT LIST's multi= counts it
	}
	c.queued = true
	s.replyNow(c, "+QUEUED\r\n")
	return nil
}

// execRefused ends c's transaction, if any, and its watches, and is
// Redis's answer to an EXEC it refuses (err): Redis discards the
// transaction of such an EXEC, in MULTI or not, which unwatches the keys.
func execRefused(c *client, err error) error {
	if c.multi != nil {
		c.multi = nil
		c.published()
	}
	c.unpin()
	return errors.New("EXECABORT Transaction discarded because of: " + strings.TrimPrefix(err.Error(), "ERR "))
}

// queueable checks a command for t, moves t to its keys' slot, and
// returns the command's counts, in which EXEC counts it.
func (s *Server) queueable(c *client, t *txn, cmd *command, name string, args [][]byte) (*cmdStat, error) {
	if cmd != nil && name != "ping" && name != "echo" {
		// sluice's own (THROTTLE, CLIENT, INFO, ...): not the node's to run.
		return nil, fmt.Errorf("sluice cannot run '%s' inside a transaction", name)
	}
	specs := s.cfg.Forwarder.Commands()
	if specs == nil {
		return nil, errNoTable
	}
	spec, err := cmdspec.Lookup(specs, args)
	if err != nil {
		return nil, err
	}
	p := s.planOf(spec)
	if spec.Has("no_multi") {
		return nil, errNoMulti
	}
	if p.isFanOut {
		return nil, fmt.Errorf("sluice cannot run '%s' inside a transaction: it concerns every primary", spec.Name)
	}
	if p.subscribing {
		// Redis would run it in EXEC; sluice subscribes on connections of
		// the client's own, not the one the transaction goes on.
		return nil, fmt.Errorf("sluice cannot run '%s' inside a transaction: its subscription would live on other connections than the transaction's", spec.Name)
	}
	if p.refused != nil {
		return nil, p.refused
	}
	// As outside a transaction: SORT by its key, and a line malformed
	// where its keys should be is queued, for the node to refuse at EXEC
	// as Redis does.
	keys, bad, err := routeKeys(spec, args, nil)
	if err != nil {
		return nil, err
	}
	if len(keys) == 0 {
		// Refused as outside a transaction: EXEC would answer the state of
		// whichever primary it reached as if it were the cluster's.
		// PING and ECHO (sluice's) and UNWATCH (the transaction's own) are
		// alike on every node; so is SWAPDB, which every cluster node
		// queues and refuses in EXEC's array, leaving the others to run.
		if cmd == nil && !bad && !p.keyless && spec.Name != "unwatch" && spec.Name != "swapdb" {
			return nil, errNoRouteKey(spec)
		}
		if cmd == nil && spec.Name != "unwatch" {
			t.unwatched = true
		}
		if spec.Name == "publish" && len(args) == 3 && t.pub == router.AnySlot {
			t.pub = hashslot.Of(string(args[1]))
		}
		return p.stat, nil
	}
	sl := hashslot.Of(string(args[keys[0]]))
	for _, k := range keys[1:] {
		if hashslot.Of(string(args[k])) != sl {
			return nil, errCrossSlot
		}
	}
	for _, k := range keys {
		if !slices.Contains(c.watching, string(args[k])) {
			t.unwatched = true
		}
	}
	if bad {
		t.unwatched = true
	}
	if t.dirty {
		// Redis queues nothing once a command was refused: this one's
		// slot is none EXEC sees.
		return p.stat, nil
	}
	if t.slot == router.AnySlot {
		t.slot = sl
	} else if sl != t.slot {
		t.cross = true
	}
	if t.track && readsKeys(spec) {
		t.inval = appendKeyBulks(t.inval, args, keys)
		t.invalN += len(keys)
	}
	return p.stat, nil
}

// helloPinned answers a HELLO that switches the protocol of a client with
// a WATCH connection: the switch goes on that connection too, in order
// with the commands on it, whose replies are then in the new protocol, as
// a node's; the client gets sluice's HELLO reply. It reports false for a
// HELLO that switches nothing, answered as usual.
func (s *Server) helloPinned(c *client, r *round, args [][]byte) bool {
	if len(args) < 2 || len(args[1]) != 1 || (args[1][0] != '2' && args[1][0] != '3') {
		return false
	}
	resp3 := args[1][0] == '3'
	if resp3 == c.resp3 {
		return false
	}
	w := &replyBuf{resp3: resp3}
	cmdHello(s, c, w, args)
	if c.resp3 != resp3 {
		// Refused (an option): nothing switched.
		s.replyNow(c, string(w.b))
		return true
	}
	pin, reply := c.pin, w.b
	it := fwdItem{first: len(r.fwd), post: func([]byte) []byte {
		pin.Protocol(resp3)
		return reply
	}}
	r.fwd = append(r.fwd, router.Forward{Slot: router.AnySlot, Cmd: r.command([][]byte{[]byte("HELLO"), args[1]}), Pin: pin})
	r.queueItem(c, it)
	// A command on keys of another primary meets MOVED on the pin and is
	// sent on sluice's connection of the client's protocol to that
	// primary: one sent after the switch could overtake one sent before
	// it, on the other protocol's connection (RPUSH k, DEL k, HELLO 3,
	// DEL k: the second DEL ran first). They wait, as an unpinned
	// client's do.
	c.drainFirst = true
	return true
}

// forwardOne queues one forwarded command as the client's next reply.
func (s *Server) forwardOne(c *client, r *round, f router.Forward) {
	it := fwdItem{first: len(r.fwd)}
	r.fwd = append(r.fwd, f)
	r.queueItem(c, it)
}

// replyNow renders a reply sluice gives at once, in c's order.
func (s *Server) replyNow(c *client, reply string) {
	w := c.writer()
	mark := len(w.b)
	w.b = append(w.b, reply...)
	c.wrote(w, mark)
}

func lowerName(b []byte) string {
	if len(b) > 16 {
		return ""
	}
	var buf [16]byte
	for i, ch := range b {
		if ch >= 'A' && ch <= 'Z' {
			ch += 'a' - 'A'
		}
		buf[i] = ch
	}
	return string(buf[:len(b)])
}

// execReplies calls each with every reply EXEC's reply raw holds, the
// i-th queued command's: Redis counts each in its stats as it counts the
// same command outside a transaction.
func execReplies(raw []byte, each func(i int, raw []byte)) {
	if len(raw) < 4 || raw[0] != '*' {
		return
	}
	head, _, ok := bytes.Cut(raw[1:], []byte("\r\n"))
	n, err := strconv.Atoi(string(head))
	if !ok || err != nil || n <= 0 {
		return
	}
	br := bufio.NewReader(bytes.NewReader(raw[len(head)+3:]))
	var buf []byte
	for i := range n {
		if buf, err = reply.Read(br, buf[:0]); err != nil || len(buf) == 0 {
			break
		}
		each(i, buf)
	}
}
