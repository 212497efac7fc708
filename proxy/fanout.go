package proxy

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/sluice-rl/sluice/router"
	cmdspec "github.com/sluice-rl/sluice/router/command"
	"github.com/sluice-rl/sluice/router/reply"
)

// fanOut is a command without keys that concerns every primary: sent to
// each (or, for one, to any), its replies merged as one Redis would answer.
type fanOut struct {
	how   merge
	admin bool // only with Config.AllowAdmin: a primary's data or settings
	one   bool // any one primary answers for all
	// own sends each part on a connection of its own: a busy script holds
	// the connection its call went on, shared with other clients, where a
	// KILL queued behind it would be read only once the script ends.
	own bool
}

var fanOuts = map[string]fanOut{
	"dbsize":        {how: mergeSum},
	"keys":          {how: mergeConcat},
	"randomkey":     {how: mergeAnyValue},
	"scan":          {how: mergeScan},
	"script|load":   {how: mergeSame},
	"script|exists": {how: mergeAnd},
	"script|flush":  {how: mergeSame, admin: true},
	// A script runs on one primary at a time: the one that ends it
	// answers.
	"script|kill":   {how: mergeKill, own: true},
	"function|kill": {how: mergeKill, own: true},
	// Functions, as Redis's request policies have them: a library loaded
	// or deleted on every primary, since FCALL goes to any key's. FLUSH
	// and RESTORE (whose FLUSH policy flushes first) may replace them all.
	// Every primary holds what was loaded through sluice: any one lists
	// and dumps it.
	"function|load":    {how: mergeSame},
	"function|delete":  {how: mergeSame},
	"function|flush":   {how: mergeSame, admin: true},
	"function|restore": {how: mergeSame, admin: true},
	"function|list":    {how: mergeNone, one: true},
	"function|dump":    {how: mergeNone, one: true},
	"flushdb":          {how: mergeSame, admin: true},
	"flushall":         {how: mergeSame, admin: true},
	"config|set":       {how: mergeSame, admin: true},
	"config|resetstat": {how: mergeSame, admin: true},
	"config|get":       {how: mergeNone, admin: true, one: true},
	// A subscriber through sluice has its channels and patterns on one
	// primary, each shard channel on its slot's: each counts its own.
	"pubsub|channels":      {how: mergeUnion},
	"pubsub|shardchannels": {how: mergeUnion},
	"pubsub|numpat":        {how: mergeSum},
	"pubsub|numsub":        {how: mergePairSum},
	"pubsub|shardnumsub":   {how: mergePairSum},
}

var errNoPrimaries = errors.New("CLUSTERDOWN sluice has no slot map of the cluster yet")

// fanOut queues a command for every primary.
func (s *Server) fanOut(c *client, r *round, spec *cmdspec.Spec, args [][]byte, fo fanOut) error {
	if fo.admin && !s.cfg.AllowAdmin {
		why := "it changes every primary"
		if fo.one {
			why = "it reads a primary's settings"
		}
		return errors.New("sluice forwards '" + strings.ToUpper(strings.ReplaceAll(spec.Name, "|", " ")) +
			"' only with --allow-admin: " + why)
	}
	primaries := s.cfg.Forwarder.Primaries()
	if len(primaries) == 0 {
		return errNoPrimaries
	}
	if !c.offPin() {
		return errRouteAgain
	}
	it := fwdItem{first: len(r.fwd), how: fo.how, write: spec.Has("write")}
	switch {
	case fo.how == mergeScan:
		cur, node, err := scanCursor(args[1], len(primaries))
		if err != nil {
			return err
		}
		part := append([][]byte{args[0], strconv.AppendUint(nil, cur, 10)}, args[2:]...)
		// A cursor past the last primary (a caller's own number, or a
		// scan begun before a primary left) ends the scan, as Redis takes
		// any number for a cursor; a primary still reads its options, to
		// refuse those Redis would.
		cmds0 := len(r.cmds)
		r.fwd = append(r.fwd, router.Forward{Slot: primaries[min(node, len(primaries)-1)], Cmd: r.command(part)})
		// Routed now, as DBSIZE's parts are (below): a write of c's sent
		// by an older map, redirected to this primary, would land after
		// the page was read.
		if !s.routeNow(c, r.fwd[it.first:]) {
			r.fwd, r.cmds = r.fwd[:it.first], r.cmds[:cmds0]
			return errRouteAgain
		}
		it.node, it.nodes = node, len(primaries)
	case fo.one:
		r.fwd = append(r.fwd, router.Forward{Slot: router.AnySlot, Cmd: r.command(args)})
		if spec.Name == "config|get" {
			it.post = hideSecrets
		}
	default:
		// One that changes each primary (their one reply is the same:
		// FLUSHALL, CONFIG SET, SCRIPT LOAD, ...) has each part checked
		// to have reached its slot's primary: right after a failover,
		// before sluice reads the new slot map, one sent to the old
		// primary, now a replica, is sent again to the promoted one,
		// ahead of what follows it there (Forward.Primary). A read
		// (DBSIZE, KEYS, PUBSUB NUMSUB, ...) is not: a replica answers it
		// alike, and after a resharding that moved the slot a part goes
		// by, its primary still one, the part sent again would count the
		// slot's new primary twice and the old one not at all.
		cmd := router.AppendCommand(nil, args)
		for _, sl := range primaries {
			r.fwd = append(r.fwd, router.Forward{Slot: sl, Cmd: cmd, Primary: fo.how == mergeSame, Own: fo.own})
		}
		// Routed now, as a command by its keys is (forward): one of c's
		// sent by an older map may be redirected to where a part goes,
		// and be overtaken there.
		if !s.routeNow(c, r.fwd[it.first:]) {
			r.fwd = r.fwd[:it.first]
			return errRouteAgain
		}
		if fo.own {
			// A read-only script (EVAL_RO, FCALL_RO) sent to a replica
			// is busy there.
			for _, addr := range s.cfg.Forwarder.Replicas() {
				r.fwd = append(r.fwd, router.Forward{Slot: router.AnySlot, Addr: addr, Cmd: cmd, Own: true})
			}
		}
		if spec.Name == "script|flush" && flushes(args) {
			// Now, not once flushed: an EVALSHA pipelined behind it, meeting
			// a primary already flushed, must not be replayed. One the
			// primaries refuse (an option other than ASYNC or SYNC) flushes
			// nothing there, and sluice forgets nothing.
			// Its client hears the flush once no instance replays them
			// either: the merge waits for every part, one waits for that.
			r.fwd[it.first].Flush = s.cfg.Forwarder.ForgetScripts()
		}
		if spec.Name == "script|load" {
			// Read now, in its client's order: a SCRIPT FLUSH the client
			// sent behind it flushes what it loads. (The router keeps the
			// script once every primary has loaded it.)
			gen := s.cfg.Forwarder.ScriptsGen()
			for k := it.first; k < len(r.fwd); k++ {
				r.fwd[k].ScriptsGen, r.fwd[k].LoadsScript = gen, true
			}
		}
	}
	r.queueItem(c, it)
	c.offPinSent()
	return nil
}

// flushes reports whether a node runs SCRIPT FLUSH args, as Redis's
// scriptCommand takes them: no option, or ASYNC or SYNC alone.
func flushes(args [][]byte) bool {
	return len(args) == 2 || len(args) == 3 &&
		(strings.EqualFold(string(args[2]), "async") || strings.EqualFold(string(args[2]), "sync"))
}

// A SCAN cursor of sluice's carries the primary being scanned in its low
// scanNodeBits and that primary's own cursor above them. Cursor 0 starts
// at the first primary; each primary's last page leads to the next one's
// first. Slots that move between primaries during a scan may make it
// miss or repeat keys, and not only the moved slots': the primaries are
// numbered by their lowest slots, so a move that reorders them sends a
// cursor to another primary, and may skip a primary whole (Redis's own
// guarantee holds per primary while the numbering stands). A failover
// numbers the primaries alike, but the promoted replica's own cursors
// (its dictionary hashes with its own seed) may miss or repeat some of
// its keys.
const scanNodeBits = 8

func scanCursor(b []byte, primaries int) (cur uint64, node int, err error) {
	if primaries > 1<<scanNodeBits {
		// Past the last primary a cursor can name, the next one's first
		// cursor would read as the first primary's: a scan without end.
		return 0, 0, fmt.Errorf("sluice: SCAN walks at most %d primaries, the cluster has %d", 1<<scanNodeBits, primaries)
	}
	v, ok := strtoul(b)
	if !ok {
		return 0, 0, errors.New("invalid cursor")
	}
	return v >> scanNodeBits, int(v & (1<<scanNodeBits - 1)), nil
}

// strtoul reads a cursor as Redis's parseScanCursorOrReply does, with C's
// strtoul: the text ends at a NUL, as C reads it; "" is 0; one sign may
// come before the digits, a minus negating modulo 2^64; nothing else may.
func strtoul(b []byte) (uint64, bool) {
	if i := bytes.IndexByte(b, 0); i >= 0 {
		b = b[:i]
	}
	if len(b) == 0 {
		return 0, true
	}
	neg := b[0] == '-'
	if b[0] == '+' || b[0] == '-' {
		b = b[1:]
	}
	v, err := strconv.ParseUint(string(b), 10, 64) // refuses "", spaces and signs
	if err != nil {
		return 0, false
	}
	if neg {
		v = -v
	}
	return v, true
}

// scanReply makes a primary's SCAN page sluice's: the same keys, with a
// cursor that says where to go on.
func (it *fwdItem) scanReply(p []byte) []byte {
	elems, ok := elements(p)
	if !ok || len(elems) != 2 || len(elems[0]) < 4 || elems[0][0] != '$' {
		return unexpected(p)
	}
	if it.node >= it.nodes {
		return []byte("*2\r\n$1\r\n0\r\n*0\r\n")
	}
	e := elems[0]
	start := strings.IndexByte(string(e), '\n') + 1
	cur, err := strconv.ParseUint(string(e[start:len(e)-2]), 10, 64)
	if err != nil {
		return unexpected(p)
	}
	var next uint64
	switch {
	case cur >= 1<<(64-scanNodeBits):
		return []byte("-ERR sluice: a primary's SCAN cursor is too large to carry\r\n")
	case cur != 0:
		next = cur<<scanNodeBits | uint64(it.node)
	case it.node+1 < it.nodes:
		next = uint64(it.node + 1)
	}
	text := strconv.AppendUint(nil, next, 10)
	out := appendArrayHeader(nil, 2)
	out = append(strconv.AppendInt(append(out, '$'), int64(len(text)), 10), '\r', '\n')
	out = append(append(out, text...), '\r', '\n')
	return append(out, elems[1]...)
}

// secretParams are the nodes' settings CONFIG GET answers empty through
// sluice: the cluster's credentials are sluice's (--cluster-password), not
// its clients', whoever may run CONFIG GET.
var secretParams = map[string]bool{
	"requirepass": true, "masterauth": true, "masteruser": true,
	"tls-key-file-pass": true, "tls-client-key-file-pass": true,
}

var errUnreadableConfig = []byte("-ERR sluice: the node's CONFIG GET reply could not be read\r\n")

// hideSecrets empties the values of secretParams in a CONFIG GET reply (a
// RESP2 array of names and values, or a RESP3 map). A reply it cannot
// read is refused, not passed on: it might hold them.
func hideSecrets(raw []byte) []byte {
	if len(raw) == 0 || (raw[0] != '*' && raw[0] != '%') {
		return errUnreadableConfig
	}
	br := bufio.NewReader(bytes.NewReader(raw))
	head, err := br.ReadSlice('\n')
	if err != nil || len(head) < 4 {
		return errUnreadableConfig
	}
	n, err := strconv.Atoi(string(head[1 : len(head)-2]))
	if err != nil || n < 0 {
		return errUnreadableConfig
	}
	if raw[0] == '%' {
		n *= 2
	}
	out := append([]byte(nil), head...)
	hide := false
	for i := range n {
		e, err := reply.Read(br, nil)
		if err != nil {
			return errUnreadableConfig
		}
		if i%2 == 1 && hide {
			e = []byte("$0\r\n\r\n")
		}
		if i%2 == 0 {
			_, name, _ := bytes.Cut(e, []byte("\r\n"))
			hide = secretParams[strings.ToLower(string(bytes.TrimSuffix(name, []byte("\r\n"))))]
		}
		out = append(out, e...)
	}
	return out
}
