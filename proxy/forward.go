package proxy

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"

	"github.com/sluice-rl/sluice/router"
	cmdspec "github.com/sluice-rl/sluice/router/command"
	"github.com/sluice-rl/sluice/router/reply"
	hashslot "github.com/sluice-rl/sluice/router/slot"
)

// Forwarder takes ordinary Redis commands to the cluster: the one sluice
// runs in front of. router.Cluster is one.
type Forwarder interface {
	// Commands is the cluster's command table, nil until it is known.
	// It gives the same specs until the table is read again: a command's
	// plan is kept by its spec, and new specs at each call would make
	// and copy one for every command.
	Commands() map[string]*cmdspec.Spec
	// Forward sends each command to the primary of its slot and stores
	// the primary's reply, as sent, in replies; done reports them as the
	// Decider's done reports results. Commands that share a connection go
	// on via's, when an event loop passes its own.
	Forward(ctx context.Context, via router.Pipes, cmds []router.Forward, replies [][]byte, done func(idx []int))
	// NewPipe makes the protocol half of an event loop's own connection
	// to a node.
	NewPipe(addr string, resp3, readonly bool) *router.Pipe
	// Primaries are a slot of each primary, in an order that holds while
	// the slot map does, and across a failover: a command sent to each
	// reaches every primary once.
	Primaries() []int
	// Replicas are the addresses of the replicas reads go to, if any.
	Replicas() []string
	// ScriptsGen is the generation of the scripts remembered, which
	// ForgetScripts changes (Forward.ScriptsGen).
	ScriptsGen() uint64
	// ForgetScripts forgets every script remembered: SCRIPT FLUSH goes
	// through sluice. Its parts wait for what it returns (Forward.Flush).
	ForgetScripts() *router.ScriptsFlush
	// Pin makes a client's own connection to the primary of a slot, for
	// WATCH.
	Pin(slot int, resp3 bool) *router.Pin
	// Tunnel opens a subscriber's own connections to the nodes.
	Tunnel(resp3 bool, onData func(data []byte, subscribed, answered bool), onEnd func(error)) *router.Tunnel
	// Route points each of cmds at its slot's primary now, by one slot
	// map, and returns that map's generation, which changes when a map
	// moves a slot to another primary.
	Route(cmds []router.Forward) uint64
}

// merge is how the replies of a command split across slots make the one
// reply Redis would have given.
type merge uint8

const (
	mergeNone     merge = iota // not split: the one part's reply
	mergeArray                 // MGET: each part's elements back in key order
	mergeSum                   // DEL, UNLINK, EXISTS, TOUCH: integers summed
	mergeOK                    // MSET: +OK once every part is
	mergeConcat                // KEYS: every primary's elements
	mergeSame                  // SCRIPT LOAD, FLUSHALL: the one reply all primaries gave
	mergeAnd                   // SCRIPT EXISTS: 1 where every primary says 1
	mergeAnyValue              // RANDOMKEY: a random primary's that is not nil
	mergeScan                  // SCAN: one primary's page, its cursor made sluice's
	mergeUnion                 // PUBSUB CHANNELS: every primary's elements, once each
	mergePairSum               // PUBSUB NUMSUB: [name, count, ...] with counts summed
	mergeKeyspace              // INFO: sluice's sections with the primaries' keyspace summed and maxmemory_policy
	mergeKill                  // SCRIPT KILL: +OK from the primary that ended the script, else the telling error
)

// splits are the multi-key commands sluice splits per slot, as the
// proxies users compare it with do; any other command whose keys span
// slots is refused with CROSSSLOT, as Redis Cluster refuses it.
var splits = map[string]struct {
	how  merge
	step int // arguments per key: MSET's values follow their keys
}{
	"mget":   {mergeArray, 1},
	"del":    {mergeSum, 1},
	"unlink": {mergeSum, 1},
	"exists": {mergeSum, 1},
	"touch":  {mergeSum, 1},
	"mset":   {mergeOK, 2},
}

// fwdItem is one forwarded command of a client and its parts in the
// round's fwd.
type fwdItem struct {
	to    target
	how   merge
	first int   // its parts are fwd[first : first+n]
	n     int   //
	left  int   // parts not yet answered
	order []int // mergeArray: the keys' places, part after part
	// mergeScan: which primary the page is from, and how many there are.
	node, nodes int
	// mergeKeyspace: sluice's own INFO text, and the client's protocol.
	info  string
	resp3 bool
	// post, when set, makes the merged reply sluice's (COMMAND's, with
	// sluice's own commands added); errors pass as they are.
	post func([]byte) []byte
	// write: the command may write (Redis's "write" flag), so a part's
	// error a client retries is not passed on once another part ran.
	write bool
	// inval, when set, follows the reply: the invalidation of the keys it
	// read, for a client that tracks them (tracking.go).
	inval []byte
}

var (
	// errRouteAgain is a command not taken: it waits until what its client
	// sent before is answered (routedGen).
	errRouteAgain = errors.New("route again")
	errCrossSlot  = errors.New("CROSSSLOT Keys in request don't hash to the same slot")
	errNoTable    = errors.New("TRYAGAIN sluice has not read the cluster's command table yet")
)

// forward takes a command sluice does not answer itself into c's queue,
// for the cluster, or returns why it cannot go there.
func (s *Server) forward(c *client, r *round, args [][]byte) (err error) {
	specs := s.cfg.Forwarder.Commands()
	if specs == nil {
		return errNoTable
	}
	spec, err := cmdspec.Lookup(specs, args)
	var p *plan
	if spec != nil {
		// Named by CLIENT LIST also when its arity is refused, as Redis
		// names the command it last looked up.
		p = s.planOf(spec)
		c.named, c.stat = &spec.Name, p.stat
		c.view.cmd.Store(c.named)
	}
	if err != nil {
		if strings.HasPrefix(err.Error(), "ERR unknown") {
			c.view.cmd.Store(nil) // CLIENT LIST says NULL, as Redis
		}
		if lowerName(args[0]) == "exec" {
			return execRefused(c, err)
		}
		return err
	}
	// MULTI, and UNWATCH with nothing watched, sluice answers itself:
	// MULTI goes to the cluster at EXEC, and is counted then.
	here := spec.Name == "multi" || (spec.Name == "unwatch" && c.pin == nil)
	defer func() {
		if err == nil && !here { // one sluice refused itself was not forwarded
			p.stat.forwarded.Add(1)
		}
	}()
	if p.isFanOut {
		return s.fanOut(c, r, spec, args, p.fanOut)
	}
	if ok, err := s.transaction(c, r, spec.Name, args); ok {
		return err
	}
	if p.subscribing {
		return s.subscribe(c, spec.Name, args)
	}
	if p.refused != nil {
		return p.refused
	}
	keys, bad, err := routeKeys(spec, args, r.keys[:0])
	if err != nil {
		return err
	}
	if cap(keys) > cap(r.keys) {
		r.keys = keys[:0]
	}
	if spec.Name == "publish" && len(args) == 3 {
		// Any node serves it, but by its channel's slot: one publisher's
		// messages to a channel, sent to different nodes, could reach a
		// subscriber of a third out of order over the cluster bus.
		keys = append(keys[:0], 1)
	}
	anyNode := p.keyless || bad
	it := fwdItem{first: len(r.fwd), write: p.write}
	switch {
	case len(keys) == 0:
		if !anyNode {
			return errNoRouteKey(spec)
		}
		// One that may write is checked to have reached a primary: right
		// after a failover, before sluice reads the new slot map, one
		// that reached the old primary, now a replica (READONLY), is sent
		// again to the promoted one (Forward.Primary). A read goes as it
		// is: a replica answers it alike.
		r.fwd = append(r.fwd, router.Forward{Slot: router.AnySlot, Cmd: r.command(args), Primary: mayWrite(spec, args)})
	default:
		sl := hashslot.Of(string(args[keys[0]]))
		one := true
		for _, k := range keys[1:] {
			if hashslot.Of(string(args[k])) != sl {
				one = false
				break
			}
		}
		if one && blocks(spec, p, args) {
			c.blockOn(router.Forward{Slot: sl, Cmd: router.AppendCommand(nil, args), Pin: c.pin, RESP3: c.resp3})
			if p.readOnly && c.invalidatesThis() { // XREAD BLOCK
				c.block.inval = invalidation(len(keys), appendKeyBulks(nil, args, keys))
			}
			return nil
		}
		cmds0 := len(r.cmds)
		if one {
			r.fwd = append(r.fwd, router.Forward{Slot: sl, Cmd: r.command(args)})
		} else {
			sp, ok := splits[spec.Name]
			if !ok {
				return errCrossSlot
			}
			if (len(args)-1)%sp.step != 0 {
				// MSET's last key has no value, so no part could carry it.
				// A node checks its keys' slots before the pairs (MSET a 1 b
				// is CROSSSLOT there), and these span slots.
				return errCrossSlot
			}
			it.how = sp.how
			it.order = splitBySlot(r, args, keys, sp.step, sp.how == mergeArray)
		}
		// Routed now, by the map whose generation is checked: a command
		// c sent by an older map may be redirected to where this one
		// goes, and be overtaken there (a pipeline of RPUSHes to a key
		// whose slot moves would land out of order). Then this one waits
		// until those are answered, and is taken again.
		if !s.routeNow(c, r.fwd[it.first:]) {
			r.fwd, r.cmds, it.order = r.fwd[:it.first], r.cmds[:cmds0], nil
			return errRouteAgain
		}
	}
	var scriptsGen uint64
	if spec.Name == "eval" || spec.Name == "eval_ro" {
		// Read now, in its client's order: a SCRIPT FLUSH the client
		// sent behind it flushes what it ran, answered or not.
		scriptsGen = s.cfg.Forwarder.ScriptsGen()
	}
	for k := it.first; k < len(r.fwd); k++ {
		r.fwd[k].Pin = c.pin
		r.fwd[k].ReadOnly = p.readOnly && !scansByCursor(spec.Name) && !c.readWrite
		r.fwd[k].ScriptsGen = scriptsGen
	}
	if len(keys) > 0 && c.invalidatesThis() && readsKeys(spec) {
		it.inval = invalidation(len(keys), appendKeyBulks(nil, args, keys))
	}
	r.queueItem(c, it)
	return nil
}

// scansByCursor reports whether a read's reply carries a cursor of the
// node that answered it: each node hashes with a seed of its own, so the
// next page read from another replica (they are read in turn) would miss
// and repeat elements. They stay on the primary, as SCAN's pages do. (A
// switch, not a map: every forwarded read asks.)
func scansByCursor(name string) bool {
	switch name {
	case "hscan", "sscan", "zscan":
		return true
	}
	return false
}

// routeNow points fs, a command c sends by its keys, at their slots'
// primaries by the slot map now (Forward.Addr). It reports false, routing
// nothing for c, when a command c sent by an older map is still in
// flight: that one may be redirected to where fs go, and be overtaken
// there, so fs wait until it is answered (errRouteAgain).
func (s *Server) routeNow(c *client, fs []router.Forward) bool {
	return c.routedBy(s.cfg.Forwarder.Route(fs))
}

// routedBy reports whether c may send a command routed by the slot map of
// generation gen now: not while a command it sent by another is in
// flight.
func (c *client) routedBy(gen uint64) bool {
	if c.routedGen != 0 && c.routedGen != gen+1 && c.inFlight() > 0 {
		return false
	}
	c.routedGen = gen + 1
	return true
}

// slotRouter is a Decider that sends each bucket's calls to its slot's
// primary by a slot map (router.Cluster).
type slotRouter interface {
	Map() router.SlotMap
}

// bucketRouted reports whether a bucket request of c's may be taken into
// r now. A call routed by an older map to the slot's old owner is answered
// "non local key" there and sent again, following MOVED, to the new owner,
// where one routed by the new map directly would overtake it (a client's
// pipelined THROTTLEs of one bucket would see remaining go up across the
// end of a slot move): so it waits, as a forwarded command does. On the
// loops r's calls are all sent by the map read at its first (SubmitVia):
// one read at each take could be older than the one the round is sent by.
// The goroutine path's Submit reads the map anew, harmlessly: it waits
// for each round, so no call is in flight while the next are taken.
func (s *Server) bucketRouted(c *client, r *round) bool {
	if s.slots == nil {
		return true
	}
	if len(r.reqs) == 0 {
		r.slots = s.slots.Map()
	}
	return c.routedBy(r.slots.Gen())
}

// blocks reports whether a command may wait at its node: one of Redis's
// "blocking" flag, but for XREAD and XREADGROUP only with BLOCK (without
// it they answer at once, and must not take a blocking connection or
// hold up their client's pipeline). Their options come in any order
// before STREAMS (XREADGROUP BLOCK 0 GROUP g c STREAMS ...): they are read
// as Redis's xreadCommand reads them, so that neither a group or consumer
// named "block" nor a BLOCK before GROUP is mistaken.
func blocks(spec *cmdspec.Spec, p *plan, args [][]byte) bool {
	if !p.blocking {
		return false
	}
	if spec.Name != "xread" && spec.Name != "xreadgroup" {
		return true
	}
	group := spec.Name == "xreadgroup"
	for i := 1; i < len(args); i++ {
		more := len(args) - i - 1
		switch a := args[i]; {
		case equalFoldC(a, "block") && more > 0:
			return true
		case equalFoldC(a, "count") && more > 0:
			i++
		case equalFoldC(a, "group") && more >= 2 && group:
			i += 2
		case equalFoldC(a, "noack") && group:
		default:
			// STREAMS, or an error the node answers at once.
			return false
		}
	}
	return false
}

// queueItem makes it, whose parts are r.fwd[it.first:], c's next reply;
// the parts go in c's protocol.
func (r *round) queueItem(c *client, it fwdItem) {
	for k := it.first; k < len(r.fwd); k++ {
		r.fwd[k].RESP3 = c.resp3
	}
	r.addItem(it, target{c: c, seq: c.base + uint64(len(c.q))})
	c.q = append(c.q, slot{state: slotWaiting})
	c.split += r.items[len(r.items)-1].n - 1
}

// addItem makes it, whose parts are r.fwd[it.first:], the reply of the
// slot to.
func (r *round) addItem(it fwdItem, to target) {
	it.n = len(r.fwd) - it.first
	it.left = it.n
	for k := it.first; k < len(r.fwd); k++ {
		r.partOf = append(r.partOf, len(r.items))
	}
	it.to = to
	r.items = append(r.items, it)
}

// blockingCmd is a client's blocking command (BLPOP, XREAD BLOCK, ...)
// until it is answered. Redis serves a blocked client nothing more, and
// runs its commands one after the other: so the command is sent only once
// every command before it is answered (on its own connection, it would
// race them to the node), and nothing the client sent after it is taken
// until it is answered.
type blockingCmd struct {
	f     router.Forward // Cmd is its own: the client's input is reused
	seq   uint64         // its slot
	sent  bool
	inval []byte // fwdItem's
}

// timedOutReply is what Redis 7.0 answers a blocking command at its
// timeout, BLMOVE's too (replyToBlockedClientTimedOut), and so CLIENT
// UNBLOCK's TIMEOUT: a null array.
func timedOutReply(resp3 bool) []byte {
	if resp3 {
		return []byte("_\r\n")
	}
	return []byte("*-1\r\n")
}

// blockOn makes f, a blocking command, c's next reply: it waits for its
// turn (blockTurn), and c takes nothing more until it is answered
// (unblocked).
func (c *client) blockOn(f router.Forward) {
	f.Blocked = &router.Blocked{}
	c.block = &blockingCmd{f: f, seq: c.base + uint64(len(c.q))}
	c.q = append(c.q, slot{state: slotWaiting})
}

// blockTurn reports whether c's blocking command waits to be sent and
// every command before it is answered: drained, it is next in c's queue.
func (c *client) blockTurn() bool {
	return c.block != nil && !c.block.sent && c.base+uint64(c.head) == c.block.seq
}

// sendBlocking adds c's blocking command, its turn come, to r.
func (r *round) sendBlocking(c *client) {
	c.block.sent = true
	c.view.blockedOn.Store(&c.block.f)
	it := fwdItem{first: len(r.fwd), inval: c.block.inval}
	r.fwd = append(r.fwd, c.block.f)
	r.addItem(it, target{c: c, seq: c.block.seq})
}

// unblocked reports whether c's blocking command was answered, its reply
// drained, and forgets it: c may be served again.
func (c *client) unblocked() bool {
	if c.block == nil || !c.block.sent || c.base+uint64(c.head) <= c.block.seq {
		return false
	}
	c.block = nil
	c.view.blockedOn.Store(nil)
	return true
}

// routeKeys are the positions in args of the keys that say where a
// command goes. bad reports a line malformed where its keys should be,
// which has none: any node answers Redis's own error for it.
//
// Redis Cluster routes a command by its own code for the command's keys
// where it has some (getKeysFromCommand), not by its key specs, which
// COMMAND GETKEYS and ACLs follow: the two disagree on GEORADIUS's and
// XREAD's, whose specs take any STORE and the first STREAMS. The keys of
// an ordinary command are appended to dst.
func routeKeys(spec *cmdspec.Spec, args [][]byte, dst []int) (keys []int, bad bool, err error) {
	switch spec.Name {
	case "georadius", "georadiusbymember":
		return georadiusKeys(args), false, nil
	case "xread", "xreadgroup":
		keys := xreadKeys(args)
		return keys, len(keys) == 0, nil
	}
	keys, err = spec.Keys(dst, args)
	switch {
	case err == nil && spec.Name == "spublish":
		// Its channel is no key (not_key), but its slot says where it goes.
		return append(keys[:0], 1), false, nil
	case err == nil:
		return keys, false, nil
	case errors.Is(err, cmdspec.ErrUnknownKeys) && (spec.Name == "sort" || spec.Name == "sort_ro"):
		// BY and GET patterns name no key of their own; the node refuses
		// the ones Redis Cluster refuses.
		return sortKeys(args, spec.Name == "sort"), false, nil
	case errors.Is(err, cmdspec.ErrUnknownKeys) && spec.Name == "migrate":
		// Its key specs are incomplete: KEYS may follow AUTH's password.
		keys := migrateKeys(args)
		return keys, len(keys) == 0, nil
	case errors.Is(err, cmdspec.ErrBadKeys):
		keys := countedKeys(spec.Name, args)
		return keys, len(keys) == 0, nil
	}
	return nil, false, fmt.Errorf("sluice cannot tell the keys of '%s'", spec.Name)
}

// counted are the commands that say how many keys they have, with the
// positions of the number, of the first key and of the key they store
// into (0 for none), as Redis's getkeys_proc for each passes them to its
// genericGetKeys.
var counted = map[string]struct{ count, first, store int }{
	"eval": {2, 3, 0}, "evalsha": {2, 3, 0}, "eval_ro": {2, 3, 0}, "evalsha_ro": {2, 3, 0},
	"fcall": {2, 3, 0}, "fcall_ro": {2, 3, 0},
	"zunion": {1, 2, 0}, "zinter": {1, 2, 0}, "zdiff": {1, 2, 0}, "zintercard": {1, 2, 0},
	"sintercard": {1, 2, 0}, "lmpop": {1, 2, 0}, "zmpop": {1, 2, 0},
	"blmpop": {2, 3, 0}, "bzmpop": {2, 3, 0},
	"zunionstore": {2, 3, 1}, "zinterstore": {2, 3, 1}, "zdiffstore": {2, 3, 1},
}

// countedKeys are the keys Redis Cluster routes a line of a counted
// command by when its key specs refuse the number of keys ("01", " 1",
// "1x"): Redis then falls back to genericGetKeys, which reads the number
// with C's atoi. The node answers MOVED or CROSSSLOT for those keys
// before the command refuses the number; in a transaction, a line taken
// for keyless would send the whole transaction after that MOVED, from
// node to node.
func countedKeys(name string, args [][]byte) []int {
	c, ok := counted[name]
	if !ok || c.count >= len(args) {
		return nil
	}
	n := int(atoi(args[c.count]))
	if n < 1 || n > len(args)-c.first {
		return nil
	}
	keys := make([]int, 0, n+1)
	for k := c.first; k < c.first+n; k++ {
		keys = append(keys, k)
	}
	if c.store > 0 {
		keys = append(keys, c.store)
	}
	return keys
}

// atoi is C's atoi as glibc has it, (int)strtol(b, NULL, 10): leading
// white space and a sign are taken, the digits end at any other byte, a
// number past a long's range is its bound, and the cast to int keeps the
// low 32 bits ("4294967297" is 1, "99999999999999999999" -1).
func atoi(b []byte) int32 {
	i := 0
	for i < len(b) && (b[i] == ' ' || '\t' <= b[i] && b[i] <= '\r') {
		i++
	}
	neg := false
	if i < len(b) && (b[i] == '+' || b[i] == '-') {
		neg = b[i] == '-'
		i++
	}
	const bound = 1 << 63 // a long's magnitude, beyond which strtol saturates
	var n uint64
	for ; i < len(b) && '0' <= b[i] && b[i] <= '9'; i++ {
		if d := uint64(b[i] - '0'); n > (bound-d)/10 {
			n = bound
		} else {
			n = n*10 + d
		}
	}
	switch {
	case n == bound && neg:
		return 0 // LONG_MIN's low 32 bits
	case n == bound:
		return -1 // LONG_MAX's
	case neg:
		return int32(-int64(n))
	}
	return int32(n)
}

// sortKeys are SORT's key and its STORE destination, found as Redis's
// sortGetKeys finds them: the last STORE's (SORT stores into it), after
// skipping LIMIT's two arguments and BY's and GET's one, and a STORE's
// own argument read as a keyword in its turn. SORT_RO's key alone: it has
// no STORE, and refuses one.
func sortKeys(args [][]byte, store bool) []int {
	keys := []int{1}
	if !store {
		return keys
	}
	dst := 0
	for i := 2; i < len(args); i++ {
		switch {
		case equalFoldC(args[i], "limit"):
			i += 2
		case equalFoldC(args[i], "store") && i+1 < len(args):
			dst = i + 1
		case equalFoldC(args[i], "by") || equalFoldC(args[i], "get"):
			i++
		}
	}
	if dst > 0 {
		keys = append(keys, dst)
	}
	return keys
}

// georadiusKeys are GEORADIUS's (or GEORADIUSBYMEMBER's) key and the key
// it stores into, found as Redis's georadiusGetKeys finds them: the last
// STORE or STOREDIST from the sixth argument on (the command stores into
// that one alone), each skipping its own argument. The key specs name
// every STORE and STOREDIST, so that two of different slots would read
// as CROSSSLOT, which Redis Cluster runs.
func georadiusKeys(args [][]byte) []int {
	keys := []int{1}
	dst := 0
	for i := 5; i < len(args); i++ {
		if (equalFoldC(args[i], "store") || equalFoldC(args[i], "storedist")) && i+1 < len(args) {
			dst = i + 1
			i++
		}
	}
	if dst > 0 {
		keys = append(keys, dst)
	}
	return keys
}

// xreadKeys are XREAD's or XREADGROUP's keys, found as Redis's
// xreadGetKeys finds them: after the STREAMS that follows the options
// (BLOCK's, COUNT's and GROUP's arguments skipped, so that a group or
// consumer named "streams" is no keyword), the first half of the
// arguments; none for a line Redis refuses (an option it does not know
// before STREAMS, an odd number of arguments after it). The key specs
// take the first "streams" from where the options may start, a group's
// or consumer's name too.
func xreadKeys(args [][]byte) []int {
	streams := -1
	for i := 1; i < len(args); i++ {
		a := args[i]
		if equalFoldC(a, "block") || equalFoldC(a, "count") {
			i++
		} else if equalFoldC(a, "group") {
			i += 2
		} else if equalFoldC(a, "streams") {
			streams = i
			break
		} else if !equalFoldC(a, "noack") {
			break
		}
	}
	if streams < 0 {
		return nil
	}
	n := len(args) - streams - 1
	if n == 0 || n%2 != 0 {
		return nil
	}
	keys := make([]int, 0, n/2)
	for k := streams + 1; k <= streams+n/2; k++ {
		keys = append(keys, k)
	}
	return keys
}

// equalFoldC compares as C's strcasecmp, which Redis's code for each
// command uses for its keywords: an argument ends at its first NUL byte
// ("STREAMS\x00x" is STREAMS), and only ASCII letters fold.
func equalFoldC(arg []byte, s string) bool {
	if i := bytes.IndexByte(arg, 0); i >= 0 {
		arg = arg[:i]
	}
	if len(arg) != len(s) {
		return false
	}
	for i := range len(arg) {
		a, b := arg[i], s[i]
		if 'A' <= a && a <= 'Z' {
			a += 'a' - 'A'
		}
		if 'A' <= b && b <= 'Z' {
			b += 'a' - 'A'
		}
		if a != b {
			return false
		}
	}
	return true
}

// migrateKeys are MIGRATE's keys, found as Redis's migrateGetKeys finds
// them: its fourth argument, or, from the seventh on, every argument after
// a KEYS that is no password of AUTH or AUTH2. None when the fourth is not
// empty then: the node refuses that line, whichever it is.
func migrateKeys(args [][]byte) []int {
	for i := 6; i < len(args); i++ {
		switch {
		case equalFoldC(args[i], "keys"):
			if len(args[3]) > 0 {
				return nil
			}
			keys := make([]int, 0, len(args)-i-1)
			for k := i + 1; k < len(args); k++ {
				keys = append(keys, k)
			}
			return keys
		case equalFoldC(args[i], "auth"):
			i++
		case equalFoldC(args[i], "auth2"):
			i += 2
		}
	}
	return []int{3}
}

// splitBySlot adds to r.fwd one command per slot of keys, each with its
// keys in their order (and, for step 2, each key's value), and returns the
// keys' places part after part when order is asked.
func splitBySlot(r *round, args [][]byte, keys []int, step int, order bool) []int {
	// Each key as its slot, then its place, sorted: the parts come out
	// slot after slot, each with its keys in their order, with no map and
	// no slice per slot (an MGET flood spent a fifth of a loop here).
	bySlot := make([]uint64, len(keys))
	for i, k := range keys {
		bySlot[i] = uint64(hashslot.Of(string(args[k])))<<32 | uint64(i)
	}
	slices.Sort(bySlot)
	var places []int
	if order {
		places = make([]int, 0, len(keys))
	}
	part := make([][]byte, 0, 1+step*len(keys))
	for at := 0; at < len(bySlot); {
		sl := bySlot[at] >> 32
		part = append(part[:0], args[0])
		for ; at < len(bySlot) && bySlot[at]>>32 == sl; at++ {
			i := int(uint32(bySlot[at]))
			part = append(part, args[keys[i]:keys[i]+step]...)
			if order {
				places = append(places, i)
			}
		}
		r.fwd = append(r.fwd, router.Forward{Slot: int(sl), Cmd: r.command(part)})
	}
	return places
}

// errNoRouteKey refuses a command without keys that no one primary answers
// for the cluster: a node's own state (LASTSAVE, ROLE, MEMORY STATS).
func errNoRouteKey(spec *cmdspec.Spec) error {
	if spec.Name == "swapdb" {
		// A cluster node's own refusal, whichever node: so a caller's
		// check for it holds through sluice.
		return errors.New("ERR SWAPDB is not allowed in cluster mode")
	}
	return fmt.Errorf("sluice does not forward '%s': it has no key to route by", spec.Name)
}

// refused says why sluice does not forward a command, or nil.
func refused(spec *cmdspec.Spec) error {
	switch spec.Name {
	case "wait", "waitaof":
		return errors.New("sluice does not forward WAIT: it would wait on a connection shared by other clients")
	case "script|debug":
		return errors.New("sluice does not forward 'script|debug': the debug mode would hold a connection shared by other clients")
	case "function|stats":
		return errors.New("sluice does not forward 'function|stats': a primary's answer would say nothing of the others")
	}
	switch {
	case spec.Has("admin"):
		return fmt.Errorf("sluice does not forward administration commands ('%s')", spec.Name)
	case spec.Has("pubsub") && spec.Name != "publish" && spec.Name != "spublish":
		return fmt.Errorf("sluice does not forward '%s' yet", spec.Name)
	}
	return nil
}

// keyless reports whether a command without keys may go to any one
// primary: a script or function that declares none, or a command any
// node answers alike (a container's HELP, OBJECT HELP or XINFO HELP: the
// same text on every node, which clients and redis-cli ask for).
func keyless(spec *cmdspec.Spec) bool {
	switch spec.Name {
	case "eval", "evalsha", "eval_ro", "evalsha_ro", "fcall", "fcall_ro", "time", "lolwut", "publish":
		return true
	}
	return strings.HasSuffix(spec.Name, "|help")
}

// mayWrite reports whether a command sent without keys may write, and so
// needs a primary: a script or function (EVAL, EVALSHA, FCALL: their _RO
// forms may not write, nor an EVAL whose shebang says no-writes) or a
// command flagged write.
func mayWrite(spec *cmdspec.Spec, args [][]byte) bool {
	switch spec.Name {
	case "eval":
		return len(args) < 2 || !noWrites(args[1])
	case "evalsha", "fcall":
		return true
	}
	return spec.Has("write")
}

// noWrites reports whether script's shebang line (#!lua flags=...) has
// the no-writes flag, with which Redis runs it on a replica too.
func noWrites(script []byte) bool {
	line, _, _ := bytes.Cut(script, []byte("\n"))
	if !bytes.HasPrefix(line, []byte("#!")) {
		return false
	}
	for _, f := range bytes.Fields(line) {
		if flags, ok := bytes.CutPrefix(f, []byte("flags=")); ok {
			for flag := range bytes.SplitSeq(flags, []byte(",")) {
				if string(flag) == "no-writes" {
					return true
				}
			}
		}
	}
	return false
}

// deliverPart takes the reply to part j of r's forwarded commands; the
// item's slot is decided once all its parts are in.
func (r *round) deliverPart(j int, mark func(*client)) {
	it := &r.items[r.partOf[j]]
	it.left--
	c := it.to.c
	if c.gone {
		// The round is kept until its last reply is in: held there, a
		// gone client's replies (a pipeline of big reads, closed by its
		// output limit) would stay as long, where Redis frees them with
		// the client.
		r.replies[j] = nil
		return
	}
	if it.left > 0 {
		return
	}
	c.split -= it.n - 1
	sl := &c.q[it.to.seq-c.base]
	parts := r.replies[it.first : it.first+it.n]
	raw := it.merged(parts)
	// The slot has the reply now, and lets it go once it is written.
	clear(parts)
	if it.post != nil && len(raw) > 0 && raw[0] != '-' {
		raw = it.post(raw)
	}
	if it.inval != nil {
		raw = append(raw[:len(raw):len(raw)], it.inval...)
	}
	sl.raw, sl.state = raw, slotDecided
	c.waiting += len(raw)
	mark(c)
}

// retried reports whether r is an error cluster clients retry the command
// on: nothing ran where it was answered (go-redis retries all of these,
// ioredis and redis-py CLUSTERDOWN and TRYAGAIN).
func retried(r []byte) bool {
	for _, code := range []string{"-CLUSTERDOWN ", "-TRYAGAIN ", "-MASTERDOWN ", "-LOADING ", "-READONLY "} {
		if bytes.HasPrefix(r, []byte(code)) {
			return true
		}
	}
	return false
}

// killed merges the nodes' answers to SCRIPT KILL or FUNCTION KILL: +OK
// from the one whose script it ended; else a node's word on a running
// script it did not end (UNKILLABLE: it wrote; BUSY: a function, for
// SCRIPT KILL), which tells the caller more than any node's absence;
// else why a node was not asked (unreachable); NOTBUSY, which every node
// without a script answers, only when all do.
func killed(parts [][]byte) []byte {
	for _, telling := range []func([]byte) bool{
		func(p []byte) bool { return len(p) > 0 && p[0] == '+' },
		func(p []byte) bool {
			return bytes.HasPrefix(p, []byte("-UNKILLABLE ")) || bytes.HasPrefix(p, []byte("-BUSY "))
		},
		func(p []byte) bool { return !bytes.HasPrefix(p, []byte("-NOTBUSY ")) },
	} {
		if i := slices.IndexFunc(parts, telling); i >= 0 {
			return parts[i]
		}
	}
	return parts[0]
}

// mayHaveRun reports whether a part's reply r says it ran, or may have:
// a value, or sluice's ERR for a connection lost once the part was sent.
func mayHaveRun(r []byte) bool {
	return len(r) > 0 && (r[0] != '-' || bytes.HasPrefix(r, []byte("-ERR sluice: connection to ")))
}

// merged is the reply Redis would have given the whole command: the first
// error of a part, else the parts' replies combined.
func (it *fwdItem) merged(parts [][]byte) []byte {
	switch it.how {
	case mergeNone:
		return parts[0]
	case mergeKeyspace:
		// INFO is never an error: the keyspace of those that answered.
		return it.keyspace(parts)
	case mergeKill:
		return killed(parts)
	}
	for _, p := range parts {
		if len(p) > 0 && p[0] == '-' {
			if it.write && retried(p) && slices.ContainsFunc(parts, mayHaveRun) {
				// Another part ran, or may have: a cluster client
				// retrying the whole command would run it again (a DEL's
				// count, an MSET over a newer write). A read is retried
				// harmlessly, so it keeps the code.
				if router.Unsent(p) {
					return append([]byte("-ERR"), p[bytes.IndexByte(p, ' '):]...)
				}
				return append([]byte("-ERR sluice: only part of the command ran: "), p[1:]...)
			}
			return p
		}
	}
	switch it.how {
	case mergeSum:
		var n int64
		for _, p := range parts {
			v, err := strconv.ParseInt(string(bytes.TrimSpace(p[1:])), 10, 64)
			if p[0] != ':' || err != nil {
				return unexpected(p)
			}
			n += v
		}
		return append(strconv.AppendInt([]byte{':'}, n, 10), '\r', '\n')
	case mergeOK:
		return []byte("+OK\r\n")
	case mergeSame:
		for _, p := range parts[1:] {
			if !bytes.Equal(p, parts[0]) {
				return fmt.Appendf(nil, "-ERR sluice: the primaries answered differently: %q and %q\r\n",
					parts[0][:min(len(parts[0]), 32)], p[:min(len(p), 32)])
			}
		}
		return parts[0]
	case mergeAnyValue:
		// From a primary drawn at random, as Redis draws from all its keys:
		// always the first one's would never give the others' keys.
		first := rand.IntN(len(parts))
		for i := range parts {
			p := parts[(first+i)%len(parts)]
			if !bytes.Equal(p, []byte("$-1\r\n")) && !bytes.Equal(p, []byte("_\r\n")) {
				return p
			}
		}
		return parts[0]
	case mergeScan:
		return it.scanReply(parts[0])
	case mergeConcat:
		return concatArrays(parts)
	}
	var elems [][]byte
	for _, p := range parts {
		e, ok := elements(p)
		if !ok {
			return unexpected(p)
		}
		elems = append(elems, e...)
	}
	switch it.how {
	case mergeUnion:
		seen := map[string]bool{}
		var union [][]byte
		for _, e := range elems {
			if !seen[string(e)] {
				seen[string(e)] = true
				union = append(union, e)
			}
		}
		elems = union
	case mergePairSum:
		// Every primary answers the same names in the same order.
		n := len(elems) / len(parts)
		if n*len(parts) != len(elems) || n%2 != 0 {
			return unexpected(parts[0])
		}
		out := appendArrayHeader(nil, n)
		for i := 0; i < n; i += 2 {
			var sum int64
			for j := range parts {
				e := elems[j*n+i+1]
				v, err := strconv.ParseInt(string(bytes.TrimSpace(e[1:])), 10, 64)
				if e[0] != ':' || err != nil {
					return unexpected(parts[j])
				}
				sum += v
			}
			out = append(out, elems[i]...)
			out = append(strconv.AppendInt(append(out, ':'), sum, 10), '\r', '\n')
		}
		return out
	case mergeAnd:
		// SCRIPT EXISTS: a script is there only if every primary has it,
		// since EVALSHA may go to any of them.
		n := len(elems) / len(parts)
		if n*len(parts) != len(elems) {
			return unexpected(parts[0])
		}
		out := appendArrayHeader(nil, n)
		for i := range n {
			v := ":1\r\n"
			for j := range parts {
				if string(elems[j*n+i]) != ":1\r\n" {
					v = ":0\r\n"
				}
			}
			out = append(out, v...)
		}
		return out
	case mergeArray:
		// MGET: the parts' elements back in the keys' order.
		if len(elems) != len(it.order) {
			return unexpected(parts[0])
		}
		ordered := make([][]byte, len(elems))
		for k, e := range elems {
			ordered[it.order[k]] = e
		}
		elems = ordered
	}
	// Sized once: grown by append, an MGET of 30 MB of values allocated
	// about five times that on its way.
	size := 24
	for _, e := range elems {
		size += len(e)
	}
	out := appendArrayHeader(make([]byte, 0, size), len(elems))
	for _, e := range elems {
		out = append(out, e...)
	}
	return out
}

// concatArrays is KEYS's reply: every primary's array, in one. The
// elements are copied as they are, once: splitting millions of keys into
// an allocation each made sluice hold ten times the reply.
func concatArrays(parts [][]byte) []byte {
	total, size := 0, 0
	bodies := make([][]byte, len(parts))
	for i, p := range parts {
		eol := bytes.IndexByte(p, '\n')
		if eol < 3 || p[0] != '*' || p[eol-1] != '\r' {
			return unexpected(p)
		}
		n, err := strconv.Atoi(string(p[1 : eol-1]))
		if err != nil || n < 0 {
			return unexpected(p)
		}
		total += n
		bodies[i] = p[eol+1:]
		size += len(bodies[i])
	}
	out := appendArrayHeader(make([]byte, 0, 24+size), total)
	for _, b := range bodies {
		out = append(out, b...)
	}
	return out
}

// elements are the raw elements of an array reply, which was read whole
// (reply.Read), so each is where a Scanner finds it: slices of p, not
// copies. A reader and a copy of each element, for each of an MGET's
// hundreds of parts, were most of what merging it cost the loop.
func elements(p []byte) ([][]byte, bool) {
	eol := bytes.IndexByte(p, '\n')
	if eol < 3 || p[0] != '*' || p[eol-1] != '\r' {
		return nil, false
	}
	rest := p[eol+1:]
	n, err := strconv.Atoi(string(p[1 : eol-1]))
	// An element is 3 bytes at least ("_\r\n"): a count past what the
	// reply holds is refused before it sizes anything.
	if err != nil || n < 0 || n > len(rest)/3 {
		return nil, false
	}
	elems := make([][]byte, n)
	var sc reply.Scanner
	for i := range elems {
		k := sc.Whole(rest)
		if k == 0 {
			return nil, false
		}
		elems[i], rest = rest[:k:k], rest[k:]
	}
	return elems, true
}

func appendArrayHeader(b []byte, n int) []byte {
	return append(strconv.AppendInt(append(b, '*'), int64(n), 10), '\r', '\n')
}

func unexpected(p []byte) []byte {
	return fmt.Appendf(nil, "-ERR sluice: unexpected reply from the cluster to a split command: %q\r\n", p[:min(len(p), 32)])
}
