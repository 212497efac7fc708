package proxy

import (
	"bytes"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
)

// errorStats counts the error replies sluice sends, in all (INFO's
// total_error_replies) and by error code (INFO errorstats), as Redis 7.0
// counts them (afterErrorReply): a node's error passed on counts under
// its own code, so a client sees through sluice the errorstats it would
// see on one node.
type errorStats struct {
	total atomic.Int64
	mu    sync.Mutex
	codes map[string]int64
}

// maxErrorCodes bounds the codes errorStats keeps: a script can answer an
// error under any code it makes up, and what sluice holds must not grow
// with what clients send. Past it sluice counts an error of a new code in
// the total only. Redis 7.0 keeps every code; 7.4 stops at the same
// number, but then drops them all for one ERRORSTATS_DISABLED.
const maxErrorCodes = 128

// add counts one error reply whose message (without '-' and CRLF) is
// msg.
func (e *errorStats) add(msg string) {
	e.total.Add(1)
	code := errorCode(msg)
	e.mu.Lock()
	defer e.mu.Unlock()
	if n, ok := e.codes[code]; ok {
		e.codes[code] = n + 1
		return
	}
	if e.codes == nil {
		e.codes = map[string]int64{}
	}
	if len(e.codes) < maxErrorCodes {
		e.codes[strings.Clone(code)] = 1
	}
}

// reset forgets the codes, for CONFIG RESETSTAT (the total's base is in
// stats.since).
func (e *errorStats) reset() {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.codes = nil
}

// addReplies counts the error replies in raw, what a node sent that
// sluice passes on, at any depth: Redis counts each error it puts in a
// reply, one of a script's table or of EXEC's array as one alone. It
// returns how many there were.
func (e *errorStats) addReplies(raw []byte) int { return replyErrors(raw, e.addReply) }

// replyErrors calls each (when not nil) with every error reply in raw, at
// any depth, and returns how many there were.
func replyErrors(raw []byte, each func(raw []byte)) (n int) {
	switch {
	case len(raw) == 0:
		return 0
	case raw[0] == '-' || raw[0] == '!':
	case strings.IndexByte("*%~|>", raw[0]) < 0:
		return 0 // a string, a number: no error within
	case !bytes.Contains(raw, []byte("\n-")) && !bytes.Contains(raw, []byte("\n!")):
		return 0 // the many aggregates holding none, without a walk
	}
	found := func(raw []byte) {
		n++
		if each != nil {
			each(raw)
		}
	}
	for at := 0; at < len(raw); {
		nl := bytes.IndexByte(raw[at:], '\n')
		if nl < 2 {
			return n
		}
		next := at + nl + 1
		switch raw[at] {
		case '-':
			found(raw[at:next])
		case '$', '!', '=':
			// A string's bytes are skipped: what they hold is no reply.
			size, ok := parseInt(raw[at+1 : next-2])
			if !ok || size < 0 || size > int64(len(raw)-next-2) {
				break
			}
			if raw[at] == '!' {
				found(raw[at : next+int(size)+2])
			}
			next += int(size) + 2
		}
		at = next
	}
	return n
}

// addReply counts raw, a whole error reply: "-CODE message\r\n", or
// RESP3's "!<length>\r\nCODE message\r\n".
func (e *errorStats) addReply(raw []byte) {
	msg := bytes.TrimSuffix(raw[1:], crlf)
	if raw[0] == '!' {
		_, msg, _ = bytes.Cut(msg, crlf)
	}
	// What errorCode reads, no more: a reply can be long.
	e.add(string(msg[:min(len(msg), 31)]))
}

var crlf = []byte("\r\n")

// errorCode is Redis's: the message's first word, looked for within its
// first 31 bytes (32 with the '-'), else ERR.
func errorCode(msg string) string {
	if i := strings.IndexByte(msg[:min(len(msg), 31)], ' '); i >= 0 {
		return msg[:i]
	}
	return "ERR"
}

// write renders INFO's errorstats: one line a code, in byte order as
// Redis's radix tree gives them.
func (e *errorStats) write(b *strings.Builder) {
	e.mu.Lock()
	counts := maps.Clone(e.codes)
	e.mu.Unlock()
	for _, code := range slices.Sorted(maps.Keys(counts)) {
		fmt.Fprintf(b, "errorstat_%s:count=%d\r\n", infoSafe(code), counts[code])
	}
}

// infoSafe replaces what would break an INFO line, as Redis's
// getSafeInfoString does.
func infoSafe(s string) string {
	return infoUnsafe.Replace(s)
}

var infoUnsafe = strings.NewReplacer("#", "_", ":", "_", "\n", "_", "\r", "_")
