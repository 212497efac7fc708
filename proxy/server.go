// Package proxy is sluice's RESP server: it accepts Redis clients, parses
// their commands against a command table, hands bucket requests to a
// Decider in batches and writes Redis-style replies.
package proxy

import (
	"context"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tidwall/redcon"
	"go.uber.org/zap"

	"github.com/sluice-rl/sluice/router"
)

// Decider decides bucket requests. It stores one Result per Request, in
// order, and decides requests on the same key in the order given.
type Decider interface {
	Decide(ctx context.Context, reqs []router.Request, res []router.Result)
}

// Config configures a Server. Zero values mean the documented defaults.
type Config struct {
	// Decider decides THROTTLE, CL.THROTTLE and THROTTLE.RESET. Required.
	Decider Decider
	// Backend names the decider in INFO ("embedded", "cluster").
	Backend string
	// Version is reported by INFO and HELLO; "" means "dev".
	Version string
	// Logger receives connection-level problems; nil means none.
	Logger *zap.Logger
	// MaxBulkLen is the longest argument a client may send; 0 means 1 MiB.
	MaxBulkLen int64
	// MaxArgs is the most arguments in one command; 0 means 1024.
	MaxArgs int64
	// MaxCommand is the most bytes of one command; 0 means 4 MiB.
	MaxCommand int64
}

// Server is a sluice RESP server.
type Server struct {
	cfg   Config
	log   *zap.Logger
	rs    *redcon.Server
	start time.Time

	ctx    context.Context // ends when the server closes
	cancel context.CancelFunc

	mu sync.Mutex // guards ln
	ln net.Listener

	stats stats
}

// stats are the counters INFO reports.
type stats struct {
	connected   atomic.Int64
	connections atomic.Int64 // accepted since start, also the last client ID
	commands    atomic.Int64
	allowed     atomic.Int64
	limited     atomic.Int64
	errors      atomic.Int64 // error replies
}

// New returns a Server that is not yet listening.
func New(cfg Config) *Server {
	s := &Server{cfg: cfg, log: cfg.Logger, start: time.Now()}
	if s.log == nil {
		s.log = zap.NewNop()
	}
	if s.cfg.Version == "" {
		s.cfg.Version = "dev"
	}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	s.rs = redcon.NewServer("", s.serveRESP, s.accept, s.closed)
	return s
}

// ListenAndServe listens on the TCP address addr and serves clients until
// Close.
func (s *Server) ListenAndServe(addr string) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	return s.Serve(ln)
}

// Serve serves clients on ln until Close; it closes ln. After Close it
// returns nil.
func (s *Server) Serve(ln net.Listener) error {
	s.mu.Lock()
	s.ln = ln
	s.mu.Unlock()
	return s.rs.Serve(&framedListener{
		Listener:   ln,
		maxBulk:    orDefault(s.cfg.MaxBulkLen, defaultMaxBulkLen),
		maxArgs:    orDefault(s.cfg.MaxArgs, defaultMaxArgs),
		maxCommand: orDefault(s.cfg.MaxCommand, defaultMaxCommand),
		maxInline:  defaultMaxInline,
	})
}

// Addr is the address being served, or nil before Serve.
func (s *Server) Addr() net.Addr {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ln == nil {
		return nil
	}
	return s.ln.Addr()
}

// Close stops listening and closes every client connection.
func (s *Server) Close() error {
	s.cancel()
	return s.rs.Close()
}

func orDefault(v, def int64) int64 {
	if v <= 0 {
		return def
	}
	return v
}

// client is the one home of per-connection protocol state.
type client struct {
	id   int64
	addr string
	name string // CLIENT SETNAME
	lib  string // CLIENT SETINFO LIB-NAME
	ver  string // CLIENT SETINFO LIB-VER

	// Reused from one pipeline to the next.
	pipe []pending
	reqs []router.Request
	res  []router.Result
}

// pending is one command of a pipeline between parsing and replying.
type pending struct {
	cmd  *command
	args [][]byte
	req  int   // index into client.reqs, or -1
	err  error // a parse error to reply with
}

func (s *Server) accept(conn redcon.Conn) bool {
	s.stats.connected.Add(1)
	id := s.stats.connections.Add(1)
	conn.SetContext(&client{id: id, addr: conn.RemoteAddr()})
	return true
}

func (s *Server) closed(conn redcon.Conn, err error) {
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
// requests of the pipeline go to the Decider in one batch (decided
// concurrently, pipelined to the shards) and replies still go out in order.
func (s *Server) serveRESP(conn redcon.Conn, first redcon.Command) {
	c := conn.Context().(*client)
	c.pipe = append(c.pipe[:0], pending{args: first.Args})
	for _, cmd := range conn.ReadPipeline() {
		c.pipe = append(c.pipe, pending{args: cmd.Args})
	}
	c.reqs = c.reqs[:0]
	for i := range c.pipe {
		p := &c.pipe[i]
		p.req = -1
		p.cmd, p.err = lookup(p.args)
		if p.err != nil || p.cmd.request == nil {
			if p.cmd == quitCommand {
				c.pipe = c.pipe[:i+1] // nothing after QUIT runs
				break
			}
			continue
		}
		var req router.Request
		if req, p.err = p.cmd.request(p.args); p.err == nil {
			p.req = len(c.reqs)
			c.reqs = append(c.reqs, req)
		}
	}
	if n := len(c.reqs); n > 0 {
		if cap(c.res) < n {
			c.res = make([]router.Result, n)
		}
		c.res = c.res[:n]
		s.cfg.Decider.Decide(s.ctx, c.reqs, c.res)
	}
	s.stats.commands.Add(int64(len(c.pipe)))
	for i := range c.pipe {
		p := &c.pipe[i]
		switch {
		case p.err != nil:
			s.writeError(conn, p.err)
		case p.req >= 0:
			res := &c.res[p.req]
			if res.Err != nil {
				s.writeError(conn, res.Err)
				break
			}
			if res.Limited {
				s.stats.limited.Add(1)
			} else if p.cmd.counts {
				s.stats.allowed.Add(1)
			}
			p.cmd.reply(conn, &c.reqs[p.req], res)
		default:
			p.cmd.local(s, c, conn, p.args)
		}
		p.args = nil // let the pipeline's buffers go
	}
}

// writeError is the one place where Go errors become RESP errors. A message
// that starts with an error code (WRONGTYPE, CLUSTERDOWN, ...) keeps it;
// anything else gets ERR.
func (s *Server) writeError(conn redcon.Conn, err error) {
	s.stats.errors.Add(1)
	msg := err.Error()
	if !hasErrorCode(msg) {
		msg = "ERR " + msg
	}
	conn.WriteError(strings.ReplaceAll(strings.ReplaceAll(msg, "\r", " "), "\n", " "))
}

func hasErrorCode(msg string) bool {
	code, _, ok := strings.Cut(msg, " ")
	if !ok || len(code) < 3 {
		return false
	}
	for i := 0; i < len(code); i++ {
		if code[i] < 'A' || code[i] > 'Z' {
			return false
		}
	}
	return true
}
