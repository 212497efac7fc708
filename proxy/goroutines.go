package proxy

import (
	"strings"

	"github.com/tidwall/redcon"
	"go.uber.org/zap"
)

// This file serves each client on its own goroutine, with redcon's server:
// for listeners an event loop cannot take (see loopable), and with
// Config.Loops -1.

// goClient is a client served on its own goroutine, with its own batch.
type goClient struct {
	client
	b batch
}

func (s *Server) accept(conn redcon.Conn) bool {
	conn.SetContext(&goClient{client: s.newClient(conn.RemoteAddr())})
	return true
}

func (s *Server) closedConn(conn redcon.Conn, err error) {
	s.stats.connected.Add(-1)
	if err != nil && err != errProtocolClosed && !isClosedConn(err) {
		s.log.Debug("client connection ended", zap.String("addr", conn.RemoteAddr()), zap.Error(err))
	}
}

func isClosedConn(err error) bool {
	return strings.Contains(err.Error(), "use of closed network connection") ||
		strings.Contains(err.Error(), "connection reset by peer")
}

// serveRESP handles a whole pipeline: redcon calls it with the first command
// of what one read brought, and it takes the rest itself, so that all bucket
// requests of the pipeline go to the Decider in one batch and replies still
// go out in order.
func (s *Server) serveRESP(conn redcon.Conn, first redcon.Command) {
	c := conn.Context().(*goClient)
	c.b.reset()
	if s.queue(&c.client, &c.b, first.Args) {
		for _, cmd := range conn.ReadPipeline() {
			if !s.queue(&c.client, &c.b, cmd.Args) {
				break
			}
		}
	}
	c.b.decide(s.ctx, s.cfg.Decider)
	s.answer(&c.client, conn, &c.b)
}
