package router

import (
	"bufio"
	"errors"
	"net"
	"sync"

	"github.com/sluice-rl/sluice/router/reply"
)

// Tunnel is one client's own connection to a node, for a subscriber: what
// the client sends goes to the node as it is, and what the node sends,
// replies and published messages alike, comes back whole as it arrives.
// A subscriber's messages come when they are published, not in answer to
// a command, so they cannot share the pipelined connections.
type Tunnel struct {
	mu     sync.Mutex // guards the fields below
	conn   net.Conn   // nil until dialled
	queue  [][]byte   // sent before the connection was up
	closed bool
}

// errTunnelClosed ends a tunnel its client closed.
var errTunnelClosed = errors.New("router: tunnel closed")

// Tunnel opens a tunnel to the primary that owns slot sl (AnySlot: any
// primary), in RESP3 when asked. It returns at once; commands sent
// meanwhile wait for the connection. onData gets each whole reply or
// message, and onEnd, once, the error that ended the tunnel (nil after
// Close); both are called from the tunnel's goroutine.
func (c *Cluster) Tunnel(sl int, resp3 bool, onData func([]byte), onEnd func(error)) *Tunnel {
	t := &Tunnel{}
	addr := c.addrOf(c.topo.Load(), sl)
	go t.run(c, addr, resp3, onData, onEnd)
	return t
}

func (t *Tunnel) run(c *Cluster, addr string, resp3 bool, onData func([]byte), onEnd func(error)) {
	if addr == "" {
		onEnd(errors.New("CLUSTERDOWN sluice has no slot map of the cluster yet"))
		return
	}
	conn, br, err := c.dial(addr, resp3, false, 16<<10)
	if err != nil {
		onEnd(err)
		return
	}
	t.mu.Lock()
	if t.closed {
		t.mu.Unlock()
		conn.Close()
		onEnd(nil)
		return
	}
	t.conn = conn
	for _, cmd := range t.queue {
		if _, err = conn.Write(cmd); err != nil {
			break
		}
	}
	t.queue = nil
	t.mu.Unlock()
	if err == nil {
		err = t.read(br, onData)
	}
	conn.Close()
	t.mu.Lock()
	closed := t.closed
	t.mu.Unlock()
	if closed {
		err = nil
	}
	onEnd(err)
}

func (t *Tunnel) read(br *bufio.Reader, onData func([]byte)) error {
	for {
		r, err := reply.Read(br, nil)
		if err != nil {
			return err
		}
		onData(r)
	}
}

// Send sends one command, encoded, to the node.
func (t *Tunnel) Send(cmd []byte) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	switch {
	case t.closed:
		return errTunnelClosed
	case t.conn == nil:
		t.queue = append(t.queue, cmd)
		return nil
	}
	_, err := t.conn.Write(cmd)
	return err
}

// Close ends the tunnel; onEnd is then called with nil.
func (t *Tunnel) Close() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.closed = true
	if t.conn != nil {
		t.conn.Close()
	}
}
