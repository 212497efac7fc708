// Scripts for NOSCRIPT replay, kept in the cluster so that every sluice
// instance behind a load balancer replays the same ones.

package router

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha1"
	"encoding/hex"
	"fmt"
	"net"
	"strings"
	"sync"
	"time"

	"github.com/redis/rueidis"
	"github.com/tidwall/redcon"
	"go.uber.org/zap"

	"github.com/sluice-rl/sluice/router/reply"
)

// maxScripts bounds the scripts run by EVAL that one instance stores for
// NOSCRIPT replay, and the scripts it loads on each new connection.
const maxScripts = 10_000

// maxLoadBytes bounds the texts of the scripts an instance loads on each
// new connection (a connection is not made to wait for more), and of
// those run by EVAL it stores (distinct large scripts would otherwise
// hold up to maxScripts times their size).
const maxLoadBytes = 16 << 20

// scripts are the scripts loaded or run through sluice, for NOSCRIPT
// replay. Their text lives in the cluster (scriptsKey, a hash by SHA1),
// not in the instance: a client's EVALSHA may reach another instance than
// its SCRIPT LOAD did, and a SCRIPT FLUSH through one instance must hold
// for the others. The cluster is asked only when a node answers NOSCRIPT,
// which an EVAL of the text then cures on that node.
//
// The cluster is told in the order this instance learns things, one
// request at a time on a goroutine that lives while there are any: a
// lookup queued after a flush must not find what the flush deletes.
type scripts struct {
	mu sync.RWMutex
	// known are the scripts run by EVAL this instance has stored. A client
	// may EVAL the same script at every call (the article's client does):
	// one already known costs a read-locked map lookup, not a SHA1 and a
	// write.
	known      map[string]struct{}
	knownBytes int
	ops        []scriptOp // for the cluster, in order
	busy       bool       // a goroutine is sending ops
	// loads are the texts of the scripts this instance knows (loaded, run
	// by EVAL, or replayed through it), by SHA1, which every new
	// connection to a node gets by SCRIPT LOAD before any client's
	// command (loadConn): a node that never saw them (a promoted replica,
	// a restarted node) would answer an EVALSHA NOSCRIPT, and its replay
	// would run after the commands its client sent behind it. loadCmds
	// is their SCRIPT LOADs, appended to (never rewritten: a dial may be
	// writing what it took), or nil to be made again from loads.
	loads     map[string]string
	loadBytes int
	loadCmds  []byte
	// gen counts the flushes (ForgetScripts): a script loaded or run by a
	// command sent before a flush, answered after it, was flushed, and is
	// not stored (loadingScript, rememberRan take the gen read as their
	// command was sent).
	gen uint64
	// loading are the SCRIPT LOADs sent and not yet answered by every
	// primary, by SHA1. SCRIPT LOAD does not reach the replicas: an
	// EVALSHA_RO pipelined behind it to a replica meets NOSCRIPT before
	// the primaries answer the load, and the script is stored only then;
	// looked up at once, it would not be found.
	loading map[string]*scriptLoad
}

// scriptLoad is a script being loaded through this instance, and the
// replays waiting for it (scriptText).
type scriptLoad struct {
	body    string
	parts   int    // parts of SCRIPT LOAD fan-outs not answered yet
	gen     uint64 // scripts.gen as the last of them was sent
	failed  bool   // a primary answered one other than its SHA1
	waiting []func(body string, ok bool)
}

// scriptOp is a store (sha and body), a flush, or a lookup (sha, found
// and gen).
type scriptOp struct {
	sha, body string
	flush     *ScriptsFlush
	found     func(body string, ok bool)
	// gen is scripts.gen as the lookup was queued: one that a flush
	// overtook finds what the flush's deletion, queued behind it, deletes.
	gen uint64
}

// ScriptsFlush is the deletion of the scripts every instance replays,
// which a SCRIPT FLUSH through this one queued (ForgetScripts): a part of
// that SCRIPT FLUSH given it (Forward.Flush) is answered once the
// deletion is answered too, so that the client's reply means no instance
// replays a flushed script, and not only this one.
type ScriptsFlush struct {
	mu      sync.Mutex
	deleted bool
	f       *forwarded // the part answered before the deletion
	r       []byte     // its reply
}

// hold reports whether f's reply r must wait for the deletion, and keeps
// them for it then.
func (fl *ScriptsFlush) hold(f *forwarded, r []byte) bool {
	fl.mu.Lock()
	defer fl.mu.Unlock()
	if fl.deleted {
		return false
	}
	fl.f, fl.r = f, r
	return true
}

// done marks the deletion answered (or failed), and answers the part
// that waited for it.
func (fl *ScriptsFlush) done() {
	fl.mu.Lock()
	fl.deleted = true
	f, r := fl.f, fl.r
	fl.f, fl.r = nil, nil
	fl.mu.Unlock()
	if f != nil {
		f.finish(r)
	}
}

// load keeps a script for new connections (loadConn); s.mu is held.
func (s *scripts) load(sha, text string) {
	if _, ok := s.loads[sha]; ok || len(s.loads) >= maxScripts || s.loadBytes+len(text) > maxLoadBytes {
		return
	}
	if s.loads == nil {
		s.loads = map[string]string{}
	}
	s.loads[sha] = text
	s.loadBytes += len(text)
	if s.loadCmds != nil {
		s.loadCmds = appendScriptLoad(s.loadCmds, text)
	}
}

// unload forgets a script for new connections; s.mu is held.
func (s *scripts) unload(sha string) {
	if text, ok := s.loads[sha]; ok {
		delete(s.loads, sha)
		s.loadBytes -= len(text)
		s.loadCmds = nil
	}
}

// loadCmds are the SCRIPT LOADs of the scripts kept for new connections,
// and how many they are.
func (c *Cluster) loadCmds() ([]byte, int) {
	s := &c.scripts
	s.mu.RLock()
	cmds, n := s.loadCmds, len(s.loads)
	s.mu.RUnlock()
	if cmds != nil || n == 0 {
		return cmds, n
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.loadCmds == nil {
		cmds := make([]byte, 0, s.loadBytes+len(s.loads)*48)
		for _, text := range s.loads {
			cmds = appendScriptLoad(cmds, text)
		}
		s.loadCmds = cmds
	}
	return s.loadCmds, len(s.loads)
}

// appendScriptLoad appends SCRIPT LOAD of text.
func appendScriptLoad(dst []byte, text string) []byte {
	dst = append(dst, "*3\r\n$6\r\nSCRIPT\r\n$4\r\nLOAD\r\n"...)
	return redcon.AppendBulkString(dst, text)
}

// loadConn sends SCRIPT LOAD of every script kept for new connections on
// conn, a new connection to a node for clients' commands, and reads their
// replies, before any client's command goes on it: an EVALSHA sent on it
// then meets NOSCRIPT only if the node loses the script while it lives
// (SCRIPT FLUSH sent to it alone). A refusal (an ACL user allowed EVALSHA
// but not SCRIPT, a script the node cannot compile) leaves that script to
// the replay.
func (c *Cluster) loadConn(conn net.Conn, br *bufio.Reader, addr string) error {
	cmds, n := c.loadCmds()
	if n == 0 {
		return nil
	}
	// The node compiles each script it lacks: more than a handshake's
	// round trip, bounded as a forwarded command is.
	conn.SetDeadline(time.Now().Add(c.forwardTimeout()))
	if _, err := conn.Write(cmds); err != nil {
		return notSent{err}
	}
	for range n {
		r, err := reply.Read(br, nil)
		if err != nil {
			return notSent{err}
		}
		if len(r) == 0 || (r[0] != '$' && r[0] != '-' && r[0] != '!') {
			return fmt.Errorf("router: SCRIPT LOAD to %s answered %q", addr, bytes.TrimRight(r[:min(len(r), 128)], "\r\n"))
		}
	}
	conn.SetDeadline(time.Time{})
	return nil
}

// ScriptsGen is the generation of the scripts remembered, which
// ForgetScripts changes: Forward.ScriptsGen takes it.
func (c *Cluster) ScriptsGen() uint64 {
	c.scripts.mu.RLock()
	defer c.scripts.mu.RUnlock()
	return c.scripts.gen
}

// rememberRan keeps a script run by EVAL, as loadedScript does, once,
// unless a SCRIPT FLUSH was sent after the EVAL (gen, ScriptsGen read as
// it was sent, is past).
func (c *Cluster) rememberRan(body []byte, gen uint64) {
	s := &c.scripts
	s.mu.RLock()
	_, ok := s.known[string(body)]
	full := len(s.known) >= maxScripts || s.knownBytes+len(body) > maxLoadBytes
	s.mu.RUnlock()
	if ok || full {
		// Past the bounds, an EVAL of a script not stored costs a
		// read-locked look too, not the write lock every time.
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.known[string(body)]; ok || len(s.known) >= maxScripts || s.knownBytes+len(body) > maxLoadBytes || gen != s.gen {
		return
	}
	text, sha := string(body), shaOf(body)
	s.known[text] = struct{}{}
	s.knownBytes += len(text)
	s.load(sha, text)
	c.queueScript(scriptOp{sha: sha, body: text})
}

// ForgetScripts forgets every script remembered, by every instance:
// SCRIPT FLUSH goes to every primary. The deletion in the cluster is
// queued behind the stores this instance queued before (a store landing
// after it would bring a flushed script back for the others); the
// SCRIPT FLUSH's parts wait for it (Forward.Flush).
func (c *Cluster) ForgetScripts() *ScriptsFlush {
	c.scripts.mu.Lock()
	defer c.scripts.mu.Unlock()
	clear(c.scripts.known)
	c.scripts.knownBytes = 0
	c.scripts.gen++
	c.scripts.loads, c.scripts.loadBytes, c.scripts.loadCmds = nil, 0, nil
	fl := &ScriptsFlush{}
	c.queueScript(scriptOp{flush: fl})
	return fl
}

// scriptText finds the text of the script whose lower-case SHA1 is sha,
// and calls found with it, or with false when no instance remembers it
// (or the cluster does not answer), from another goroutine.
func (c *Cluster) scriptText(sha string, found func(body string, ok bool)) {
	c.scripts.mu.Lock()
	defer c.scripts.mu.Unlock()
	if l := c.scripts.loading[sha]; l != nil && l.gen == c.scripts.gen {
		l.waiting = append(l.waiting, found)
		return
	}
	c.queueScript(scriptOp{sha: sha, found: found, gen: c.scripts.gen})
}

// loadingScript notes a part of a SCRIPT LOAD fan-out of body, about to
// be sent, and returns the script's SHA1, for loadedScript. gen is
// ScriptsGen read as the SCRIPT LOAD was sent: a SCRIPT FLUSH sent after
// it flushes it.
func (c *Cluster) loadingScript(body []byte, gen uint64) string {
	s := &c.scripts
	sha := shaOf(body)
	s.mu.Lock()
	defer s.mu.Unlock()
	l := s.loading[sha]
	if l == nil {
		if s.loading == nil {
			s.loading = map[string]*scriptLoad{}
		}
		l = &scriptLoad{body: string(body)}
		s.loading[sha] = l
	}
	l.parts++
	l.gen = gen
	return sha
}

// loadedScript takes a primary's answer r to a part of a SCRIPT LOAD of
// sha. Once every part is answered, a script every primary loaded, that
// no SCRIPT FLUSH sent since flushed, is kept, so that an EVALSHA of it
// that meets a node without it, through any instance, is replayed as
// EVAL, as rueidis does for its own scripts (stored at every load: one
// run by EVAL elsewhere may have been flushed since). Not one a primary
// refused: one that does not compile, replayed, would answer its compile
// error where Redis answers NOSCRIPT. The replays waiting for it run it
// then, as the EVALSHAs behind the load would on a node that has it;
// else they look it up in the cluster.
func (c *Cluster) loadedScript(sha string, r []byte) {
	s := &c.scripts
	s.mu.Lock()
	defer s.mu.Unlock()
	l := s.loading[sha]
	l.parts--
	l.failed = l.failed || len(r) == 0 || r[0] != '$'
	if l.parts > 0 {
		return
	}
	delete(s.loading, sha)
	loaded := !l.failed && l.gen == s.gen
	if loaded {
		s.load(sha, l.body)
		c.queueScript(scriptOp{sha: sha, body: l.body})
	}
	for _, found := range l.waiting {
		if loaded {
			// Not on this goroutine, which may be the one that would
			// write the replay.
			go found(l.body, true)
		} else {
			c.queueScript(scriptOp{sha: sha, found: found, gen: s.gen})
		}
	}
}

// scriptLoadBody is the script of a SCRIPT LOAD encoded as AppendCommand
// encodes it.
func scriptLoadBody(cmd []byte) ([]byte, bool) {
	const head = "*3\r\n$6\r\nSCRIPT\r\n$4\r\nLOAD\r\n"
	if len(cmd) <= len(head) || cmd[0] != '*' || !bytes.EqualFold(cmd[:len(head)], []byte(head)) {
		return nil, false
	}
	return bulkAt(cmd[len(head):])
}

// queueScript queues op for the cluster; c.scripts.mu is held.
func (c *Cluster) queueScript(op scriptOp) {
	s := &c.scripts
	s.ops = append(s.ops, op)
	if !s.busy {
		s.busy = true
		go c.sendScripts()
	}
}

// sendScripts sends the queued ops, in order, until none is left.
func (c *Cluster) sendScripts() {
	s := &c.scripts
	for {
		s.mu.Lock()
		ops := s.ops
		s.ops = nil
		if len(ops) == 0 {
			s.busy = false
			s.mu.Unlock()
			return
		}
		s.mu.Unlock()
		for len(ops) > 0 {
			ops = ops[c.sendScriptOps(ops):]
		}
	}
}

// sendScriptOps sends ops[0], or the lookups at the head of ops in one
// HMGET (after a failover every EVALSHA on the promoted replica's keys
// meets NOSCRIPT at once), and returns how many it sent.
func (c *Cluster) sendScriptOps(ops []scriptOp) int {
	n := 1
	if ops[0].found != nil {
		for n < len(ops) && ops[n].found != nil {
			n++
		}
	}
	ctx, cancel := context.WithTimeout(c.ctx, 4*c.cfg.Timeout+100*time.Millisecond)
	defer cancel()
	cl := c.client.Load()
	if cl == nil {
		c.scriptsSent(ops[:n], nil, rueidis.ErrClosing)
		return n
	}
	client := *cl
	var cmd rueidis.Completed
	switch op := ops[0]; {
	case op.flush != nil:
		cmd = client.B().Del().Key(scriptsKey).Build()
	case op.found == nil:
		cmd = client.B().Hset().Key(scriptsKey).FieldValue().FieldValue(op.sha, op.body).Build()
	default:
		shas := make([]string, n)
		for i := range n {
			shas[i] = ops[i].sha
		}
		cmd = client.B().Hmget().Key(scriptsKey).Field(shas...).Build()
	}
	res := client.Do(ctx, cmd)
	if ops[0].found == nil {
		c.scriptsSent(ops[:n], nil, res.Error())
	} else {
		bodies, err := res.ToArray()
		c.scriptsSent(ops[:n], bodies, err)
	}
	return n
}

// scriptsSent takes the cluster's answer to ops: err, or the bodies
// looked up.
func (c *Cluster) scriptsSent(ops []scriptOp, bodies []rueidis.RedisMessage, err error) {
	switch op := ops[0]; {
	case op.flush != nil:
		if err != nil {
			// Other instances go on replaying the flushed scripts; the
			// nodes' NOSCRIPT after a flush is the only difference. The
			// primaries flushed: the client hears so.
			c.log.Warn("SCRIPT FLUSH: sluice's scripts in the cluster not deleted", zap.Error(err))
		}
		op.flush.done()
	case op.found == nil:
		if err != nil {
			c.scripts.mu.Lock()
			if _, ok := c.scripts.known[op.body]; ok { // the next EVAL stores it again
				delete(c.scripts.known, op.body)
				c.scripts.knownBytes -= len(op.body)
			}
			c.scripts.mu.Unlock()
		}
	default:
		for i, op := range ops {
			if i < len(bodies) {
				// A nil (no instance remembers it) is no string. The hash is
				// a key any caller with access to it may write: a text that
				// is not the script the EVALSHA named is not run for it.
				if body, err := bodies[i].ToString(); err == nil && shaOf([]byte(body)) == op.sha {
					// Loaded on the next connections too: the replay is
					// not in its client's order. Not once flushed since:
					// loaded on a node again, it would answer an EVALSHA
					// after the flush's reply.
					c.scripts.mu.Lock()
					if op.gen == c.scripts.gen {
						c.scripts.load(op.sha, body)
					}
					c.scripts.mu.Unlock()
					op.found(body, true)
					continue
				}
			}
			if err == nil {
				// No instance remembers it now (a SCRIPT FLUSH through
				// another): new connections do not load it again.
				c.scripts.mu.Lock()
				c.scripts.unload(op.sha)
				c.scripts.mu.Unlock()
			}
			op.found("", false)
		}
	}
}

// shaOf is body's SHA1, as Redis names scripts.
func shaOf(body []byte) string {
	sum := sha1.Sum(body)
	return hex.EncodeToString(sum[:])
}

// evalshaSHA is the lower-case SHA1 of an EVALSHA (or EVALSHA_RO) encoded as
// AppendCommand encodes it.
func evalshaSHA(cmd []byte) (string, bool) {
	_, rest, ok := bytes.Cut(cmd, []byte("\r\n")) // the array header
	switch {
	case !ok:
		return "", false
	case len(rest) > 13 && bytes.EqualFold(rest[:13], []byte("$7\r\nEVALSHA\r\n")):
		rest = rest[13:]
	case len(rest) > 17 && bytes.EqualFold(rest[:17], []byte("$10\r\nEVALSHA_RO\r\n")):
		rest = rest[17:]
	default:
		return "", false
	}
	if len(rest) < 47 || string(rest[:5]) != "$40\r\n" || string(rest[45:47]) != "\r\n" {
		return "", false
	}
	return strings.ToLower(string(rest[5:45])), true
}

// evalWith rewrites an EVALSHA (or EVALSHA_RO) that evalshaSHA read as
// the EVAL (or EVAL_RO) of body.
func evalWith(cmd []byte, body string) []byte {
	_, rest, _ := bytes.Cut(cmd, []byte("\r\n"))
	header := cmd[:len(cmd)-len(rest)]
	eval := "EVAL"
	if len(rest) > 17 && bytes.EqualFold(rest[:17], []byte("$10\r\nEVALSHA_RO\r\n")) {
		eval, rest = "EVAL_RO", rest[17:]
	} else {
		rest = rest[13:]
	}
	out := append(bytes.Clone(header), redcon.AppendBulkString(nil, eval)...)
	out = redcon.AppendBulkString(out, body)
	return append(out, rest[47:]...)
}
