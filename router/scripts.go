// Scripts for NOSCRIPT replay, kept in the cluster so that every sluice
// instance behind a load balancer replays the same ones.

package router

import (
	"bytes"
	"context"
	"crypto/sha1"
	"encoding/hex"
	"strings"
	"sync"
	"time"

	"github.com/redis/rueidis"
	"github.com/tidwall/redcon"
	"go.uber.org/zap"
)

// maxScripts bounds the scripts run by EVAL that one instance stores for
// NOSCRIPT replay.
const maxScripts = 10_000

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
	known map[string]struct{}
	ops   []scriptOp // for the cluster, in order
	busy  bool       // a goroutine is sending ops
}

// scriptOp is a store (sha and body), a flush, or a lookup (sha and found).
type scriptOp struct {
	sha, body string
	flush     bool
	found     func(body string, ok bool)
}

// RememberScript keeps a script that SCRIPT LOAD loaded through sluice, so
// that an EVALSHA of it that meets a node without it, through any
// instance, is replayed as EVAL, as rueidis does for its own scripts. It
// is stored at every load: one run by EVAL elsewhere may have been
// flushed since.
func (c *Cluster) RememberScript(body []byte) {
	c.scripts.mu.Lock()
	defer c.scripts.mu.Unlock()
	c.queueScript(scriptOp{sha: shaOf(body), body: string(body)})
}

// rememberRan keeps a script run by EVAL, as RememberScript does, once.
func (c *Cluster) rememberRan(body []byte) {
	s := &c.scripts
	s.mu.RLock()
	_, ok := s.known[string(body)]
	s.mu.RUnlock()
	if ok {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.known[string(body)]; ok || len(s.known) >= maxScripts {
		return
	}
	text := string(body)
	s.known[text] = struct{}{}
	c.queueScript(scriptOp{sha: shaOf(body), body: text})
}

// ForgetScripts forgets every script remembered, by every instance:
// SCRIPT FLUSH went to every primary.
func (c *Cluster) ForgetScripts() {
	c.scripts.mu.Lock()
	defer c.scripts.mu.Unlock()
	clear(c.scripts.known)
	c.queueScript(scriptOp{flush: true})
}

// scriptText finds the text of the script whose lower-case SHA1 is sha,
// and calls found with it, or with false when no instance remembers it
// (or the cluster does not answer), from another goroutine.
func (c *Cluster) scriptText(sha string, found func(body string, ok bool)) {
	c.scripts.mu.Lock()
	defer c.scripts.mu.Unlock()
	c.queueScript(scriptOp{sha: sha, found: found})
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
	case op.flush:
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
	case op.flush:
		if err != nil {
			// Other instances go on replaying the flushed scripts; the
			// nodes' NOSCRIPT after a flush is the only difference.
			c.log.Warn("SCRIPT FLUSH: sluice's scripts in the cluster not deleted", zap.Error(err))
		}
	case op.found == nil:
		if err != nil {
			c.scripts.mu.Lock()
			delete(c.scripts.known, op.body) // the next EVAL stores it again
			c.scripts.mu.Unlock()
		}
	default:
		for i, op := range ops {
			if i < len(bodies) {
				// A nil (no instance remembers it) is no string. The hash is
				// a key any caller with access to it may write: a text that
				// is not the script the EVALSHA named is not run for it.
				if body, err := bodies[i].ToString(); err == nil && shaOf([]byte(body)) == op.sha {
					op.found(body, true)
					continue
				}
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
