package proxy

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluice-rl/sluice/router"
)

// CLIENT LIST shows every client of sluice, each served by its own event
// loop or goroutine. What it shows of a client lives in a view that the
// client's own goroutine publishes to: its name, user and modes where they
// change (rarely, under the view's lock), its last command and when it
// came with every command (two atomic stores). Other goroutines read only
// the view, never the client.
type clientView struct {
	id      int64
	addr    string
	laddr   string // the address it connected to
	unix    bool   // it connected to a Unix socket
	fd      int    // its socket's descriptor, -1 when it has none sluice can see
	created time.Time

	last atomic.Int64           // unix ns of its last command, or of a write to it
	cmd  atomic.Pointer[string] // its last command's name, from a command table
	// blockedOn is its blocking command once sent, unanswered, for CLIENT
	// UNBLOCK and, while it waits at its node, CLIENT LIST's b and INFO's
	// blocked_clients; nil when none. Its Blocked and protocol stay as
	// they are while it waits.
	blockedOn atomic.Pointer[router.Forward]
	// tunnel is its subscriptions' (router.Tunnel), whose counts are
	// CLIENT LIST's sub, psub and ssub; nil without one.
	tunnel atomic.Pointer[router.Tunnel]

	// kill ends its connection from another goroutine (CLIENT KILL): its
	// transport sets it, and a loop takes it away (under killMu) before
	// it closes the socket, whose descriptor may then be another's.
	killMu sync.Mutex
	kill   func()
	// killed tells its own goroutine or loop, which may yet read what it
	// sent before the kill (a shut socket still gives what it holds), to
	// close it instead.
	killed atomic.Bool
	// left is set once it is no longer counted as connected: by its own
	// goroutine or loop as it leaves, or by the KILL that ended it, which
	// Redis answers with the client already gone.
	left atomic.Bool

	mu sync.Mutex
	viewFields
}

// viewFields are a client's fields that change only through commands that
// set them (CLIENT SETNAME, HELLO, AUTH, MULTI, SUBSCRIBE, RESET, ...).
type viewFields struct {
	name, lib, ver, user string
	resp3, pubsub        bool
	noEvict, tracking    bool
	readOnly             bool
	multi                int // commands queued in its transaction; -1 outside one
}

// wrote records that the client was just written to: as Redis's
// lastinteraction, which its writes set too, a client being answered, or
// sent messages, is not idle, though its last command came long ago.
func (v *clientView) wrote() {
	v.last.Store(time.Now().UnixNano())
}

// clientTable is every connected client's view, by id.
type clientTable struct {
	mu sync.Mutex
	m  map[int64]*clientView
}

func (t *clientTable) add(v *clientView) {
	t.mu.Lock()
	if t.m == nil {
		t.m = make(map[int64]*clientView)
	}
	t.m[v.id] = v
	t.mu.Unlock()
}

func (t *clientTable) remove(id int64) {
	t.mu.Lock()
	delete(t.m, id)
	t.mu.Unlock()
}

// list is the views of the clients kept by keep, in id order (the order
// Redis lists them in).
func (t *clientTable) list(keep func(*clientView) bool) []*clientView {
	t.mu.Lock()
	out := make([]*clientView, 0, len(t.m))
	for _, v := range t.m {
		if keep(v) {
			out = append(out, v)
		}
	}
	t.mu.Unlock()
	slices.SortFunc(out, func(a, b *clientView) int { return int(a.id - b.id) })
	return out
}

// published records c's fields for CLIENT LIST; it is called wherever one
// of them changes.
func (c *client) published() {
	f := viewFields{name: c.name, lib: c.lib, ver: c.ver, resp3: c.resp3, multi: -1,
		pubsub: c.subscribed || c.subs, noEvict: c.noEvict, tracking: c.track != nil, readOnly: c.readOnly}
	if c.multi != nil {
		f.multi = c.multi.n
	}
	if c.user != nil {
		f.user = c.user.name
	}
	c.view.tunnel.Store(c.tunnel)
	c.view.mu.Lock()
	c.view.viewFields = f
	c.view.mu.Unlock()
}

// setKill sets how another goroutine ends v's connection; nil once it
// is closed.
func (v *clientView) setKill(f func()) {
	v.killMu.Lock()
	v.kill = f
	v.killMu.Unlock()
}

// killConn ends v's connection, as Redis frees a killed client: what it
// sent and was not answered is dropped. Its own goroutine then sees the
// connection end and lets it go. It reports whether this call ended it:
// not when another KILL, or its own close, came first.
func (v *clientView) killConn() bool {
	v.killMu.Lock()
	defer v.killMu.Unlock()
	if v.kill == nil {
		return false
	}
	v.killed.Store(true)
	v.kill()
	v.kill = nil
	return true
}

// waiting reports whether its blocking command waits at its node.
func (v *clientView) waiting() bool {
	f := v.blockedOn.Load()
	return f != nil && f.Blocked.Waits()
}

// line is v's line of CLIENT LIST and CLIENT INFO, with Redis 7.0's
// field names in its order, then 7.2's lib-name and lib-ver. The fields
// of Redis's own per-client buffers and memory (qbuf, qbuf-free, argv-mem,
// multi-mem, rbs, rbp, obl, oll, omem, tot-mem) are 0, as sluice keeps no
// such buffers per client, and events is "r": they are there because
// client libraries read them as numbers (redis-py's client_info() raises
// KeyError on a line without them). redir is 0 while tracking (sluice
// takes no REDIRECT), else -1, as Redis's.
func (v *clientView) line(now time.Time) string {
	v.mu.Lock()
	f := v.viewFields
	v.mu.Unlock()
	flags := ""
	// In Redis's order: P, x, b, t, U, r, e.
	if f.pubsub {
		flags += "P"
	}
	if f.multi >= 0 {
		flags += "x"
	}
	if v.waiting() {
		flags += "b"
	}
	if f.tracking {
		flags += "t"
	}
	if v.unix {
		flags += "U"
	}
	if f.readOnly {
		flags += "r"
	}
	if f.noEvict {
		flags += "e"
	}
	if flags == "" {
		flags = "N"
	}
	cmd := "NULL"
	if p := v.cmd.Load(); p != nil {
		cmd = *p
	}
	// Idle since it connected until its first command, as Redis counts
	// from a client's creation.
	last := v.created.UnixNano()
	if l := v.last.Load(); l > 0 {
		last = l
	}
	idle := max(now.UnixNano()-last, 0) / int64(time.Second)
	resp := 2
	if f.resp3 {
		resp = 3
	}
	user := f.user
	if user == "" {
		user = "default"
	}
	redir := -1
	if f.tracking {
		redir = 0
	}
	var chans, pats, shards int64
	if t := v.tunnel.Load(); t != nil {
		chans, pats, shards = t.Counts()
	}
	return fmt.Sprintf("id=%d addr=%s laddr=%s fd=%d name=%s age=%d idle=%d flags=%s db=0 sub=%d psub=%d ssub=%d multi=%d "+
		"qbuf=0 qbuf-free=0 argv-mem=0 multi-mem=0 rbs=0 rbp=0 obl=0 oll=0 omem=0 tot-mem=0 events=r cmd=%s user=%s redir=%d resp=%d lib-name=%s lib-ver=%s\n",
		v.id, v.addr, v.laddr, v.fd, f.name, int64(now.Sub(v.created)/time.Second), idle, flags, chans, pats, shards, f.multi,
		cmd, user, redir, resp, f.lib, f.ver)
}

// clientList answers CLIENT LIST [TYPE normal|pubsub|master|replica|slave]
// or CLIENT LIST [ID id [id ...]], as Redis 7.0: TYPE and ID do not
// combine, and ID lists the clients in the order given, one as often as
// it is given, each ID a number as Redis reads one (no leading zero, no
// "+"); 0 and negative IDs match no client.
func (s *Server) clientList(args [][]byte) (string, error) {
	now := time.Now()
	var b strings.Builder
	switch {
	case len(args) == 2 && strings.EqualFold(string(args[0]), "TYPE"):
		kind, err := clientType(args[1])
		if err != nil {
			return "", err
		}
		for _, v := range s.clients.list(func(v *clientView) bool {
			v.mu.Lock()
			pubsub := v.pubsub
			v.mu.Unlock()
			return isType(kind, pubsub)
		}) {
			b.WriteString(v.line(now))
		}
	case len(args) > 1 && strings.EqualFold(string(args[0]), "ID"):
		ids := make([]int64, len(args)-1)
		for i, a := range args[1:] {
			id, ok := parseRedisInt(a)
			if !ok {
				return "", errors.New("Invalid client ID")
			}
			ids[i] = id
		}
		views := s.clients.list(func(v *clientView) bool { return slices.Contains(ids, v.id) })
		for _, id := range ids {
			if i, ok := slices.BinarySearchFunc(views, id, func(v *clientView, id int64) int { return cmp.Compare(v.id, id) }); ok {
				b.WriteString(views[i].line(now))
			}
		}
	case len(args) > 0:
		return "", errors.New("syntax error")
	default:
		for _, v := range s.clients.list(func(*clientView) bool { return true }) {
			b.WriteString(v.line(now))
		}
	}
	return b.String(), nil
}

// clientType reads a client type as CLIENT LIST and CLIENT KILL take it
// (Redis's getClientTypeByName).
func clientType(name []byte) (string, error) {
	switch kind := lowerName(name); kind {
	case "normal", "pubsub", "master", "replica", "slave":
		return kind, nil
	}
	return "", fmt.Errorf("Unknown client type '%s'", name)
}

// isType reports whether a client, subscribed or not, is of kind:
// sluice's clients are normal or pubsub, never a master or a replica.
func isType(kind string, pubsub bool) bool {
	return kind == "pubsub" && pubsub || kind == "normal" && !pubsub
}

// clientKill answers CLIENT KILL as Redis 7.0's clientKillCommand: the
// old form, an address, answers OK or "No such client" and may end the
// caller itself; the new one, filters (ID, TYPE, ADDR, LADDR, USER,
// SKIPME) that all must match, answers how many clients it ended, the
// caller not among them unless SKIPME no. The caller is ended after its
// reply, the others at once.
func (s *Server) clientKill(c *client, conn respConn, args [][]byte) {
	var addr, laddr, user, kind string
	var id int64
	skipMe := true
	switch {
	case len(args) == 3:
		addr, skipMe = string(args[2]), false
	case len(args) > 3:
		for i := 2; i < len(args); i += 2 {
			more := i+1 < len(args)
			switch opt := lowerName(args[i]); {
			case opt == "id" && more:
				n, ok := parseRedisInt(args[i+1])
				if !ok || n < 1 {
					s.writeError(conn, errors.New("client-id should be greater than 0"))
					return
				}
				id = n
			case opt == "type" && more:
				var err error
				if kind, err = clientType(args[i+1]); err != nil {
					s.writeError(conn, err)
					return
				}
			case opt == "addr" && more:
				addr = string(args[i+1])
			case opt == "laddr" && more:
				laddr = string(args[i+1])
			case opt == "user" && more:
				user = string(args[i+1])
				if !s.userExists(user) {
					s.writeError(conn, fmt.Errorf("No such user '%s'", args[i+1]))
					return
				}
			case opt == "skipme" && more:
				switch lowerName(args[i+1]) {
				case "yes":
					skipMe = true
				case "no":
					skipMe = false
				default:
					s.writeError(conn, errors.New("syntax error"))
					return
				}
			default:
				s.writeError(conn, errors.New("syntax error"))
				return
			}
		}
	default:
		s.writeError(conn, errors.New("syntax error"))
		return
	}
	killSelf := false
	victims := s.clients.list(func(v *clientView) bool {
		if (addr != "" && v.addr != addr) || (laddr != "" && v.laddr != laddr) || (id != 0 && v.id != id) {
			return false
		}
		v.mu.Lock()
		pubsub, name := v.pubsub, v.user
		v.mu.Unlock()
		if name == "" {
			name = "default" // yet to authenticate: Redis's default user
		}
		if kind != "" && !isType(kind, pubsub) {
			return false
		}
		if user != "" && name != user {
			return false
		}
		if v == c.view {
			killSelf = !skipMe
			return !skipMe
		}
		return true
	})
	n := 0
	for _, v := range victims {
		switch {
		case v == c.view:
			n++
		case v.killConn():
			n++
			s.leave(v)
		}
	}
	switch {
	case len(args) > 3:
		conn.WriteInt(n)
	case n == 0:
		s.writeError(conn, errors.New("No such client"))
		return
	default:
		conn.WriteString("OK")
	}
	if killSelf {
		conn.Close()
	}
}

// userExists reports whether a user of that name is defined, as CLIENT
// KILL USER checks it.
func (s *Server) userExists(name string) bool {
	if s.cfg.Users == nil {
		return name == "default"
	}
	return s.cfg.Users.byName[name] != nil
}

// clientUnblock answers CLIENT UNBLOCK id [TIMEOUT|ERROR] as Redis 7.0:
// 1 when the client was blocked, and is then answered its command's
// timeout reply or UNBLOCKED (unless its node answered it first, which
// it then gets), else 0.
func (s *Server) clientUnblock(conn respConn, args [][]byte) {
	if len(args) > 4 {
		s.writeError(conn, fmt.Errorf("unknown subcommand or wrong number of arguments for '%s'. Try CLIENT HELP.", args[1]))
		return
	}
	withError := false
	if len(args) == 4 {
		switch lowerName(args[3]) {
		case "timeout":
		case "error":
			withError = true
		default:
			s.writeError(conn, errors.New("ERR CLIENT UNBLOCK reason should be TIMEOUT or ERROR"))
			return
		}
	}
	id, ok := parseRedisInt(args[2])
	if !ok {
		s.writeError(conn, errors.New("value is not an integer or out of range"))
		return
	}
	for _, v := range s.clients.list(func(v *clientView) bool { return v.id == id }) {
		if f := v.blockedOn.Load(); f != nil {
			reply := timedOutReply(f.RESP3)
			if withError {
				reply = []byte("-UNBLOCKED client unblocked via CLIENT UNBLOCK\r\n")
			}
			if f.Blocked.Unblock(reply) {
				// Redis 7.0 counts the command it unblocks as failed,
				// whatever it answers it (updateStatsOnUnblock): by its
				// error reply, or here for its timeout's. The error
				// counts against CLIENT UNBLOCK too, which added it.
				if withError {
					s.cmdStats.of("client|unblock").failed.Add(1)
				} else if name := v.cmd.Load(); name != nil {
					s.cmdStats.of(*name).failed.Add(1)
				}
				conn.WriteInt(1)
				return
			}
		}
	}
	conn.WriteInt(0)
}
