// Package proxy is sluice's RESP server: it accepts Redis clients, parses
// their commands against a command table, hands bucket requests to a
// Decider in batches and writes Redis-style replies.
package proxy

import (
	"context"
	"errors"
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
	// Loops is how many event loops serve clients (Linux, TCP and Unix
	// listeners); 0 means one per core (GOMAXPROCS). -1 serves each client
	// on its own goroutine instead, as redcon's server does.
	Loops int
}

// Server is a sluice RESP server.
type Server struct {
	cfg   Config
	log   *zap.Logger
	start time.Time

	ctx    context.Context // ends when the server closes
	cancel context.CancelFunc

	mu     sync.Mutex // guards the fields below
	ln     net.Listener
	rs     *redcon.Server // when clients are served on goroutines
	loops  []*loop        // when they are served by event loops
	closed bool
	// loopErr is why a loop stopped serving, if one did.
	loopErr error

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
	if s.cfg.Loops == 0 {
		s.cfg.Loops = defaultLoops()
	}
	s.ctx, s.cancel = context.WithCancel(context.Background())
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
	if s.closed {
		s.mu.Unlock()
		ln.Close()
		return nil
	}
	if s.ln != nil {
		s.mu.Unlock()
		return errors.New("proxy: Serve called twice")
	}
	s.ln = ln
	if s.cfg.Loops > 0 && loopable(ln) {
		return s.serveLoops(ln) // unlocks s.mu
	}
	s.rs = redcon.NewServer("", s.serveRESP, s.accept, s.closedConn)
	s.mu.Unlock()
	return s.rs.Serve(&framedListener{Listener: ln, f: s.newFramer()})
}

func (s *Server) newFramer() framer {
	return framer{
		maxBulk:    orDefault(s.cfg.MaxBulkLen, defaultMaxBulkLen),
		maxArgs:    orDefault(s.cfg.MaxArgs, defaultMaxArgs),
		maxCommand: orDefault(s.cfg.MaxCommand, defaultMaxCommand),
		maxInline:  defaultMaxInline,
	}
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

// ioLoops is how many event loops serve clients.
func (s *Server) ioLoops() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.loops)
}

// Close stops listening and closes every client connection.
func (s *Server) Close() error {
	s.cancel()
	s.mu.Lock()
	s.closed = true
	rs, ln, loops := s.rs, s.ln, s.loops
	s.mu.Unlock()
	var err error
	if ln != nil {
		// Also for redcon's server, which may not have the listener yet.
		err = ln.Close()
	}
	if rs != nil {
		rs.Close()
	}
	for _, l := range loops {
		l.stop()
	}
	return err
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

	pipe []pending // the pipeline being answered, reused
}

// newClient counts a connection that has begun and names it.
func (s *Server) newClient(addr string) client {
	s.stats.connected.Add(1)
	return client{id: s.stats.connections.Add(1), addr: addr}
}

// pending is one command of a pipeline between parsing and replying.
type pending struct {
	cmd  *command
	args [][]byte
	req  int   // index into the batch's requests, or -1
	err  error // a parse error to reply with
}

// batch gathers the bucket requests of one or more pipelines, so that they
// reach the Decider in one call: decided concurrently, pipelined to the
// shards.
type batch struct {
	reqs []router.Request
	res  []router.Result
}

func (b *batch) decide(ctx context.Context, d Decider) {
	n := len(b.reqs)
	if n == 0 {
		return
	}
	if cap(b.res) < n {
		b.res = make([]router.Result, n)
	}
	b.res = b.res[:n]
	d.Decide(ctx, b.reqs, b.res)
}

func (b *batch) reset() {
	b.reqs = b.reqs[:0]
}

// queue adds one command to c's pipeline and its bucket request, if any, to
// b. It reports false after QUIT: nothing after it runs.
func (s *Server) queue(c *client, b *batch, args [][]byte) bool {
	p := pending{args: args, req: -1}
	p.cmd, p.err = lookup(args)
	if p.err == nil && p.cmd.request != nil {
		var req router.Request
		if req, p.err = p.cmd.request(args); p.err == nil {
			p.req = len(b.reqs)
			b.reqs = append(b.reqs, req)
		}
	}
	c.pipe = append(c.pipe, p)
	return p.cmd != quitCommand
}

// answer writes the replies to c's pipeline, in order, once b is decided.
func (s *Server) answer(c *client, conn respConn, b *batch) {
	s.stats.commands.Add(int64(len(c.pipe)))
	for i := range c.pipe {
		p := &c.pipe[i]
		switch {
		case p.err != nil:
			s.writeError(conn, p.err)
		case p.req >= 0:
			req, res := &b.reqs[p.req], &b.res[p.req]
			if res.Err != nil {
				s.writeError(conn, res.Err)
				break
			}
			if res.Limited {
				s.stats.limited.Add(1)
			} else if p.cmd.counts {
				s.stats.allowed.Add(1)
			}
			p.cmd.reply(conn, req, res)
		default:
			p.cmd.local(s, c, conn, p.args)
		}
		p.args = nil // let the pipeline's buffers go
	}
	c.pipe = c.pipe[:0]
}

// respConn is where replies go: a redcon.Conn, or a client's share of an
// event loop's output.
type respConn interface {
	replyWriter
	WriteError(msg string)
	WriteString(s string)
	WriteBulk(b []byte)
	WriteBulkString(s string)
	WriteNull()
	// Close closes the connection once the replies so far are written.
	Close() error
}

// writeError is the one place where Go errors become RESP errors. A message
// that starts with an error code (WRONGTYPE, CLUSTERDOWN, ...) keeps it;
// anything else gets ERR.
func (s *Server) writeError(conn respConn, err error) {
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
