package proxy

import (
	"bytes"
	"errors"
	"fmt"

	"github.com/sluice-rl/sluice/router"
	cmdspec "github.com/sluice-rl/sluice/router/command"
	hashslot "github.com/sluice-rl/sluice/router/slot"
)

// A subscriber gets a tunnel of its own to one node (router.Tunnel): its
// subscribe commands go there as they are, and what the node sends back,
// confirmations and messages, goes to the client as it comes, after the
// replies to what the client sent before. PUBLISH reaches every node of a
// cluster by itself, so any node serves a channel; a shard channel is
// served by the primary of its slot, which the tunnel goes to when the
// client's first subscription is SSUBSCRIBE. In RESP2, a subscribed
// client's commands all go through the tunnel, as Redis allows only
// subscription commands, PING, QUIT and RESET then; in RESP3 only the
// subscription commands do.

// subscribing are the commands that go through a client's tunnel.
var subscribing = map[string]bool{
	"subscribe": true, "psubscribe": true, "ssubscribe": true,
	"unsubscribe": true, "punsubscribe": true, "sunsubscribe": true,
}

// subscribe sends a subscription command through c's tunnel, opening it.
func (s *Server) subscribe(c *client, name string, args [][]byte) error {
	if c.tunnel == nil {
		sl := router.AnySlot
		if name == "ssubscribe" || name == "sunsubscribe" {
			if len(args) > 1 {
				sl = hashslot.Of(string(args[1]))
			}
		}
		c.tunnelGen++
		var onData func([]byte)
		var onEnd func(error)
		if c.fd != nil {
			onData, onEnd = c.fd.tunnelCallbacks(c.tunnelGen)
		} else {
			onData, onEnd = s.pushTo(c)
		}
		c.tunnel = s.cfg.Forwarder.Tunnel(sl, c.resp3, onData, onEnd)
	}
	if !c.resp3 && (name == "subscribe" || name == "psubscribe" || name == "ssubscribe") {
		c.subscribed = true
	}
	c.published()
	return s.toTunnel(c, args)
}

// subscribedCommand takes a command of a RESP2 client in subscribed
// mode: a subscription command or PING goes through its tunnel; anything
// else is refused as Redis refuses it (sent to the node, it could answer
// MOVED instead).
func (s *Server) subscribedCommand(c *client, args [][]byte) error {
	name := lowerName(args[0])
	if name == "reset" {
		c.reset()
		s.replyNow(c, "+RESET\r\n")
		return nil
	}
	if subscribing[name] || name == "ping" {
		return s.toTunnel(c, args)
	}
	if specs := s.cfg.Forwarder.Commands(); specs != nil {
		spec, err := cmdspec.Lookup(specs, args)
		if err != nil {
			return err
		}
		name = spec.Name
	}
	return fmt.Errorf("Can't execute '%s': only (P|S)SUBSCRIBE / (P|S)UNSUBSCRIBE / PING / QUIT / RESET are allowed in this context", name)
}

// toTunnel sends a command through c's tunnel: its answer comes back as
// tunnel data, not in a slot.
func (s *Server) toTunnel(c *client, args [][]byte) error {
	if err := c.tunnel.Send(router.AppendCommand(nil, args)); err != nil {
		return errors.New("sluice: the subscription's connection to the cluster failed: " + err.Error())
	}
	return nil
}

// maxPushBacklog bounds what a subscriber's tunnel may pile up in sluice
// while the client does not read: past it the client is closed, as Redis
// closes a subscriber past its client-output-buffer-limit (pubsub 32mb).
const maxPushBacklog = 32 << 20

// pushData puts what a client's tunnel sent in its output, behind the
// replies to what it sent before; it notices a RESP2 client leaving
// subscribed mode (an unsubscription that leaves 0). It reports false
// when the client must be closed: it does not read what it is sent.
func (c *client) pushData(data []byte) bool {
	if len(c.out.b)+len(c.pushed)+len(data) > maxPushBacklog {
		return false
	}
	if kind, n, ok := confirmation(data); ok && c.subscribed && n == 0 && unsubscribing[kind] {
		c.subscribed = false
		c.published()
	}
	if c.inFlight() == 0 {
		c.out.b = append(c.out.b, data...)
	} else {
		c.pushed = append(c.pushed, data...)
	}
	return true
}

// unsubscribing are the confirmations whose count can fall to 0.
var unsubscribing = map[string]bool{"unsubscribe": true, "punsubscribe": true, "sunsubscribe": true}

// confirmation reads a subscription command's confirmation, [kind,
// channel, count] (a push in RESP3), without allocating: every message a
// subscriber gets passes here.
func confirmation(data []byte) (kind string, count int64, ok bool) {
	if len(data) < 6 || (data[0] != '*' && data[0] != '>') || string(data[1:5]) != "3\r\n$" {
		return "", 0, false
	}
	rest := data[5:]
	eol := bytes.IndexByte(rest, '\n')
	n, ok := parseInt(rest[:max(eol-1, 0)])
	if eol < 1 || !ok || n > 12 || int64(len(rest)) < int64(eol)+1+n {
		return "", 0, false
	}
	name := rest[eol+1 : int64(eol)+1+n]
	if !subscribing[string(name)] {
		return "", 0, false
	}
	last := data[:len(data)-2]
	line := last[bytes.LastIndexByte(last, '\n')+1:]
	if len(line) < 2 || line[0] != ':' {
		return "", 0, false
	}
	if count, ok = parseInt(line[1:]); !ok {
		return "", 0, false
	}
	return string(name), count, true
}
