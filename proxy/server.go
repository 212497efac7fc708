// Package proxy is sluice's RESP server: it accepts Redis clients, parses
// their commands against a command table, submits bucket requests to a
// Decider in rounds without waiting for them, and writes Redis-style
// replies in each client's command order as the decisions come back.
package proxy

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tidwall/redcon"
	"go.uber.org/zap"

	"github.com/sluice-rl/sluice/router"
	cmdspec "github.com/sluice-rl/sluice/router/command"
)

// Decider decides bucket requests asynchronously, so that a transport goes
// on serving while the shards work. Submit stores one Result per Request in
// res, deciding requests on one key in the order given, and reports them
// through done as they come in: done(idx) means res[i] is set for every i
// in idx (nil: all of reqs). Every request is reported exactly once, from
// any goroutine, possibly before Submit returns and from several goroutines
// at once; idx then belongs to the caller. A result that waits for one
// shard should not wait for another. The caller leaves reqs and res alone
// until all are reported.
type Decider interface {
	Submit(ctx context.Context, reqs []router.Request, res []router.Result, done func(idx []int))
}

// pipeDecider is a Decider that sends its shard calls on an event loop's
// own connections to the nodes (router.Cluster): the loop writes them and
// reads their replies in its own passes, with no goroutine between.
type pipeDecider interface {
	slotRouter
	SubmitVia(ctx context.Context, via router.Pipes, m router.SlotMap, reqs []router.Request, res []router.Result, done func(idx []int))
	NewBucketPipe(addr string) *router.Pipe
}

// Config configures a Server. Zero values mean the documented defaults.
type Config struct {
	// Decider decides THROTTLE, CL.THROTTLE and THROTTLE.RESET. Required.
	Decider Decider
	// Forwarder takes every command sluice does not answer itself to the
	// cluster; nil answers them as unknown (the embedded backend).
	Forwarder Forwarder
	// AllowAdmin forwards commands that change every primary (FLUSHALL,
	// CONFIG SET, SCRIPT FLUSH, ...); without it they are refused.
	AllowAdmin bool
	// OutputLimit is Redis's client-output-buffer-limit for the normal
	// class: a client whose pending replies pass Hard, or stay over Soft
	// for SoftFor, is closed. Zero values are no limit, Redis's default.
	OutputLimit OutputLimit
	// IdleTimeout closes a client that sent nothing for that long, as
	// Redis's timeout; 0 never does. A subscriber, and a client waiting
	// for replies (a blocking command), is not idle.
	IdleTimeout time.Duration
	// MaxClients is how many clients may be connected at once; past it a
	// new one is answered "ERR max number of clients reached" and closed,
	// as by Redis's maxclients. 0 means 10,000, Redis's default.
	MaxClients int
	// Policies, when not nil, are the named limits THROTTLE may use
	// instead of giving its own (THROTTLE key POLICY name, or a key that
	// matches a rule); SetPolicies replaces them.
	Policies *Policies
	// Users, when not nil, are the ACL users clients authenticate as
	// (--requirepass, --aclfile); nil lets every client run everything.
	Users *Users
	// Backend names the decider in INFO ("embedded", "cluster").
	Backend string
	// Version is reported by INFO (sluice_version); "" means "dev".
	// HELLO reports the Redis version sluice speaks, as INFO's
	// redis_version, since clients gate features on it.
	Version string
	// Logger receives connection-level problems; nil means none.
	Logger *zap.Logger
	// MaxBulkLen is the longest argument a client may send, as Redis's
	// proto-max-bulk-len; 0 means 512 MiB, Redis's default.
	MaxBulkLen int64
	// MaxArgs is the most arguments in one command; 0 means Redis's bound,
	// 2^31-1.
	MaxArgs int64
	// QueryBufferLimit is the most bytes of one command, as Redis's
	// client-query-buffer-limit bounds what a client has sent and Redis has
	// yet to run; a client past it is closed. 0 means 1 GiB, Redis's
	// default.
	QueryBufferLimit int64
	// MaxKeyLen bounds the key of THROTTLE, CL.THROTTLE, GCRA and
	// THROTTLE.RESET, in bytes; 0 means 1 MiB, which is also the most it
	// may be.
	MaxKeyLen int
	// Announce is the host:port sluice gives cluster-mode clients as the
	// one node that owns every slot; "" means the address each client reached.
	Announce string
	// Loops is how many event loops serve clients (Linux, TCP and Unix
	// listeners); 0 means one per two cores (GOMAXPROCS/2), at least one. -1 serves each client
	// on its own goroutine instead, as redcon's server does.
	Loops int
	// BusyPoll is how long an event loop serving few busy clients polls
	// for events before it sleeps (see spinWait); 0 never polls. Only a
	// loop that has a CPU to itself (fewer loops than GOMAXPROCS) polls.
	BusyPoll time.Duration
}

// Server is a sluice RESP server.
type Server struct {
	cfg   Config
	log   *zap.Logger
	start time.Time
	// slots is cfg.Decider when it routes buckets by a slot map, or nil.
	slots slotRouter

	ctx    context.Context // ends when the server closes
	cancel context.CancelFunc

	mu     sync.Mutex // guards the fields below
	lns    []net.Listener
	rs     []*redcon.Server // those serving clients on goroutines
	loops  []*loop          // when clients are served by event loops
	closed bool
	// polling is how long the loops poll before they sleep: BusyPoll if
	// they may (see loop.spinWait), else 0.
	polling time.Duration
	// draining: Shutdown began; clients are answered what they sent and
	// closed. Atomic: the goroutine path reads it after every pipeline.
	draining atomic.Bool
	// busy counts the goroutine path's pipelines being answered.
	busy  atomic.Int64
	conns connSet
	// loopErr is why a loop stopped serving, if one did.
	loopErr error

	stats stats
	// cmdStats are INFO commandstats'.
	cmdStats commandStats
	plans    cowMap[*cmdspec.Spec, plan]
	metrics  *metrics
	clients  clientTable // every connected client, for CLIENT LIST
	// policies is swapped whole on a reload; a command keeps the policy it
	// was parsed with.
	policies atomic.Pointer[Policies]
	// refusing bounds the TLS clients being turned away at once.
	refusing chan struct{}
	// blocked are the blocking commands of the goroutine path's clients
	// waiting for their replies: Shutdown and Close end them, as a loop
	// ends its clients' (and Redis its blocked clients') when it drains
	// or stops.
	blockedMu sync.Mutex
	blocked   map[*router.Blocked]struct{}
}

// stats are the counters INFO reports.
type stats struct {
	// connected are the clients INFO counts; open, those that hold a
	// socket, which --maxclients bounds: a client lingering after QUIT or
	// a protocol error is the second only.
	connected   atomic.Int64
	open        atomic.Int64
	connections atomic.Int64 // accepted since start, also the last client ID
	commands    atomic.Int64
	allowed     atomic.Int64
	limited     atomic.Int64
	errors      errorStats
	rejected    atomic.Int64 // connections turned away: --maxclients

	// shadowLimited are allowed replies that a shadow policy's limit
	// would have denied (counted in allowed too: the client was allowed).
	shadowLimited atomic.Int64

	ops opsRate

	// since are the counts INFO starts from: theirs at the last CONFIG
	// RESETSTAT (resetStats). Prometheus's counters read the atomics
	// above whole, as a counter never goes back.
	since struct {
		connections, rejected, commands, errors, allowed, limited, shadowLimited atomic.Int64
	}
}

// resetStats is sluice's part of CONFIG RESETSTAT, done as its answer
// reaches c (drain), so that what c sent before it counts before it and
// the RESETSTAT with what c sent after it counts after, as on a node.
func (s *Server) resetStats(c *client) {
	st := &s.stats
	st.since.connections.Store(st.connections.Load())
	st.since.rejected.Store(st.rejected.Load())
	st.since.commands.Store(st.commands.Load() - int64(c.inFlight()))
	st.since.errors.Store(st.errors.total.Load())
	st.since.allowed.Store(st.allowed.Load())
	st.since.limited.Store(st.limited.Load())
	st.since.shadowLimited.Store(st.shadowLimited.Load())
	st.errors.reset()
	st.ops.reset(time.Now(), st.commands.Load())
	s.cmdStats.reset()
}

// opsRate is Redis's instantaneous_ops_per_sec: commands per second,
// the mean of the last opsSamples rates, each over opsEvery, as Redis's
// cron samples them. Monitoring (redis_exporter, dashboards) reads it.
type opsRate struct {
	mu      sync.Mutex // guards the fields below
	rates   [opsSamples]float64
	next    int
	lastAt  time.Time
	lastCmd int64
}

const (
	opsSamples = 16
	opsEvery   = 100 * time.Millisecond
)

// sample takes the count of commands at now.
func (o *opsRate) sample(now time.Time, commands int64) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if !o.lastAt.IsZero() {
		if d := now.Sub(o.lastAt).Seconds(); d > 0 {
			o.rates[o.next] = float64(commands-o.lastCmd) / d
			o.next = (o.next + 1) % opsSamples
		}
	}
	o.lastAt, o.lastCmd = now, commands
}

// reset forgets the samples, as Redis's resetServerStats.
func (o *opsRate) reset(now time.Time, commands int64) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.rates, o.next = [opsSamples]float64{}, 0
	o.lastAt, o.lastCmd = now, commands
}

// perSecond is the mean rate of the samples.
func (o *opsRate) perSecond() int64 {
	o.mu.Lock()
	defer o.mu.Unlock()
	var sum float64
	for _, r := range o.rates {
		sum += r
	}
	return int64(sum / opsSamples)
}

// sampleOps samples the command count until the server closes.
func (s *Server) sampleOps() {
	t := time.NewTicker(opsEvery)
	defer t.Stop()
	for {
		select {
		case <-s.ctx.Done():
			return
		case now := <-t.C:
			s.stats.ops.sample(now, s.stats.commands.Load())
		}
	}
}

// OutputLimit bounds the replies waiting for one client.
type OutputLimit struct {
	Hard, Soft int64
	SoftFor    time.Duration
}

// over reports whether a client with pending reply bytes has passed l,
// soft since when it went over the soft limit (reset when it is under it).
func (l OutputLimit) over(pending int64, soft *time.Time, now time.Time) bool {
	if l.Hard > 0 && pending > l.Hard {
		return true
	}
	if l.Soft <= 0 || pending <= l.Soft {
		*soft = time.Time{}
		return false
	}
	if soft.IsZero() {
		*soft = now
	}
	return now.Sub(*soft) >= l.SoftFor
}

// unauthOutputLimit bounds the replies waiting for a client yet to
// authenticate (a password required), as Redis 7.0.15 and later bound
// them (CVE-2025-21605): its replies past the 16 KiB reply buffer may
// take 1 KiB, but they go to a reply block of at least 16 KiB, counted
// whole, so any byte past the buffer closes it. One that sends commands
// and reads nothing cannot authenticate: it is closed, not held
// (redis-cli --pipe without the password is told so at once, not after
// its 30 s).
const unauthOutputLimit = 16 << 10

// logOutputLimit reports a client closed for its output buffer, as Redis
// logs it.
func logOutputLimit(log *zap.Logger, addr string, pending int64) {
	log.Warn("client closed for overcoming of output buffer limits", zap.String("addr", addr), zap.Int64("pending_bytes", pending))
}

// admit takes a place under --maxclients for a client just accepted, and
// reports whether one was left. The check and the count are one step:
// each listener accepts on a goroutine of its own, and two that both saw
// the last place free would take it twice.
func (s *Server) admit() bool {
	for {
		n := s.stats.open.Load()
		if n >= int64(s.cfg.MaxClients) {
			return false
		}
		if s.stats.open.CompareAndSwap(n, n+1) {
			s.stats.connected.Add(1)
			return true
		}
	}
}

// unadmit gives back the place of a client admitted and not served.
func (s *Server) unadmit() {
	s.stats.open.Add(-1)
	s.stats.connected.Add(-1)
}

// reject answers nc that sluice has no room for, within d, and closes it.
func (s *Server) reject(nc net.Conn, d time.Duration) {
	s.stats.rejected.Add(1)
	// A TLS client's handshake reads too: the deadline covers both ways.
	nc.SetDeadline(time.Now().Add(d))
	nc.Write([]byte("-ERR max number of clients reached\r\n"))
	nc.Close()
}

// maxRefusing is how many TLS clients past --maxclients may be handshaken
// at once to be told so.
const maxRefusing = 64

// New returns a Server that is not yet listening.
func New(cfg Config) *Server {
	s := &Server{cfg: cfg, log: cfg.Logger, start: time.Now(), metrics: newMetrics()}
	s.slots, _ = cfg.Decider.(slotRouter)
	if s.log == nil {
		s.log = zap.NewNop()
	}
	if s.cfg.Version == "" {
		s.cfg.Version = "dev"
	}
	if s.cfg.Loops == 0 {
		s.cfg.Loops = defaultLoops()
	}
	if s.cfg.MaxClients <= 0 {
		s.cfg.MaxClients = 10000
	}
	s.refusing = make(chan struct{}, maxRefusing)
	s.SetPolicies(cfg.Policies)
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

// Serve serves clients on every listener given until Close; it closes
// them. TCP and Unix listeners share the event loops; any other (a
// tls.NewListener, say) serves each client on its own goroutine. A
// listener that fails ends serving on all of them, and Serve returns why;
// after Close it returns nil.
func (s *Server) Serve(lns ...net.Listener) error {
	if len(lns) == 0 {
		return errors.New("proxy: Serve needs a listener")
	}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		closeAll(lns)
		return nil
	}
	if s.lns != nil {
		s.mu.Unlock()
		return errors.New("proxy: Serve called twice")
	}
	s.lns = lns
	go s.sampleOps()
	served := make(chan error, len(lns))
	for _, ln := range lns {
		if s.cfg.Loops > 0 && loopable(ln) {
			if s.loops == nil {
				if err := s.startLoops(); err != nil {
					s.mu.Unlock()
					closeAll(lns)
					return err
				}
			}
			go func() { served <- s.acceptLoops(ln) }()
			continue
		}
		rs := redcon.NewServer("", s.serveRESP, s.accept, s.closedConn)
		s.rs = append(s.rs, rs)
		go func() { served <- rs.Serve(&framedListener{Listener: ln, f: s.newFramer(), s: s}) }()
	}
	s.mu.Unlock()
	var err error
	for range lns {
		e := <-served
		s.mu.Lock()
		ended := s.closed || s.draining.Load()
		if e == nil {
			e = s.loopErr
		}
		s.mu.Unlock()
		if !ended {
			err = e
			s.Close()
		}
	}
	return err
}

func closeAll(lns []net.Listener) {
	for _, ln := range lns {
		ln.Close()
	}
}

func (s *Server) newFramer() framer {
	return framer{
		maxBulk:  orDefault(s.cfg.MaxBulkLen, defaultMaxBulkLen),
		maxArgs:  orDefault(s.cfg.MaxArgs, defaultMaxArgs),
		maxQuery: orDefault(s.cfg.QueryBufferLimit, defaultQueryBufferLimit),
	}
}

// Addr is the address being served (of the first listener given to
// Serve), or nil before Serve.
func (s *Server) Addr() net.Addr {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.lns == nil {
		return nil
	}
	return s.lns[0].Addr()
}

// ioLoops is how many event loops serve clients, and how long they poll
// before they sleep.
func (s *Server) ioLoops() (int, time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.loops), s.polling
}

// Shutdown stops accepting clients, answers every command already read,
// writes the replies, and closes each client once it has them; then it
// closes the server. Past ctx's deadline it closes what is left at once
// (Close) and returns ctx's error. The Decider and Forwarder are not
// closed: they stay the caller's.
func (s *Server) Shutdown(ctx context.Context) error {
	s.mu.Lock()
	if s.closed || s.draining.Load() {
		s.mu.Unlock()
		return s.Close()
	}
	s.draining.Store(true)
	lns, loops := s.lns, s.loops
	s.mu.Unlock()
	closeAll(lns)
	s.cancelBlocked(false)
	s.conns.wake()
	done := make(chan struct{})
	go func() {
		// All at once: each lingers up to a second for its last clients.
		for _, l := range loops {
			l.drain()
		}
		for _, l := range loops {
			l.drained()
		}
		// The goroutine path: each pipeline closes its client once
		// answered; wait for those under way.
		tick := time.NewTicker(time.Millisecond)
		defer tick.Stop()
		for s.busy.Load() > 0 && ctx.Err() == nil {
			<-tick.C
		}
		close(done)
	}()
	var err error
	select {
	case <-done:
	case <-ctx.Done():
		err = ctx.Err()
	}
	s.Close()
	return err
}

func (s *Server) isDraining() bool { return s.draining.Load() }

// watchBlocked has Shutdown or Close end b, a goroutine client's blocking
// command, while it waits; at once if either began already. The returned func
// forgets it.
func (s *Server) watchBlocked(b *router.Blocked) (forget func()) {
	s.blockedMu.Lock()
	if s.blocked == nil {
		s.blocked = make(map[*router.Blocked]struct{})
	}
	s.blocked[b] = struct{}{}
	s.blockedMu.Unlock()
	switch {
	case s.ctx.Err() != nil:
		b.Abort()
	case s.isDraining():
		b.Cancel()
	}
	return func() {
		s.blockedMu.Lock()
		delete(s.blocked, b)
		s.blockedMu.Unlock()
	}
}

// cancelBlocked ends the goroutine path's blocking commands: draining is
// set, or the server's context ended, so that one watched after this is
// ended by watchBlocked. abort, as the server closes, does not wait for
// the answers of those the nodes answered meanwhile.
func (s *Server) cancelBlocked(abort bool) {
	s.blockedMu.Lock()
	defer s.blockedMu.Unlock()
	for b := range s.blocked {
		if abort {
			b.Abort()
		} else {
			b.Cancel()
		}
	}
}

// Close stops listening and closes every client connection.
func (s *Server) Close() error {
	s.cancel()
	s.mu.Lock()
	s.closed = true
	rs, lns, loops := s.rs, s.lns, s.loops
	s.mu.Unlock()
	s.cancelBlocked(true)
	var err error
	for _, ln := range lns {
		// Also for redcon's servers, which may not have the listener yet.
		if e := ln.Close(); err == nil {
			err = e
		}
	}
	for _, r := range rs {
		r.Close()
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

// client is the one home of per-connection protocol state, whichever
// transport serves it.
//
// Its replies leave in the order of its commands (RESP has no request ids),
// while its bucket requests are decided asynchronously: every command read
// takes the next slot of q. A command sluice answers itself is rendered at
// once, straight into out when nothing is ahead of it, else into held; a
// bucket request's slot waits for its decision. drain moves replies to out
// in order, as far as the first undecided one.
type client struct {
	id   int64
	addr string
	name string // CLIENT SETNAME
	lib  string // CLIENT SETINFO LIB-NAME
	ver  string // CLIENT SETINFO LIB-VER
	// noEvict: CLIENT NO-EVICT ON, shown in CLIENT LIST's flags (e) as
	// Redis shows it; sluice evicts no client for memory either way.
	noEvict bool
	// local is the address it reached (the listener's port, and which of
	// the host's addresses): CLUSTER SLOTS and the like send it back there.
	local net.Addr

	q       []slot      // q[head:] are read and not yet replied to, in order
	head    int         //
	base    uint64      // the sequence number of q[0]
	held    replyBuf    // replies rendered behind an undecided one, in slot order
	heldOff int         // bytes of held already moved to out
	waiting int         // bytes of forwarded replies decided in q behind an undecided one: they count toward the output limit, as in Redis's reply list
	out     replyBuf    // replies ready to write, in order
	closing bool        // after QUIT, a protocol error or EOF: nothing more is read
	gone    bool        // closed: decisions still in flight are dropped
	fd      *fdConn     // its socket's state when an event loop serves it
	multi   *txn        // after MULTI: the commands queued for EXEC
	pin     *router.Pin // after WATCH: its own connection, until EXEC, DISCARD or UNWATCH
	// watching are the keys its WATCHes named, up to maxWatching (more:
	// watchingMore): a transaction of those only may run where a slot
	// being migrated sent them (router.Forward.Watched).
	watching     []string
	watchingMore bool
	resp3        bool      // after HELLO 3
	track        *tracking // after CLIENT TRACKING ON
	tracked      bool      // the command being taken is one whose keys track would track (CLIENT CACHING's mode)
	// readOnly: after READONLY, until READWRITE or RESET (CLIENT LIST's
	// r flag, as a node shows a cluster client that sent it).
	readOnly bool
	// readWrite: after READWRITE, until READONLY or RESET, its reads go to
	// the primaries even with --read-from-replicas (read-your-writes).
	readWrite bool
	// split is how many parts its forwarded commands in flight were split
	// into past one each: what it has on the shards counts toward
	// maxInFlight, not only its commands.
	split int
	// tunnel is its own connection to a node once it subscribes; while
	// subscribed is set (RESP2), every command it sends goes there.
	tunnel     *router.Tunnel
	subscribed bool
	// subs: it has a subscription, as its tunnel last said, in either
	// protocol (CLIENT LIST's P flag and TYPE pubsub, as Redis's).
	subs      bool
	tunnelGen int    // counts its tunnels: what an old one sends is dropped
	pushed    []byte // what the tunnel sent, behind replies not yet out
	// tunnelWait are the slots (by sequence number) of the commands sent
	// through the tunnel and not yet answered, oldest first.
	tunnelWait []uint64
	// tunnelReset is set by a RESET while tunnelWait had slots: the
	// tunnel closes once they are answered, unless a command was sent
	// through it since.
	tunnelReset bool
	// conn and push serve a client on its own goroutine: push writes its
	// output once it subscribes.
	conn *framedConn
	push *pushOut
	// block is its blocking command until answered: nothing it sent
	// after is taken meanwhile, and it is cancelled if c goes away.
	block *blockingCmd
	// drainFirst is set when what it sent after must wait for the replies
	// in flight: once its WATCH connection is let go with replies in
	// flight (unpinned), and after a RESP2 subscription command, whose
	// answer says whether it is in subscribed mode then.
	drainFirst bool
	// routedGen is the generation, plus one, of the slot map that routed
	// its last command by its keys (errRouteAgain); 0 before any.
	routedGen uint64
	// retake: the command just given to take was not taken, and is to be
	// given again once what c sent before is answered (errRouteAgain).
	retake bool
	// counted: the command to be taken again was counted as read, once:
	// taking the count back until then would make a counter that
	// Prometheus scrapes go down.
	counted bool
	// named is the command being taken, as commandstats names it (nil:
	// unknown); refused, that sluice refused it before it ran; queued,
	// that it was queued in a transaction (counted by the node at EXEC).
	named           *string
	stat            *cmdStat // named's counts, when known already
	refused, queued bool
	softOver        time.Time // since when its pending replies passed the soft output limit
	// user is who it is authenticated as; nil until it authenticates,
	// when that is required.
	user *User
	// unauthMade counts the bytes of the replies made to it since it was
	// last without a user (from its start, or a RESET): only those count
	// against unauthOutputLimit, since a RESET does not take back what
	// the client asked while it was authenticated, a long reply too.
	unauthMade int
	// CLIENT REPLY: replyOff drops every reply until ON; skip drops the
	// next command's.
	replyOff, skip bool
	replyOn        bool        // this command was CLIENT REPLY ON: answered, whatever came before
	view           *clientView // what CLIENT LIST shows of it
}

// newClient names a connection from addr that has begun, counted once
// admitted; local is the address it reached, fd its socket's descriptor.
func (s *Server) newClient(addr string, local net.Addr, fd int) client {
	ux, unix := local.(*net.UnixAddr)
	if unix {
		// A Unix socket's peer has no name ("@"): Redis gives the
		// socket's path with port 0 as both ends.
		addr = ux.Name + ":0"
	}
	c := client{id: s.stats.connections.Add(1), addr: addr, local: local, user: s.cfg.Users.defaultUser()}
	c.view = &clientView{id: c.id, addr: addr, unix: unix, fd: fd, created: time.Now()}
	switch {
	case unix:
		c.view.laddr = addr
	case local != nil:
		c.view.laddr = local.String()
	}
	c.published()
	s.clients.add(c.view)
	return c
}

// gone counts c, which closed, out.
func (s *Server) gone(c *client) {
	s.stats.open.Add(-1)
	s.leaving(c)
}

// leaving stops counting c as connected, once: when it closes, or when it
// begins to linger after QUIT or a protocol error, where Redis frees it
// (its reply written, it is neither in INFO's connected_clients nor in
// CLIENT LIST for the second the linger may take).
func (s *Server) leaving(c *client) { s.leave(c.view) }

// leave stops counting v as connected, unless it was already.
func (s *Server) leave(v *clientView) {
	if v.left.CompareAndSwap(false, true) {
		s.stats.connected.Add(-1)
		s.clients.remove(v.id)
	}
}

type slotState uint8

const (
	slotHeld    slotState = iota // rendered: its n bytes are next in held
	slotWaiting                  // a bucket request being decided
	slotDecided                  // rendered when its turn comes
)

// slot is one command between reading and replying.
type slot struct {
	state slotState
	n     int
	cmd   *command
	req   router.Request
	res   router.Result
	pol   *policy // the named policy that gave req its limit, or nil
	raw   []byte  // a forwarded command's reply (cmd is nil)
	// silent: rendered (a decision still counts) and dropped, after
	// CLIENT REPLY OFF or SKIP.
	silent bool
	// tunnel: raw is what the client's tunnel sent until it answered, of
	// which a silent slot keeps the pushes (appendPushes).
	tunnel bool
	// resets: it is CONFIG RESETSTAT, which resets sluice's counts too
	// once its answer is in (resetStats).
	resets bool
	// stat counts it in commandstats once answered, read at at (ns);
	// txn, EXEC's queued commands, each by its reply.
	stat *cmdStat
	at   int64
	txn  []*cmdStat
}

// inFlight is how many commands were read and not yet replied to.
func (c *client) inFlight() int { return len(c.q) - c.head }

// round is what a transport submits at once: bucket requests for the
// Decider and ordinary commands for the Forwarder, and the slots their
// results go to. Its results are numbered reqs first, then fwd.
type round struct {
	reqs []router.Request
	res  []router.Result
	to   []target
	// slots is the slot map reqs are routed by (bucketRouted).
	slots router.SlotMap

	fwd     []router.Forward // forwarded commands, or the parts of a split one
	replies [][]byte         // the Forwarder's replies to fwd
	partOf  []int            // each fwd's item
	items   []fwdItem
	keys    []int // where a command's keys are, for the one being read

	// cmds holds fwd's commands, encoded: one buffer for the round, used
	// again once every reply is in (nothing reads a command after).
	cmds []byte

	start time.Time       // when its first request was read
	done  func(idx []int) // what the Decider calls as results come in
	fdone func(idx []int) // what the Forwarder calls
	left  int             // results not yet delivered
}

type target struct {
	c   *client
	seq uint64
}

// submit hands r's requests to d and its commands to f once all are in;
// via is the event loop's own connections to the nodes, or nil.
func (r *round) submit(ctx context.Context, d Decider, f Forwarder, via router.Pipes) {
	if cap(r.res) < len(r.reqs) {
		r.res = make([]router.Result, len(r.reqs), cap(r.reqs))
	}
	r.res = r.res[:len(r.reqs)]
	r.left = len(r.reqs) + len(r.fwd)
	if len(r.fwd) > 0 {
		if cap(r.replies) < len(r.fwd) {
			r.replies = make([][]byte, len(r.fwd), cap(r.fwd))
		}
		r.replies = r.replies[:len(r.fwd)]
		if r.fdone == nil {
			r.fdone = func(idx []int) {
				for k := range idx {
					idx[k] += len(r.reqs)
				}
				r.done(idx)
			}
		}
	}
	if len(r.reqs) > 0 {
		if pd, ok := d.(pipeDecider); ok && via != nil {
			pd.SubmitVia(ctx, via, r.slots, r.reqs, r.res, r.done)
		} else {
			d.Submit(ctx, r.reqs, r.res, r.done)
		}
	}
	if len(r.fwd) > 0 {
		f.Forward(ctx, via, r.fwd, r.replies, r.fdone)
	}
}

// decisions is how many of idx (nil: all) are decisions' results: bucket
// requests that take (THROTTLE, CL.THROTTLE, GCRA) and were decided, not
// resets and not errors, as sluice_decisions_total counts them.
func (r *round) decisions(idx []int) int {
	n := 0
	if idx == nil {
		for i := range r.to {
			if r.reqs[i].Op == router.Take && r.res[i].Err == nil {
				n++
			}
		}
		return n
	}
	for _, i := range idx {
		if i < len(r.to) && r.reqs[i].Op == router.Take && r.res[i].Err == nil {
			n++
		}
	}
	return n
}

// deliver puts the results of idx (nil: all the bucket requests) in their
// slots; mark is called with every client that got one. It reports
// whether r has delivered all its results.
func (r *round) deliver(idx []int, mark func(*client)) bool {
	if idx == nil {
		for i := range r.to {
			r.deliverOne(i, mark)
		}
		r.left -= len(r.to)
		return r.left == 0
	}
	for _, i := range idx {
		r.deliverOne(i, mark)
	}
	r.left -= len(idx)
	return r.left == 0
}

func (r *round) deliverOne(i int, mark func(*client)) {
	if i >= len(r.to) {
		r.deliverPart(i-len(r.to), mark)
		return
	}
	c := r.to[i].c
	if c.gone {
		return
	}
	sl := &c.q[r.to[i].seq-c.base]
	sl.res, sl.state = r.res[i], slotDecided
	mark(c)
}

// reset makes r ready for reuse, letting go of its keys and clients.
func (r *round) reset() {
	clear(r.reqs)
	clear(r.res)
	clear(r.to)
	r.reqs, r.res, r.to = r.reqs[:0], r.res[:0], r.to[:0]
	r.slots = router.SlotMap{}
	clear(r.fwd)
	clear(r.replies)
	clear(r.items)
	r.fwd, r.replies, r.partOf, r.items = r.fwd[:0], r.replies[:0], r.partOf[:0], r.items[:0]
	r.cmds = r.cmds[:0]
	if cap(r.cmds) > keepCommands {
		r.cmds = nil
	}
}

// keepCommands is the most command bytes a round keeps for reuse.
const keepCommands = 64 << 10

// command encodes args in r's buffer, for one of its fwd.
func (r *round) command(args [][]byte) []byte {
	if n := router.CommandLen(args); n > keepCommands/4 {
		// Alone, at its size: in the round's buffer each long command
		// that outgrew it copied every one before it again.
		return router.AppendCommand(make([]byte, 0, n), args)
	}
	at := len(r.cmds)
	r.cmds = router.AppendCommand(r.cmds, args)
	return r.cmds[at:len(r.cmds):len(r.cmds)]
}

// take reads one command into c's queue: a bucket request joins r, anything
// else is answered at once. It reports false after QUIT: nothing after it
// runs.
func (s *Server) take(c *client, r *round, args [][]byte) bool {
	at := r.start.UnixNano()
	c.view.last.Store(at)
	c.named, c.stat, c.refused, c.queued = nil, nil, false, false
	q0, out0, held0 := len(c.q), len(c.out.b), len(c.held.b)
	defer c.madeUnauth(out0, held0)
	if !c.replyOff && !c.skip {
		more := s.takeOne(c, r, args)
		if !c.retake {
			s.counted(c, at, q0, out0, held0)
		}
		return more
	}
	skip := c.skip
	c.skip, c.replyOn = false, false
	more := s.takeOne(c, r, args)
	if c.retake {
		c.skip = skip // not taken: it skips its reply when it is
		return more
	}
	s.counted(c, at, q0, out0, held0)
	if (c.replyOff || skip) && !c.replyOn {
		// Its reply is dropped: what it wrote now, and what it waits for
		// once rendered. A slot stays, so that later slots keep their
		// places.
		c.out.b = c.out.b[:min(out0, len(c.out.b))]
		c.held.b = c.held.b[:min(held0, len(c.held.b))]
		for i := q0; i < len(c.q); i++ {
			if c.q[i].state == slotHeld {
				c.q[i].n = 0
			}
			c.q[i].silent = true
		}
	}
	return more
}

// madeUnauth counts toward unauthMade the replies a command just taken
// wrote from out0 and held0 on, when it left c without a user. Such a
// command runs on sluice alone: its replies are all written as it is
// taken.
func (c *client) madeUnauth(out0, held0 int) {
	if c.user == nil {
		c.unauthMade += max(0, len(c.out.b)-out0) + max(0, len(c.held.b)-held0)
	}
}

func (s *Server) takeOne(c *client, r *round, args [][]byte) bool {
	if c.counted {
		c.counted = false
	} else {
		s.stats.commands.Add(1)
	}
	cmd, err := lookup(args)
	// Its arity, or its subcommand's, as Redis rejects them.
	c.refused = err != nil && err != errUnknownCommand
	if c.track != nil {
		c.tracked = c.track.tracks()
		if c.track.caching {
			c.track.afterCommand(cmd, c, args)
		}
	}
	if cmd != nil {
		c.named = cmd.fullName(args)
		c.view.cmd.Store(c.named)
	} else if s.cfg.Forwarder == nil {
		c.view.cmd.Store(nil) // unknown: CLIENT LIST says NULL, as Redis
	}
	if (err == nil || err == errUnknownCommand) && (c.user == nil || !c.user.all) {
		if aerr := s.authorize(c, cmd, args); aerr != nil {
			switch {
			case cmd == nil && lowerName(args[0]) == "exec" && aerr != errNoTable:
				// A TRYAGAIN stays one, as forward answers it: the
				// client retries.
				aerr = execRefused(c, aerr)
			case c.multi != nil:
				c.multi.dirty = true // EXEC answers EXECABORT, as in Redis
			}
			w := c.writer()
			mark := len(w.b)
			s.writeError(w, aerr)
			c.wrote(w, mark)
			c.refused = true
			if cmd == nil && s.cfg.Forwarder != nil {
				// The cluster's command, refused before forward names it.
				if spec, _ := cmdspec.Lookup(s.cfg.Forwarder.Commands(), args); spec != nil {
					c.named = &spec.Name
				}
			}
			return true
		}
	}
	if c.subscribed && cmd != quitCommand {
		if err = s.subscribedCommand(c, args); err == nil {
			return true
		}
		cmd, c.refused = nil, true
	} else if c.multi != nil && cmd != quitCommand && cmd != resetCommand && (cmd == nil || err == nil) {
		if err = s.queue(c, r, cmd, args); err == nil {
			return true
		}
		if err == errRouteAgain { // EXEC
			c.retake, c.counted = true, true
			return true
		}
		// MULTI, WATCH and EXEC of an aborted transaction run, and fail;
		// anything else is refused before it runs.
		cmd, c.refused = nil, err != errNested && err != errWatchInside && err != errExecAbort
	} else if c.multi != nil && err != nil {
		// sluice's own command (RESET too) of a wrong number of arguments
		// or an unknown subcommand: Redis refuses it as it queues it, with
		// that error, and EXEC then aborts.
		c.multi.dirty = true
	} else if cmd == commandCommand && err == nil && s.cfg.Forwarder != nil && s.forwardCommand(c, r, args) {
		return true
	} else if cmd == infoCommand && err == nil && s.cfg.Forwarder != nil && s.forwardInfo(c, r, args) {
		return true
	} else if cmd == clusterCommand && err == nil && s.cfg.Forwarder != nil && s.forwardSlotKeys(c, r, args) {
		return true
	} else if cmd == nil && s.cfg.Forwarder != nil {
		err = s.forward(c, r, args)
		if err == nil {
			return true
		}
		if err == errRouteAgain {
			c.retake, c.counted = true, true
			return true
		}
		// EXEC and DISCARD without MULTI run, and fail, as in Redis.
		c.refused = err != errExecNoMulti && err != errDiscard
	}
	if err == nil && cmd.name == "hello" && c.pin != nil && s.helloPinned(c, r, args) {
		return true
	}
	if err == nil && cmd.request != nil && !cmd.argsFirst {
		err = s.keyLen(args)
	}
	if err == nil && cmd.request != nil {
		var req router.Request
		var pol *policy
		if cmd.policies && byPolicy(args) {
			req, pol, err = s.policies.Load().request(args)
		} else {
			req, err = cmd.request(args)
		}
		if err == nil && cmd.argsFirst {
			err = s.keyLen(args)
		}
		if err == nil && !s.bucketRouted(c, r) {
			c.retake, c.counted = true, true
			return true
		}
		if err == nil {
			seq := c.base + uint64(len(c.q))
			c.q = append(c.q, slot{state: slotWaiting, cmd: cmd, req: req, pol: pol})
			r.reqs = append(r.reqs, req)
			r.to = append(r.to, target{c: c, seq: seq})
			return true
		}
	}
	if err == nil && (cmd == resetCommand || cmd == quitCommand) {
		s.fenceReset(c) // before its reply's place is chosen: behind the fence
	}
	w := c.writer()
	mark := len(w.b)
	if err == errUnknownCommand {
		err = unknownCommand(args)
	}
	if err != nil {
		s.writeError(w, err)
	} else {
		cmd.local(s, c, w, args)
	}
	c.wrote(w, mark)
	if w.quit {
		w.quit = false
		c.closing = true
		return false
	}
	return true
}

// protocolError answers bytes that are not RESP, after the commands before
// them; the connection closes once it is written, as Redis closes it.
func (c *client) protocolError(msg string) {
	if !c.silenced() {
		w := c.writer()
		mark := len(w.b)
		w.b = appendProtocolError(w.b, msg)
		c.wrote(w, mark)
	}
	c.closing = true
}

// silenced reports whether CLIENT REPLY OFF, or a SKIP not yet spent on
// a command, drops what c is told now: Redis's protocol error too, which
// is no command's reply (its connection still closes).
func (c *client) silenced() bool { return c.replyOff || c.skip }

// emptyCommand takes an empty command (a blank inline line, a multibulk
// of no arguments): nothing runs, but Redis resets the client as after a
// command (processInputBuffer's resetClient), which spends a CLIENT REPLY
// SKIP. The command after it is answered.
func (c *client) emptyCommand() { c.skip = false }

// writer is where a reply rendered now goes: out when nothing is ahead of
// it, held behind undecided ones.
func (c *client) writer() *replyBuf {
	if c.inFlight() == 0 {
		return &c.out
	}
	return &c.held
}

// wrote records a reply that w took from mark on, as a slot when it waits
// in held.
func (c *client) wrote(w *replyBuf, mark int) {
	if w == &c.held {
		c.q = append(c.q, slot{state: slotHeld, n: len(w.b) - mark})
	}
}

// drain moves c's replies to out, in order, up to the first undecided one.
func (s *Server) drain(c *client) {
	var now int64 // read once, for the first answer commandstats counts
	for ; c.head < len(c.q); c.head++ {
		sl := &c.q[c.head]
		switch sl.state {
		case slotWaiting:
			c.compact()
			return
		case slotHeld:
			c.out.b = append(c.out.b, c.held.b[c.heldOff:c.heldOff+sl.n]...)
			c.heldOff += sl.n
		case slotDecided:
			// Failed, for commandstats: as Redis marks a command that
			// added an error to its reply, at any depth; EXEC only by its
			// own, its queued commands each by theirs.
			failed := sl.res.Err != nil
			if sl.cmd == nil {
				// A node's error reply is one sluice sends: Redis counts
				// every error reply, writeError only sluice's own.
				failed = s.stats.errors.addReplies(sl.raw) > 0
				if len(sl.txn) > 0 {
					failed = len(sl.raw) > 0 && sl.raw[0] == '-'
					execReplies(sl.raw, func(i int, raw []byte) {
						if i < len(sl.txn) {
							// None of sluice's time, which EXEC has, but
							// a sample: a node's latencystats has one.
							sl.txn[i].answered(0, 0, replyErrors(raw, nil) > 0)
						}
					})
				}
			}
			if sl.resets && !failed {
				s.resetStats(c)
			}
			if sl.stat != nil {
				if now == 0 {
					now = time.Now().UnixNano()
				}
				sl.stat.answered(sl.at, now, failed)
			}
			mark := len(c.out.b)
			if sl.cmd == nil {
				c.out.b = append(c.out.b, sl.raw...)
				c.waiting -= len(sl.raw)
			} else {
				s.reply(&c.out, sl)
			}
			if sl.silent {
				c.out.b = c.out.b[:mark]
				if sl.tunnel {
					c.out.b = appendPushes(c.out.b, sl.raw)
				}
			}
		}
		*sl = slot{} // let its key go
	}
	c.base += uint64(len(c.q))
	c.q, c.head = c.q[:0], 0
	if cap(c.q) > maxIdleSlots {
		c.q = nil
	}
	c.held.b, c.heldOff = c.held.b[:0], 0
	if cap(c.held.b) > keepReplies {
		c.held.b = nil
	}
	if len(c.pushed) > 0 {
		c.out.b = append(c.out.b, c.pushed...)
		c.pushed = nil
	}
}

// reset makes c a new connection again, as Redis's RESET: out of a
// transaction and of its subscriptions, back to RESP2, without a name
// (and cmdReset makes it the default user again).
func (c *client) reset() {
	if c.resp3 && c.pin == nil && c.inFlight() > 0 {
		// Back to RESP2: its next commands go on sluice's RESP2
		// connections, where they could run before those still in flight
		// on the RESP3 ones; as after HELLO 2, they wait until these are
		// answered.
		c.drainFirst = true
	}
	c.multi = nil
	c.unpin()
	switch {
	case len(c.tunnelWait) > 0:
		// Its commands sent before are answered first, as a node answers
		// them before RESET: the tunnel drops their subscriptions after.
		c.tunnel.Reset()
		c.subscribed, c.subs, c.tunnelReset = false, false, true
	case c.tunnel != nil:
		c.closeTunnel()
	}
	c.resp3, c.out.resp3, c.held.resp3 = false, false, false
	// As Redis 7.2, lib-name and lib-ver stay: they still say what
	// library is behind the connection.
	c.name = ""
	c.replyOff, c.skip = false, false
	c.readWrite, c.readOnly = false, false
	c.track = nil
	c.published()
}

// closeTunnel closes c's tunnel and forgets it: what it still sends, and
// its end, are dropped.
func (c *client) closeTunnel() {
	c.tunnel.Close()
	c.tunnel, c.subscribed, c.subs, c.tunnelReset = nil, false, false, false
	c.published()
	c.tunnelGen++
	if c.push != nil {
		c.push.drop()
	}
}

func cmdReset(s *Server, c *client, conn respConn, _ [][]byte) {
	s.resetClient(c)
	conn.WriteString("RESET")
}

// resetClient is RESET, subscribed or not: a new connection again, and
// the default user's, as in Redis (unauthenticated when it has a
// password).
func (s *Server) resetClient(c *client) {
	c.reset()
	c.user = s.cfg.Users.defaultUser()
	c.unauthMade = 0
	c.published()
}

// unpin lets c's WATCH connection go: its watches end with it.
func (c *client) unpin() {
	if c.pin != nil {
		c.pin.Release()
		c.unpinned()
	}
}

// unpinned forgets c's WATCH connection, let go. Its later commands go on
// other connections, where they could run before those still on it (a
// SET pipelined before EXEC, and a GET after it): c takes nothing more
// until the replies in flight are in (drainFirst).
func (c *client) unpinned() {
	c.pin = nil
	c.watching, c.watchingMore = nil, false
	c.drainFirst = c.inFlight() > 0
}

// offPin reports whether c may send now a command that goes on other
// connections than its WATCH one (a fan-out to every primary, INFO's
// keyspace, CLUSTER COUNTKEYSINSLOT): not while commands it sent on that
// one are in flight, which it could overtake (a KEYS that misses the SET
// pipelined before it); it waits until they are answered. Taken, what c
// sends after it waits until it is answered (offPinSent).
func (c *client) offPin() bool { return c.pin == nil || c.inFlight() == 0 }

// offPinSent follows the taking of a command that offPin let go on other
// connections than c's WATCH one: a command c sends after it, on that
// one, could run before it (a SET that a FLUSHALL before it deletes).
func (c *client) offPinSent() {
	if c.pin != nil {
		c.drainFirst = true
	}
}

// firstDrained reports whether c waited for its replies in flight
// (drainFirst) and they are in, and forgets it: c may be served again.
func (c *client) firstDrained() bool {
	if !c.drainFirst || c.inFlight() > 0 {
		return false
	}
	c.drainFirst = false
	return true
}

// cancelBlocked gives up the blocking command c still waits for: it sent
// all it will, as Redis unblocks a client whose connection closes. One
// not sent yet then runs without waiting (router.Blocked), as Redis runs
// what the client sent before it went away; one sent is answered if the
// node answered it before it saw the end.
func (c *client) cancelBlocked() {
	if c.block != nil {
		c.block.f.Blocked.Cancel()
	}
}

// abortBlocked ends the blocking command of c, closed: no answer to it
// would be written.
func (c *client) abortBlocked() {
	if c.block != nil {
		c.block.f.Blocked.Abort()
	}
}

// compact drops the slots and held bytes already replied to, once they are
// most of what c keeps: a client that always has something in flight never
// empties its queue.
func (c *client) compact() {
	if c.head >= maxIdleSlots && 2*c.head >= len(c.q) {
		n := copy(c.q, c.q[c.head:])
		clear(c.q[n:])
		c.q, c.base, c.head = c.q[:n], c.base+uint64(c.head), 0
	}
	if c.heldOff >= keepReplies && 2*c.heldOff >= len(c.held.b) {
		c.held.b = c.held.b[:copy(c.held.b, c.held.b[c.heldOff:])]
		c.heldOff = 0
	}
}

// maxIdleSlots and keepReplies bound what a client keeps between bursts:
// an idle connection should cost little more than its socket.
const (
	maxIdleSlots = 64
	keepReplies  = 512
)

// reply renders a decided bucket request's reply.
func (s *Server) reply(w *replyBuf, sl *slot) {
	if sl.res.Err != nil {
		s.writeError(w, sl.res.Err)
		return
	}
	s.count(sl)
	sl.cmd.reply(w, &sl.req, &sl.res)
}

// count adds a decided bucket request to INFO's and the metrics' figures,
// and makes a shadow policy's denial the allowed reply it is sent as.
func (s *Server) count(sl *slot) {
	if sl.cmd.counts {
		s.metrics.decided(sl.pol, &sl.res)
	}
	if sl.res.Limited && sl.pol != nil && sl.pol.shadow {
		// Allowed with the bucket's real remaining and reset; as for any
		// denial, nothing was taken.
		s.stats.shadowLimited.Add(1)
		sl.res.Limited, sl.res.RetryAfter = false, -1
	}
	if sl.res.Limited {
		s.stats.limited.Add(1)
	} else if sl.cmd.counts {
		s.stats.allowed.Add(1)
	}
}

// countLost counts the decisions a client that has gone will never be
// sent: the bucket took them all the same, the backend's decisions_<source>
// and the duration histogram count them, and so must throttle_allowed and
// sluice_decisions_total. pending are its slots decided and not yet
// rendered when it went; idx (nil: all of r's) are results that came in
// after, of which those of gone clients count.
func (s *Server) countLost(pending []slot, r *round, idx []int) {
	for i := range pending {
		if sl := &pending[i]; sl.state == slotDecided && sl.cmd != nil && sl.res.Err == nil {
			s.count(sl)
		}
	}
	if r == nil {
		return
	}
	lost := func(i int) {
		if i >= len(r.to) || !r.to[i].c.gone || r.res[i].Err != nil {
			return
		}
		c := r.to[i].c
		sl := &c.q[r.to[i].seq-c.base]
		sl.res = r.res[i]
		s.count(sl)
	}
	if idx == nil {
		for i := range r.to {
			lost(i)
		}
		return
	}
	for _, i := range idx {
		lost(i)
	}
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
	WriteMap(n int)
	WriteSet(n int)
	WriteVerbatim(text string)
	// Close closes the connection once the replies so far are written.
	Close() error
}

// keyLen checks a bucket command's key against --throttle-max-key-len.
func (s *Server) keyLen(args [][]byte) error {
	if len(args) > 1 && s.cfg.MaxKeyLen > 0 && len(args[1]) > s.cfg.MaxKeyLen {
		return fmt.Errorf("key must be at most %d bytes (--throttle-max-key-len)", s.cfg.MaxKeyLen)
	}
	return nil
}

// writeError is the one place where Go errors become RESP errors. A message
// that starts with an error code (WRONGTYPE, CLUSTERDOWN, ...) keeps it;
// anything else gets ERR.
func (s *Server) writeError(conn respConn, err error) {
	msg := err.Error()
	if !hasErrorCode(msg) {
		msg = "ERR " + msg
	}
	s.stats.errors.add(msg)
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

// replyBuf is where a client's replies are rendered, with redcon's
// encoding.
type replyBuf struct {
	b     []byte
	quit  bool
	resp3 bool // its client chose RESP3 (HELLO 3)
}

func (r *replyBuf) WriteArray(n int)         { r.b = redcon.AppendArray(r.b, n) }
func (r *replyBuf) WriteInt(n int)           { r.b = redcon.AppendInt(r.b, int64(n)) }
func (r *replyBuf) WriteInt64(n int64)       { r.b = redcon.AppendInt(r.b, n) }
func (r *replyBuf) WriteError(msg string)    { r.b = redcon.AppendError(r.b, msg) }
func (r *replyBuf) WriteString(s string)     { r.b = redcon.AppendString(r.b, s) }
func (r *replyBuf) WriteBulk(b []byte)       { r.b = redcon.AppendBulk(r.b, b) }
func (r *replyBuf) WriteBulkString(s string) { r.b = redcon.AppendBulkString(r.b, s) }

// WriteNull writes RESP3's null, or RESP2's null bulk string.
func (r *replyBuf) WriteNull() {
	if r.resp3 {
		r.b = append(r.b, "_\r\n"...)
	} else {
		r.b = redcon.AppendNull(r.b)
	}
}

// WriteMap begins a map of n pairs: in RESP2, the flat array of 2n
// elements Redis sends instead.
func (r *replyBuf) WriteMap(n int) {
	if r.resp3 {
		r.b = append(strconv.AppendInt(append(r.b, '%'), int64(n), 10), '\r', '\n')
	} else {
		r.b = redcon.AppendArray(r.b, 2*n)
	}
}

// WriteSet begins a set of n elements (RESP2: an array).
func (r *replyBuf) WriteSet(n int) {
	if r.resp3 {
		r.b = append(strconv.AppendInt(append(r.b, '~'), int64(n), 10), '\r', '\n')
	} else {
		r.b = redcon.AppendArray(r.b, n)
	}
}

// WriteVerbatim writes text as RESP3's verbatim string of format txt, as
// Redis answers INFO and CLIENT INFO (RESP2: a bulk string).
func (r *replyBuf) WriteVerbatim(text string) {
	if !r.resp3 {
		r.b = redcon.AppendBulkString(r.b, text)
		return
	}
	r.b = append(strconv.AppendInt(append(r.b, '='), int64(len(text)+4), 10), '\r', '\n')
	r.b = append(append(append(r.b, "txt:"...), text...), '\r', '\n')
}
func (r *replyBuf) Close() error { r.quit = true; return nil }
