package proxy

import (
	"errors"
	"strings"
	"sync"
	"time"

	"github.com/tidwall/redcon"
	"go.uber.org/zap"
)

// This file serves each client on its own goroutine, with redcon's server:
// for listeners an event loop cannot take (see loopable), and with
// Config.Loops -1.

// goClient is a client served on its own goroutine, with its own round.
type goClient struct {
	client
	r       round
	mu      sync.Mutex // guards decided
	decided [][]int    // results in, not yet delivered
	wake    chan struct{}
}

func (s *Server) accept(conn redcon.Conn) bool {
	c := &goClient{client: s.newClient(conn.RemoteAddr()), wake: make(chan struct{}, 1)}
	c.r.done = func(idx []int) {
		c.mu.Lock()
		c.decided = append(c.decided, idx)
		c.mu.Unlock()
		select {
		case c.wake <- struct{}{}:
		default: // a wake-up is pending
		}
	}
	conn.SetContext(c)
	return true
}

// wait delivers the round's results as they come in, until all are.
func (c *goClient) wait(m *metrics) {
	for {
		<-c.wake
		c.mu.Lock()
		got := c.decided
		c.decided = nil
		c.mu.Unlock()
		now := time.Now()
		for _, idx := range got {
			if n := c.r.decisions(idx); n > 0 {
				m.observe(c.r.start, now, n)
			}
			if c.r.deliver(idx, func(*client) {}) {
				c.r.reset()
				return
			}
		}
	}
}

func (s *Server) closedConn(conn redcon.Conn, err error) {
	if c, ok := conn.Context().(*goClient); ok {
		s.gone(&c.client)
		c.unpin() // its WATCH ends with it
	} else {
		s.stats.connected.Add(-1)
	}
	switch {
	case errors.Is(err, errQueryBuffer):
		logQueryBuffer(s.log, conn.RemoteAddr(), orDefault(s.cfg.QueryBufferLimit, defaultQueryBufferLimit))
	case err != nil && !errors.Is(err, errProtocolClosed) && !isClosedConn(err):
		s.log.Debug("client connection ended", zap.String("addr", conn.RemoteAddr()), zap.Error(err))
	}
}

func isClosedConn(err error) bool {
	return strings.Contains(err.Error(), "use of closed network connection") ||
		strings.Contains(err.Error(), "connection reset by peer")
}

// serveRESP handles a whole pipeline: redcon calls it with the first command
// of what one read brought, and it takes the rest itself, so that all bucket
// requests of the pipeline go to the Decider in one round. The goroutine
// waits for the round, which holds up only this client; its replies go out
// in order, as on a loop.
func (s *Server) serveRESP(conn redcon.Conn, first redcon.Command) {
	s.busy.Add(1)
	defer s.busy.Add(-1)
	c := conn.Context().(*goClient)
	c.r.start = time.Now()
	if s.take(&c.client, &c.r, first.Args) {
		for _, cmd := range conn.ReadPipeline() {
			if !s.take(&c.client, &c.r, cmd.Args) {
				break
			}
		}
	}
	if len(c.r.reqs)+len(c.r.fwd) > 0 {
		c.r.submit(s.ctx, s.cfg.Decider, s.cfg.Forwarder, nil)
		c.wait(s.metrics)
	}
	s.drain(&c.client)
	// Writes block here, so replies never wait long: only the hard limit
	// applies (a batch of replies past it).
	if hard := s.cfg.OutputLimit.Hard; hard > 0 && int64(len(c.out.b)) > hard {
		logOutputLimit(s.log, c.addr, int64(len(c.out.b)))
		c.out.b = c.out.b[:0]
		conn.Close()
		return
	}
	conn.WriteRaw(c.out.b)
	c.out.b = c.out.b[:0]
	if cap(c.out.b) > keepReplies {
		c.out.b = nil
	}
	if c.closing || s.isDraining() {
		// After QUIT, or while the server shuts down: the replies go out
		// before the close, and the input left is discarded rather than
		// reset away.
		if fc, ok := conn.NetConn().(*framedConn); ok {
			redcon.BaseWriter(conn).Flush()
			fc.linger()
		}
		conn.Close()
	}
}
