package proxy

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"strings"

	cmdspec "github.com/sluice-rl/sluice/router/command"
	"github.com/sluice-rl/sluice/router/reply"
)

// A subscriber gets a tunnel of its own (router.Tunnel): its subscribe
// commands go to the nodes as they are, and what the nodes send back,
// confirmations and messages, goes to the client as it comes, after the
// replies to what the client sent before. PUBLISH reaches every node of a
// cluster by itself, so any node serves a channel; a shard channel is
// served by the primary of its slot, to which the tunnel keeps a
// connection of its own. In RESP2, a subscribed client's commands all go
// through the tunnel, as Redis allows only subscription commands, PING,
// QUIT and RESET then; in RESP3 only the subscription commands do.

//
// A command sent through the tunnel takes a reply slot like any other:
// what the tunnel sends until the command is answered (its confirmations,
// and messages that came meanwhile) is that slot's reply, so the client's
// later replies follow it, as they would from one node.

// subscribing are the commands that go through a client's tunnel.
var subscribing = map[string]bool{
	"subscribe": true, "psubscribe": true, "ssubscribe": true,
	"unsubscribe": true, "punsubscribe": true, "sunsubscribe": true,
}

// subscribesAfter reports whether args, c's next command, is a
// subscription command that must wait until what c sent before it is
// answered. It goes on its tunnel's connections, where it could run at
// the node before the commands pipelined ahead of it on sluice's other
// connections: a PUBLISH before a SUBSCRIBE of its channel would reach the
// client, a PUBLISH before an UNSUBSCRIBE be lost. On one connection to a
// node they run in the order sent. (In RESP2 subscribed mode all it sends
// goes through the tunnel, in order.) It waits too while c's replies not
// yet written are past the hard output limit: c is then closed before it
// becomes a subscriber, which the normal class's limit does not bound, as
// Redis closes a client whose reply is past the limit when it queues it,
// and runs nothing more of it (a reply sluice makes itself, say a big
// ECHO, is queued at once, the SUBSCRIBE after it taken in the same pass).
func (s *Server) subscribesAfter(c *client, args [][]byte) bool {
	if c.subs && !c.subscribed && c.tunnel != nil && c.inFlight() > 0 && len(args) > 0 &&
		(len(args) == 1 && bytes.EqualFold(args[0], resetName) || bytes.EqualFold(args[0], quitName)) {
		// A RESET ends the subscriptions on the tunnel's connections (a
		// QUIT the client): at once, it could end them before a PUBLISH
		// pipelined ahead of it on another connection runs at the node,
		// and the client miss its own message, which Redis pushes it
		// before RESET's (QUIT's) reply. It waits until they are
		// answered, then fences the tunnel (fenceReset).
		return true
	}
	if c.inFlight() == 0 && (s.cfg.OutputLimit.Hard <= 0 || int64(c.unwritten()) <= s.cfg.OutputLimit.Hard) {
		return false
	}
	return s.cfg.Forwarder != nil && !c.subscribed && c.multi == nil && len(args) > 0 && isSubscribing(args[0])
}

var resetName, quitName = []byte("reset"), []byte("quit")

// fenceReset has a RESET or QUIT of a client with subscriptions send a PING
// through its tunnel first, to every connection, its reply dropped but
// for the messages that came before it (appendPushes): what the nodes
// sent the client before the RESET reached them (a message of its own
// PUBLISH, answered before, subscribesAfter) reaches it, before RESET's
// reply, as from Redis. The tunnel's connections close once the PING is
// answered (Tunnel.Reset), or with the client.
func (s *Server) fenceReset(c *client) {
	if c.tunnel == nil || !c.subs || s.toTunnel(c, [][]byte{[]byte("PING")}) != nil {
		return
	}
	c.q[len(c.q)-1].silent = true
}

// unwritten is how many bytes of c's replies wait to be written.
func (c *client) unwritten() int {
	n := len(c.out.b) + len(c.held.b) - c.heldOff
	if c.fd != nil {
		n -= c.fd.written()
	}
	return n
}

// isSubscribing reports whether name is a subscription command's, in any
// case, without making a string of it.
func isSubscribing(name []byte) bool {
	var buf [len("punsubscribe")]byte
	if len(name) < len("subscribe") || len(name) > len(buf) {
		return false
	}
	for i, ch := range name {
		if ch >= 'A' && ch <= 'Z' {
			ch += 'a' - 'A'
		}
		buf[i] = ch
	}
	return subscribing[string(buf[:len(name)])]
}

// subscribe sends a subscription command through c's tunnel, opening it.
func (s *Server) subscribe(c *client, name string, args [][]byte) error {
	if c.tunnel == nil {
		c.tunnelGen++
		var onData func([]byte, bool, bool)
		var onEnd func(error)
		if c.fd != nil {
			onData, onEnd = c.fd.tunnelCallbacks(c.tunnelGen)
		} else {
			onData, onEnd = s.pushTo(c)
		}
		c.tunnel = s.cfg.Forwarder.Tunnel(c.resp3, onData, onEnd)
	}
	if err := s.toTunnel(c, args); err != nil {
		return err
	}
	switch {
	case !c.resp3 && (name == "subscribe" || name == "psubscribe" || name == "ssubscribe"):
		// In subscribed mode only once the node confirmed it: one that
		// refused it (ACL, CROSSSLOT) leaves the client out, and the
		// next command must be served as the node would serve it then.
		c.drainFirst = true
	case c.resp3:
		// Its next commands go on other connections than the tunnel's:
		// sent at once, a PUBLISH pipelined after a SUBSCRIBE (or an
		// UNSUBSCRIBE) of its channel would run before it, and the
		// client miss its message (or get one). As on one connection to
		// a node, they wait until the subscription command is answered.
		c.drainFirst = true
	}
	c.published()
	return nil
}

// subscribedCommand takes a command of a RESP2 client in subscribed
// mode: a subscription command or PING goes through its tunnel; anything
// else is refused as Redis refuses it (sent to the node, it could answer
// MOVED instead).
func (s *Server) subscribedCommand(c *client, args [][]byte) error {
	name := lowerName(args[0])
	specs := s.cfg.Forwarder.Commands()
	var spec *cmdspec.Spec
	var lookupErr error
	if specs != nil {
		// CLIENT LIST names what was last read, refused or not, as Redis.
		spec, lookupErr = cmdspec.Lookup(specs, args)
		if spec != nil {
			c.named = &spec.Name
		}
		switch {
		case spec != nil: // its arity refused too
			c.view.cmd.Store(&spec.Name)
		case strings.HasPrefix(lookupErr.Error(), "ERR unknown"):
			if own, ownErr := lookup(args); own == nil { // sluice's own is named already
				c.view.cmd.Store(nil)
			} else {
				// THROTTLE and the like, unknown to the nodes: as Redis
				// treats a command it has, its arity is checked, then it
				// is refused here as any other.
				lookupErr = ownErr
				name = own.name
			}
		}
	}
	if name == "reset" && len(args) == 1 { // else refused, as of a wrong arity
		s.fenceReset(c)
		s.resetClient(c)
		s.replyNow(c, "+RESET\r\n")
		return nil
	}
	if (subscribing[name] || name == "ping") && lookupErr == nil {
		// Of a wrong arity it is refused here, as a node refuses it
		// before it runs: through the tunnel, the node's error would
		// count as a call that failed.
		if err := s.toTunnel(c, args); err != nil {
			return err
		}
		// Sent to the cluster as forward sends it in RESP3, or before
		// the client subscribed: the same count whatever the protocol.
		s.cmdStats.of(name).forwarded.Add(1)
		switch {
		case strings.HasSuffix(name, "unsubscribe"):
			// Out of subscribed mode if it took the last subscription: as
			// the node answers, before the next command is taken.
			c.drainFirst = true
		case name == "ssubscribe":
			// Its slot may have moved: the old owner's MOVED sends it on
			// to the new one, where a command pipelined after it (an
			// SUNSUBSCRIBE of all, a PING), written there at once, would
			// run before it.
			c.drainFirst = true
		}
		return nil
	}
	err := lookupErr
	if spec != nil && err == nil {
		name = spec.Name
	}
	if err == nil {
		err = fmt.Errorf("Can't execute '%s': only (P|S)SUBSCRIBE / (P|S)UNSUBSCRIBE / PING / QUIT / RESET are allowed in this context", name)
	}
	if name == "exec" {
		// Redis answers an EXEC it refuses, here too, as EXECABORT.
		return execRefused(c, err)
	}
	return err
}

// toTunnel sends a command through c's tunnel; its slot waits for the
// tunnel to answer it.
func (s *Server) toTunnel(c *client, args [][]byte) error {
	if err := c.tunnel.Send(args); err != nil {
		return errors.New("sluice: the subscription's connection to the cluster failed: " + err.Error())
	}
	c.tunnelWait = append(c.tunnelWait, c.base+uint64(len(c.q)))
	c.q = append(c.q, slot{state: slotWaiting, tunnel: true})
	c.tunnelReset = false
	return nil
}

// tunnelAnswered settles the oldest slot waiting for c's tunnel: what the
// tunnel sent until now is its reply.
func (c *client) tunnelAnswered() {
	if len(c.tunnelWait) == 0 {
		return
	}
	sl := &c.q[c.tunnelWait[0]-c.base]
	sl.state, sl.raw, c.pushed = slotDecided, c.pushed, nil
	c.waiting += len(sl.raw)
	if c.tunnelWait = c.tunnelWait[1:]; len(c.tunnelWait) == 0 {
		c.tunnelWait = nil
		if c.tunnelReset {
			// A RESET's tunnel, whose last command is answered: a client
			// that subscribes again gets a new one, in its protocol then.
			c.closeTunnel()
		}
	}
}

// pushKinds name what a node pushes in RESP2, as arrays: messages, and
// the confirmations of subscription commands.
var pushKinds = map[string]bool{
	"message": true, "pmessage": true, "smessage": true,
	"subscribe": true, "psubscribe": true, "ssubscribe": true,
	"unsubscribe": true, "punsubscribe": true, "sunsubscribe": true,
}

// appendPushes appends to dst the replies in raw, what a tunnel sent,
// that a node sends its client whatever CLIENT REPLY says (Redis's
// CLIENT_PUSHING): RESP3's pushes, and RESP2's messages and confirmations.
// Those of a silent command are not its reply: a subscription's
// confirmation, and messages that came before it. A PING's pong or an
// error is, and is dropped.
func appendPushes(dst, raw []byte) []byte {
	br := bufio.NewReader(bytes.NewReader(raw))
	for {
		at := len(dst)
		var err error
		if dst, err = reply.Read(br, dst); err != nil {
			return dst // raw ended: the tunnel sends whole replies only
		}
		if !isPush(dst[at:]) {
			dst = dst[:at]
		}
	}
}

// isPush reports whether r, a whole reply, is a push: RESP3's, or in
// RESP2 an array of 3 or 4 whose first element names a push kind.
func isPush(r []byte) bool {
	if r[0] == '>' {
		return true
	}
	if !bytes.HasPrefix(r, []byte("*3\r\n$")) && !bytes.HasPrefix(r, []byte("*4\r\n$")) {
		return false
	}
	_, rest, _ := bytes.Cut(r[5:], []byte("\r\n"))
	kind, _, _ := bytes.Cut(rest, []byte("\r\n"))
	return pushKinds[string(kind)]
}

// maxPushBacklog bounds what a subscriber's tunnel may pile up in sluice
// while the client does not read: past it the client is closed, as Redis
// closes a subscriber past its client-output-buffer-limit (pubsub 32mb).
const maxPushBacklog = 32 << 20

// pushData puts what a client's tunnel sent in its output, behind the
// replies to what it sent before; a RESP2 client is in subscribed mode
// while it has a subscription. sent is how much of its output its socket
// has taken already: not part of what waits for it. It reports false when
// the client must be closed: it does not read what it is sent.
func (c *client) pushData(data []byte, subscribed bool, sent int) bool {
	if len(c.out.b)-sent+len(c.pushed)+len(data) > maxPushBacklog {
		return false
	}
	c.subscribedNow(subscribed)
	switch {
	case c.inFlight() == 0:
		c.out.b = append(c.out.b, data...)
	case c.block != nil && c.block.sent:
		// Redis pushes messages to a client blocked in BLPOP at once.
		// All before the command is answered, and nothing after it taken.
		c.out.b = append(append(c.out.b, c.pushed...), data...)
		c.pushed = nil
	default:
		c.pushed = append(c.pushed, data...)
	}
	return true
}

// subscribedNow puts a RESP2 client in subscribed mode or out of it, as
// its tunnel reported it, and records whether a client of either
// protocol has a subscription.
func (c *client) subscribedNow(subscribed bool) {
	changed := c.subs != subscribed
	c.subs = subscribed
	if !c.resp3 && c.subscribed != subscribed {
		c.subscribed = subscribed
		changed = true
	}
	if changed {
		c.published()
	}
}
