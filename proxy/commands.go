package proxy

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/sluice-rl/sluice/router"
)

// command is one entry of the command table. A command either becomes a
// bucket request (request and reply), decided with the rest of its
// pipeline, or is answered by the proxy itself (local).
type command struct {
	name  string // lower case, as Redis reports names
	arity int    // Redis's convention: n exact, -n at least n, name included
	flags []string
	// Key positions for COMMAND, as Redis reports them.
	firstKey, lastKey, step int

	request func(args [][]byte) (router.Request, error)
	reply   func(conn replyWriter, req *router.Request, res *router.Result)
	counts  bool // an allowed reply counts as an allowed decision in INFO
	// policies: its short forms take their limit from a named policy
	// (byPolicy); request parses the rest.
	policies bool
	// argsFirst: request's argument errors come before the
	// --throttle-max-key-len bound, as Redis's GCRA checks every argument
	// before it looks at its key.
	argsFirst bool

	local func(s *Server, c *client, conn respConn, args [][]byte)
	// acl are its ACL categories (without '@'), as Redis gives its own.
	acl []string
	// summary, since, complexity and args are its COMMAND DOCS, which
	// redis-cli's hints read; a command without a summary has none. The
	// bucket commands are in Redis's rate_limit group, GCRA's.
	summary, since, complexity string
	args                       []argDoc
	// keyFlags are the flags of its one key spec (the key at firstKey,
	// Redis's index 1 and range 0/1/0), for COMMAND INFO and COMMAND
	// GETKEYSANDFLAGS; a command without keys has none.
	keyFlags []string
	// subs are a container's subcommands, by lower-case name, each with
	// its full name ("client|info"), which CLIENT LIST's cmd= gives.
	subs map[string]*string
}

// subcommands are the subcommands of sluice's containers as Redis 7
// names them (7.0's, and CLIENT SETINFO, which sluice answers), each with
// its arity as Redis 7.0 counts it (CLIENT SETINFO's 7.2's): CLIENT LIST
// shows cmd=client|kill for a CLIENT KILL as Redis does, though sluice
// refuses it, and cmd=NULL for a name Redis does not know. Redis checks
// a subcommand's arity before authentication and permissions, so lookup
// does, for those sluice answers and those it refuses alike.
var subcommands = map[string]map[string]int{
	"client": {"caching": 3, "getname": 2, "getredir": 2, "help": 2, "id": 2, "info": 2, "kill": -3, "list": -2,
		"no-evict": 3, "pause": -3, "reply": 3, "setinfo": 4, "setname": 3, "tracking": -3, "trackinginfo": 2,
		"unblock": -3, "unpause": 2},
	"acl": {"cat": -2, "deluser": -3, "dryrun": -4, "genpass": -2, "getuser": 3, "help": 2, "list": 2, "load": 2,
		"log": -2, "save": 2, "setuser": -3, "users": 2, "whoami": 2},
	"command": {"count": 2, "docs": -2, "getkeys": -4, "getkeysandflags": -4, "help": 2, "info": -2, "list": -2},
	"cluster": {"addslots": -3, "addslotsrange": -4, "bumpepoch": 2, "count-failure-reports": 3, "countkeysinslot": 3,
		"delslots": -3, "delslotsrange": -4, "failover": -2, "flushslots": 2, "forget": 3, "getkeysinslot": 4,
		"help": 2, "info": 2, "keyslot": 3, "links": 2, "meet": -4, "myid": 2, "nodes": 2, "replicas": 3,
		"replicate": 3, "reset": -2, "saveconfig": 2, "set-config-epoch": 3, "setslot": -4, "shards": 2,
		"slaves": 3, "slots": 2},
}

// fullName is what args, a command of cmd's, is named in CLIENT LIST, as
// Redis 7 names it: a container's subcommand as "container|sub", nil
// (cmd=NULL) for a subcommand it lacks, the container alone when none is
// given.
func (cmd *command) fullName(args [][]byte) *string {
	if cmd.subs == nil || len(args) < 2 {
		return &cmd.name
	}
	var buf [32]byte
	if len(args[1]) > len(buf) {
		return nil
	}
	sub := buf[:len(args[1])]
	for i, ch := range args[1] {
		if ch >= 'A' && ch <= 'Z' {
			ch += 'a' - 'A'
		}
		sub[i] = ch
	}
	return cmd.subs[string(sub)]
}

// argDoc is one argument as COMMAND DOCS describes it, in Redis's terms:
// a oneof or a block holds args of its own. A key argument is the
// command's key spec 0, its only one.
type argDoc struct {
	name, typ, token string
	optional         bool
	args             []argDoc
}

// throttleArgs are THROTTLE's three forms: the limit inline, a policy by
// name, or neither (the policy of the key's rule).
var throttleArgs = []argDoc{
	{name: "key", typ: "key"},
	{name: "limit", typ: "oneof", optional: true, args: []argDoc{
		{name: "inline", typ: "block", args: []argDoc{
			{name: "capacity", typ: "integer"}, {name: "refill", typ: "integer"}, {name: "period", typ: "string"},
		}},
		{name: "policy", typ: "string", token: "POLICY"},
	}},
	{name: "cost", typ: "integer", optional: true},
}

// cellArgs are redis-cell's CL.THROTTLE key max_burst count_per_period
// period [quantity], period in whole seconds.
var cellArgs = []argDoc{
	{name: "key", typ: "key"},
	{name: "max_burst", typ: "integer"},
	{name: "count_per_period", typ: "integer"},
	{name: "period", typ: "integer"},
	{name: "quantity", typ: "integer", optional: true},
}

// gcraArgs are Redis 8.8's (src/commands/gcra.json).
var gcraArgs = []argDoc{
	{name: "key", typ: "key"},
	{name: "max-burst", typ: "integer"},
	{name: "tokens-per-period", typ: "integer"},
	{name: "period", typ: "double"},
	{name: "count", typ: "integer", token: "TOKENS", optional: true},
}

// The key specs' flags: a decision reads and updates its bucket (as
// INCR's), THROTTLE.RESET deletes it (as DEL's).
var (
	bucketKeyFlags = []string{"RW", "access", "update"}
	resetKeyFlags  = []string{"RM", "delete"}
)

// commands is the command table, by lower-case name. It is built once, in
// init, because local handlers such as COMMAND read it.
var commands map[string]*command

// quitCommand ends a pipeline: nothing after it runs.
var quitCommand *command

// resetCommand runs at once, even in a transaction, as in Redis.
var resetCommand *command

// commandCommand and infoCommand are answered with the cluster's help
// when there is one.
var commandCommand, infoCommand, clusterCommand, clientCommand *command

func init() {
	table := []*command{
		{name: "throttle", arity: -2, flags: []string{"write", "fast"}, firstKey: 1, lastKey: 1, step: 1,
			request: parseThrottle, reply: replyThrottle, counts: true, policies: true, acl: []string{"write", "fast", "rate_limit"},
			args: throttleArgs, keyFlags: bucketKeyFlags, since: "1.0.0", complexity: "O(1)",
			summary: "Takes cost tokens from key's bucket, under a limit given inline, a named policy, or the policy of the key's rule"},
		{name: "cl.throttle", arity: -5, flags: []string{"write", "fast"}, firstKey: 1, lastKey: 1, step: 1,
			request: parseCellThrottle, reply: replyCellThrottle, counts: true, acl: []string{"write", "fast", "rate_limit"},
			args: cellArgs, keyFlags: bucketKeyFlags, since: "1.0.0", complexity: "O(1)",
			summary: "Rate limit via redis-cell's GCRA: takes quantity tokens from a bucket of max_burst+1, refilled count_per_period every period seconds"},
		{name: "gcra", arity: -5, flags: []string{"write", "denyoom", "fast"}, firstKey: 1, lastKey: 1, step: 1,
			request: parseGCRA, reply: replyGCRA, counts: true, argsFirst: true, acl: []string{"write", "fast", "rate_limit"},
			summary: "Rate limit via GCRA (Generic Cell Rate Algorithm).", since: "8.8.0", complexity: "O(1)",
			args: gcraArgs, keyFlags: bucketKeyFlags},
		{name: "throttle.reset", arity: 2, flags: []string{"write", "fast"}, firstKey: 1, lastKey: 1, step: 1,
			request: parseReset, reply: replyReset, acl: []string{"keyspace", "write", "fast", "dangerous"},
			summary: "Deletes key's bucket, which is full again at its next decision", since: "1.0.0", complexity: "O(1)",
			args: []argDoc{{name: "key", typ: "key"}}, keyFlags: resetKeyFlags},
		{name: "ping", arity: -1, flags: []string{"fast", "stale"}, local: cmdPing, acl: []string{"fast", "connection"}},
		{name: "echo", arity: 2, flags: []string{"fast"}, local: cmdEcho, acl: []string{"fast", "connection"}},
		{name: "quit", arity: -1, flags: []string{"fast", "noscript", "no_auth"}, local: cmdQuit, acl: []string{"fast", "connection"}},
		{name: "hello", arity: -1, flags: []string{"fast", "noscript", "no_auth"}, local: cmdHello, acl: []string{"fast", "connection"}},
		{name: "client", arity: -2, flags: []string{"noscript"}, local: cmdClient, acl: []string{"slow", "connection"}},
		{name: "select", arity: 2, flags: []string{"fast", "loading"}, local: cmdSelect, acl: []string{"fast", "connection"}},
		{name: "command", arity: -1, flags: []string{"loading", "stale"}, local: cmdCommand, acl: []string{"slow", "connection"}},
		{name: "info", arity: -1, flags: []string{"loading", "stale"}, local: cmdInfo, acl: []string{"slow", "dangerous"}},
		{name: "cluster", arity: -2, flags: []string{"stale"}, local: cmdClusterMode, acl: []string{"slow"}},
		{name: "readonly", arity: 1, flags: []string{"fast", "loading", "stale"}, local: cmdReadonly, acl: []string{"fast", "connection"}},
		{name: "readwrite", arity: 1, flags: []string{"fast", "loading", "stale"}, local: cmdReadwrite, acl: []string{"fast", "connection"}},
		{name: "reset", arity: 1, flags: []string{"noscript", "loading", "stale", "fast", "no_auth", "allow_busy"},
			local: cmdReset, acl: []string{"fast", "connection"}},
		{name: "auth", arity: -2, flags: []string{"fast", "noscript", "loading", "stale", "no_auth"}, local: cmdAuth,
			acl: []string{"fast", "connection"}},
		{name: "acl", arity: -2, flags: []string{"noscript", "loading", "stale"}, local: cmdACL, acl: []string{"slow"}},
		{name: "asking", arity: 1, flags: []string{"fast"}, local: cmdAsking, acl: []string{"fast", "connection"}},
		{name: "role", arity: 1, flags: []string{"noscript", "loading", "stale", "fast"}, local: cmdRole, acl: []string{"admin", "fast", "dangerous"}},
	}
	commands = make(map[string]*command, len(table))
	for _, c := range table {
		commands[c.name] = c
		if subs, ok := subcommands[c.name]; ok {
			c.subs = make(map[string]*string, len(subs))
			for sub := range subs {
				full := c.name + "|" + sub
				c.subs[sub] = &full
			}
		}
	}
	quitCommand = commands["quit"]
	resetCommand = commands["reset"]
	commandCommand = commands["command"]
	infoCommand = commands["info"]
	clusterCommand = commands["cluster"]
	clientCommand = commands["client"]
}

// lookup finds args' command and checks its arity.
func lookup(args [][]byte) (*command, error) {
	var buf [32]byte
	name := args[0]
	if len(name) > len(buf) {
		return nil, errUnknownCommand
	}
	lower := buf[:len(name)]
	for i, c := range name {
		if c >= 'A' && c <= 'Z' {
			c += 'a' - 'A'
		}
		lower[i] = c
	}
	cmd, ok := commands[string(lower)]
	if !ok {
		return nil, errUnknownCommand
	}
	if (cmd.arity > 0 && len(args) != cmd.arity) || (cmd.arity < 0 && len(args) < -cmd.arity) {
		return cmd, fmt.Errorf("wrong number of arguments for '%s' command", cmd.name)
	}
	if cmd.subs != nil && len(args) > 1 {
		// As Redis checks a subcommand, before authentication and ACLs:
		// that it exists (matched in ASCII only, so that "ıd" is not ID),
		// then its arity. An unknown one answered here is not forwarded
		// (COMMAND's) for a client yet to authenticate.
		full := cmd.fullName(args)
		if full == nil {
			return cmd, fmt.Errorf("unknown subcommand '%s'. Try %s HELP.", cut128(args[1]), strings.ToUpper(cmd.name))
		}
		if n := subcommands[cmd.name][(*full)[len(cmd.name)+1:]]; (n > 0 && len(args) != n) || len(args) < -n {
			return cmd, fmt.Errorf("wrong number of arguments for '%s' command", *full)
		}
	}
	return cmd, nil
}

// errUnknownCommand is lookup's answer for a command sluice does not
// have: most go to the cluster, so the message, which costs a formatting,
// is written only for those answered unknown (unknownCommand).
var errUnknownCommand = errors.New("unknown command")

// unknownCommand is Redis 7's message, which clients match on (rueidis
// and go-redis fall back to RESP2 when HELLO is unknown), cut as Redis
// cuts it: the name at 128 bytes, the arguments quoted until they take
// 128.
func unknownCommand(args [][]byte) error {
	var quoted []byte
	for _, a := range args[1:] {
		if len(quoted) >= 128 {
			break
		}
		quoted = append(quoted, '\'')
		quoted = append(quoted, a[:min(len(a), 128-len(quoted)+1)]...)
		quoted = append(quoted, '\'', ' ')
	}
	return fmt.Errorf("unknown command '%s', with args beginning with: %s", cut128(args[0]), quoted)
}

// truncate cuts an argument quoted in sluice's own messages.
func truncate(b []byte) string {
	if len(b) > 64 {
		b = b[:64]
	}
	return string(b)
}

// cut128 is what Redis's "%.128s" prints of b.
func cut128(b []byte) []byte { return b[:min(len(b), 128)] }

func cmdPing(s *Server, _ *client, conn respConn, args [][]byte) {
	switch len(args) {
	case 1:
		conn.WriteString("PONG")
	case 2:
		conn.WriteBulk(args[1])
	default:
		s.writeError(conn, errors.New("ERR wrong number of arguments for 'ping' command"))
	}
}

func cmdEcho(_ *Server, _ *client, conn respConn, args [][]byte) {
	conn.WriteBulk(args[1])
}

// cmdRole answers ROLE for sluice itself, as INFO's replication section
// and CLUSTER SHARDS describe it: a master with no replicas, at offset 0,
// so that clients that find their primary by ROLE keep to sluice.
func cmdRole(_ *Server, _ *client, conn respConn, _ [][]byte) {
	conn.WriteArray(3)
	conn.WriteBulkString("master")
	conn.WriteInt(0)
	conn.WriteArray(0)
}

func cmdQuit(_ *Server, _ *client, conn respConn, _ [][]byte) {
	conn.WriteString("OK")
	conn.Close()
}

// cmdSelect answers as a Redis Cluster node, which sluice says it is
// (HELLO's mode, INFO's cluster_enabled): database 0 only.
func cmdSelect(s *Server, _ *client, conn respConn, args [][]byte) {
	n, ok := parseRedisInt(args[1])
	switch {
	case !ok:
		s.writeError(conn, errors.New("value is not an integer or out of range"))
	case n < math.MinInt32 || n > math.MaxInt32:
		s.writeError(conn, errors.New("value is out of range, value must between -2147483648 and 2147483647"))
	case n != 0:
		// ERR given: writeError would take SELECT for an error code.
		s.writeError(conn, errors.New("ERR SELECT is not allowed in cluster mode"))
	default:
		conn.WriteString("OK")
	}
}

// cmdHello switches the connection to RESP2 or RESP3: the replies after
// it, HELLO's own included, are in that protocol.
func cmdHello(s *Server, c *client, conn respConn, args [][]byte) {
	if len(args) > 1 {
		v, ok := parseRedisInt(args[1])
		switch {
		case !ok:
			s.writeError(conn, errors.New("Protocol version is not an integer or out of range"))
			return
		case v != 2 && v != 3:
			s.writeError(conn, errors.New("NOPROTO unsupported protocol version"))
			return
		}
	}
	for i := 2; i < len(args); i++ {
		switch opt := strings.ToUpper(string(args[i])); {
		case opt == "AUTH" && i+2 < len(args):
			user := s.cfg.Users.authenticate(args[i+1], args[i+2])
			if user == nil {
				s.writeError(conn, errBadPass)
				return
			}
			// Redis 7.0 authenticates as it reads AUTH: the client stays
			// this user when a later option fails the HELLO.
			c.user = user
			c.published()
			i += 2
		case opt == "SETNAME" && i+1 < len(args):
			if err := validName(args[i+1]); err != nil {
				s.writeError(conn, err)
				return
			}
			// Redis 7.0 names the client as it reads SETNAME: the name
			// stays when a later option, the AUTH or the NOAUTH check
			// fails the HELLO.
			c.name = string(args[i+1])
			c.published()
			i++
		default:
			s.writeError(conn, fmt.Errorf("Syntax error in HELLO option '%s'", args[i]))
			return
		}
	}
	if c.user == nil {
		s.writeError(conn, errors.New("NOAUTH HELLO must be called with the client already authenticated, otherwise the HELLO AUTH <user> <pass> option can be used to authenticate the client and select the RESP protocol version at the same time"))
		return
	}
	if len(args) > 1 {
		resp3 := args[1][0] == '3'
		switch {
		case resp3 == c.resp3 || c.tunnel == nil:
		case len(c.tunnelWait) == 0 && !c.tunnel.Subscribed():
			// Its tunnel's connections speak the old protocol: the next
			// subscription opens one in the new, whose confirmations and
			// messages are then the client's.
			c.closeTunnel()
		default:
			// Subscribed: its connections switch, as a node's would, and
			// in RESP2 it is in subscribed mode.
			c.tunnel.SetProtocol(resp3)
			c.subscribed = !resp3 && c.tunnel.Subscribed()
			if !resp3 && len(c.tunnelWait) > 0 {
				// Subscriptions still unconfirmed decide whether RESP2
				// begins in subscribed mode: the next command waits.
				c.drainFirst = true
			}
		}
		if resp3 != c.resp3 && c.pin == nil && c.inFlight() > 0 {
			// Its next commands go on sluice's connections of the other
			// protocol, where they could run before those still on the
			// old ones (an INCR, then a GET of its key): as with one
			// connection to a node, they wait until these are answered.
			c.drainFirst = true
		}
		c.resp3 = resp3
		c.out.resp3, c.held.resp3 = c.resp3, c.resp3
	}
	c.published()
	proto := 2
	if c.resp3 {
		proto = 3
	}
	conn.WriteMap(7)
	conn.WriteBulkString("server")
	conn.WriteBulkString("sluice")
	conn.WriteBulkString("version")
	conn.WriteBulkString(redisVersion) // as INFO's redis_version; server says sluice
	conn.WriteBulkString("proto")
	conn.WriteInt(proto)
	conn.WriteBulkString("id")
	conn.WriteInt64(c.id)
	conn.WriteBulkString("mode")
	conn.WriteBulkString("cluster") // as its CLUSTER replies say
	conn.WriteBulkString("role")
	conn.WriteBulkString("master")
	conn.WriteBulkString("modules")
	conn.WriteArray(0)
}

func validName(b []byte) error {
	for _, c := range b {
		if c < '!' || c > '~' {
			return errors.New("Client names cannot contain spaces, newlines or special characters.")
		}
	}
	return nil
}

// clientRefused are Redis's CLIENT subcommands that sluice does not
// answer. They are refused by name rather than called unknown: a client
// that sends one relies on it.
var clientRefused = map[string]bool{"PAUSE": true}

// clientHelp is CLIENT HELP for the subcommands sluice answers, in Redis
// 7.0's words (SETINFO in 7.2's).
var clientHelp = []string{
	"CLIENT <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
	"CACHING (YES|NO)",
	"    Enable/disable tracking of the keys for next command in OPTIN/OPTOUT modes.",
	"GETREDIR",
	"    Return the client ID we are redirecting to when tracking is enabled.",
	"GETNAME",
	"    Return the name of the current connection.",
	"ID",
	"    Return the ID of the current connection.",
	"INFO",
	"    Return information about the current client connection.",
	"KILL <ip:port>",
	"    Kill connection made from <ip:port>.",
	"KILL <option> <value> [<option> <value> [...]]",
	"    Kill connections. Options are:",
	"    * ADDR (<ip:port>|<unixsocket>:0)",
	"      Kill connections made from the specified address",
	"    * LADDR (<ip:port>|<unixsocket>:0)",
	"      Kill connections made to specified local address",
	"    * TYPE (NORMAL|MASTER|REPLICA|PUBSUB)",
	"      Kill connections by type.",
	"    * USER <username>",
	"      Kill connections authenticated by <username>.",
	"    * SKIPME (YES|NO)",
	"      Skip killing current connection (default: yes).",
	"LIST [options ...]",
	"    Return information about client connections. Options:",
	"    * TYPE (NORMAL|MASTER|REPLICA|PUBSUB)",
	"      Return clients of specified type.",
	"REPLY (ON|OFF|SKIP)",
	"    Control the replies sent to the current connection.",
	"SETNAME <name>",
	"    Assign the name <name> to the current connection.",
	"SETINFO <option> <value>",
	"    Set client meta attr. Options are:",
	"    * LIB-NAME: the client lib name.",
	"    * LIB-VER: the client lib version.",
	"UNBLOCK <clientid> [TIMEOUT|ERROR]",
	"    Unblock the specified blocked client.",
	"TRACKING (ON|OFF) [REDIRECT <id>] [BCAST] [PREFIX <prefix> [...]]",
	"         [OPTIN] [OPTOUT] [NOLOOP]",
	"    Control server assisted client side caching.",
	"TRACKINGINFO",
	"    Report tracking status for the current connection.",
	"NO-EVICT (ON|OFF)",
	"    Protect current client connection from eviction.",
	"UNPAUSE",
	"    Stop the current client pause, resuming traffic.",
	"HELP",
	"    Prints this help.",
	"sluice answers these for its own clients (UNPAUSE: nothing is ever paused; TRACKING: a key read is invalidated right after its reply, and BCAST and REDIRECT are not supported); it does not support PAUSE.",
}

func cmdClient(s *Server, c *client, conn respConn, args [][]byte) {
	sub := strings.ToUpper(string(args[1]))
	switch {
	case sub == "GETREDIR":
		// No redirection is ever taken (trackOn): 0 while tracking.
		if c.track != nil {
			conn.WriteInt(0)
		} else {
			conn.WriteInt(-1)
		}
		return
	case sub == "TRACKINGINFO":
		writeTrackingInfo(conn, c.track)
		return
	case sub == "TRACKING":
		o, err := s.trackingOptions(args[3:])
		if err == nil {
			switch lowerName(args[2]) {
			case "on":
				err = c.trackOn(o)
			case "off":
				c.track = nil
				c.published()
			default:
				err = errors.New("syntax error")
			}
		}
		if err != nil {
			s.writeError(conn, err)
			return
		}
		conn.WriteString("OK")
		return
	case sub == "CACHING":
		if err := c.caching(lowerName(args[2])); err != nil {
			s.writeError(conn, err)
			return
		}
		conn.WriteString("OK")
		return
	case sub == "UNPAUSE":
		// Nothing is ever paused, as PAUSE is refused: Redis's +OK holds.
		conn.WriteString("OK")
		return
	}
	if clientRefused[sub] {
		s.writeError(conn, fmt.Errorf("sluice does not support CLIENT %s", sub))
		return
	}
	switch sub {
	case "HELP":
		conn.WriteArray(len(clientHelp))
		for _, line := range clientHelp {
			conn.WriteString(line)
		}
	case "SETNAME":
		if err := validName(args[2]); err != nil {
			s.writeError(conn, err)
			return
		}
		c.name = string(args[2])
		c.published()
		conn.WriteString("OK")
	case "GETNAME":
		if c.name == "" {
			conn.WriteNull()
		} else {
			conn.WriteBulkString(c.name)
		}
	case "ID":
		conn.WriteInt64(c.id)
	case "SETINFO":
		switch lowerName(args[2]) {
		case "lib-name":
			if err := validName(args[3]); err != nil {
				s.writeError(conn, errors.New("lib-name cannot contain spaces, newlines or special characters."))
				return
			}
			c.lib = string(args[3])
		case "lib-ver":
			if err := validName(args[3]); err != nil {
				s.writeError(conn, errors.New("lib-ver cannot contain spaces, newlines or special characters."))
				return
			}
			c.ver = string(args[3])
		default:
			s.writeError(conn, fmt.Errorf("Unrecognized option '%s'", args[2]))
			return
		}
		c.published()
		conn.WriteString("OK")
	case "INFO":
		conn.WriteVerbatim(c.view.line(time.Now()))
	case "KILL":
		s.clientKill(c, conn, args)
	case "UNBLOCK":
		s.clientUnblock(conn, args)
	case "LIST":
		list, err := s.clientList(args[2:])
		if err != nil {
			s.writeError(conn, err)
			return
		}
		conn.WriteVerbatim(list)
	case "REPLY":
		// OFF and SKIP are not answered; ON is. Its options, as all of
		// CLIENT's, match in ASCII only, as Redis's strcasecmp: "ſkip"
		// (long s) is no SKIP.
		switch lowerName(args[2]) {
		case "on":
			c.replyOff, c.replyOn = false, true
			conn.WriteString("OK")
		case "off":
			c.replyOff = true
		case "skip":
			// As Redis: a SKIP while replies are off is nothing, so a
			// RESET after it is answered.
			c.skip = !c.replyOff
		default:
			s.writeError(conn, errors.New("syntax error"))
		}
	case "NO-EVICT":
		// sluice never evicts a client for memory: either answer holds,
		// and is shown as Redis shows it. RESET keeps it, as Redis 7.0's.
		switch on := lowerName(args[2]); on {
		case "on", "off":
			c.noEvict = on == "on"
			c.published()
			conn.WriteString("OK")
		default:
			s.writeError(conn, errors.New("syntax error"))
		}
	}
}

// trackingOptions reads CLIENT TRACKING's options as Redis 7.0 does
// before it looks at ON or OFF, so that OFF with options, which Redis
// takes, is answered as Redis answers it; a REDIRECT names one of
// sluice's clients, as the IDs it gives are its own.
func (s *Server) trackingOptions(opts [][]byte) (trackingOpts, error) {
	var o trackingOpts
	for j := 0; j < len(opts); j++ {
		opt, more := lowerName(opts[j]), j < len(opts)-1
		switch {
		case opt == "redirect" && more:
			j++
			if o.redirect != 0 {
				return o, errors.New("A client can only redirect to a single other client")
			}
			id, ok := parseRedisInt(opts[j])
			if !ok {
				return o, errors.New("value is not an integer or out of range")
			}
			if len(s.clients.list(func(v *clientView) bool { return v.id == id })) == 0 {
				return o, errors.New("The client ID you want redirect to does not exist")
			}
			o.redirect = id
		case opt == "prefix" && more:
			j++
			o.prefixes++
		case opt == "bcast":
			o.bcast = true
		case opt == "optin":
			o.optin = true
		case opt == "optout":
			o.optout = true
		case opt == "noloop":
			o.noloop = true
		default:
			return o, errors.New("syntax error")
		}
	}
	return o, nil
}

// writeTrackingInfo is CLIENT TRACKINGINFO of a client whose tracking is
// t, as Redis 7.0 answers it: flags in its order, redirect 0 while on
// (sluice takes none), no prefixes (nor BCAST).
func writeTrackingInfo(conn respConn, t *tracking) {
	flags := []string{"off"}
	redirect := -1
	if t != nil {
		flags, redirect = []string{"on"}, 0
		if t.optin {
			flags = append(flags, "optin")
			if t.caching {
				flags = append(flags, "caching-yes")
			}
		}
		if t.optout {
			flags = append(flags, "optout")
			if t.caching {
				flags = append(flags, "caching-no")
			}
		}
		if t.noloop {
			flags = append(flags, "noloop")
		}
	}
	conn.WriteMap(3)
	conn.WriteBulkString("flags")
	conn.WriteSet(len(flags))
	for _, f := range flags {
		conn.WriteBulkString(f)
	}
	conn.WriteBulkString("redirect")
	conn.WriteInt(redirect)
	conn.WriteBulkString("prefixes")
	conn.WriteArray(0)
}

// commandHelp is Redis 7.0's COMMAND HELP, word for word: a cluster
// behind sluice answers it so.
var commandHelp = []string{
	"COMMAND <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
	"(no subcommand)",
	"    Return details about all Redis commands.",
	"COUNT",
	"    Return the total number of commands in this Redis server.",
	"LIST",
	"    Return a list of all commands in this Redis server.",
	"INFO [<command-name> ...]",
	"    Return details about multiple Redis commands.",
	"    If no command names are given, documentation details for all",
	"    commands are returned.",
	"DOCS [<command-name> ...]",
	"    Return documentation details about multiple Redis commands.",
	"    If no command names are given, documentation details for all",
	"    commands are returned.",
	"GETKEYS <full-command>",
	"    Return the keys from a full Redis command.",
	"GETKEYSANDFLAGS <full-command>",
	"    Return the keys and the access flags from a full Redis command.",
	"HELP",
	"    Prints this help.",
}

// cmdCommand answers COMMAND and its subcommands from the table, enough
// for redis-cli's hints and clients that learn key positions from it.
func cmdCommand(s *Server, _ *client, conn respConn, args [][]byte) {
	if len(args) == 1 || (len(args) == 2 && strings.EqualFold(string(args[1]), "info")) {
		names := make([]string, 0, len(commands))
		for name := range commands {
			names = append(names, name)
		}
		sort.Strings(names)
		conn.WriteArray(len(names))
		for _, name := range names {
			writeCommandInfo(conn, commands[name])
		}
		return
	}
	switch sub := strings.ToUpper(string(args[1])); sub {
	case "COUNT":
		conn.WriteInt(len(commands))
	case "HELP":
		conn.WriteArray(len(commandHelp))
		for _, line := range commandHelp {
			conn.WriteString(line)
		}
	case "LIST":
		if len(args) != 2 && (len(args) != 5 || !strings.EqualFold(string(args[2]), "filterby") ||
			!slices.Contains([]string{"module", "aclcat", "pattern"}, lowerName(args[3]))) {
			s.writeError(conn, errors.New("syntax error"))
			return
		}
		var names []string
		for name, cmd := range commands {
			if len(args) == 2 || listedBy(cmd, args[3], args[4]) {
				names = append(names, name)
			}
		}
		sort.Strings(names)
		conn.WriteArray(len(names))
		for _, name := range names {
			conn.WriteBulkString(name)
		}
	case "INFO":
		conn.WriteArray(len(args) - 2)
		for _, a := range args[2:] {
			if cmd, ok := commands[strings.ToLower(string(a))]; ok {
				writeCommandInfo(conn, cmd)
			} else {
				conn.WriteNull()
			}
		}
	case "GETKEYS", "GETKEYSANDFLAGS":
		cmdGetKeys(s, conn, args, sub == "GETKEYSANDFLAGS")
	case "DOCS":
		// Only what has a summary: redis-cli keeps its own hints for the
		// rest.
		var docs []*command
		for name, cmd := range commands {
			if cmd.summary != "" && (len(args) == 2 || slices.ContainsFunc(args[2:], func(a []byte) bool { return strings.EqualFold(string(a), name) })) {
				docs = append(docs, cmd)
			}
		}
		conn.WriteMap(len(docs))
		for _, cmd := range docs {
			writeDocs(conn, cmd)
		}
	default:
		s.writeError(conn, fmt.Errorf("unknown subcommand '%s'. Try COMMAND HELP.", cut128(args[1])))
	}
}

// writeDocs is cmd's entry of COMMAND DOCS: its name and its docs, in
// Redis 7's order.
func writeDocs(conn respConn, cmd *command) {
	conn.WriteBulkString(cmd.name)
	conn.WriteMap(5)
	conn.WriteBulkString("summary")
	conn.WriteBulkString(cmd.summary)
	conn.WriteBulkString("since")
	conn.WriteBulkString(cmd.since)
	conn.WriteBulkString("group")
	conn.WriteBulkString("rate_limit")
	conn.WriteBulkString("complexity")
	conn.WriteBulkString(cmd.complexity)
	conn.WriteBulkString("arguments")
	writeArgDocs(conn, cmd.args)
}

func writeArgDocs(conn respConn, args []argDoc) {
	conn.WriteArray(len(args))
	for _, a := range args {
		n := 2
		for _, has := range []bool{a.typ == "key", a.token != "", a.optional, a.args != nil} {
			n += btoi(has)
		}
		conn.WriteMap(n)
		conn.WriteBulkString("name")
		conn.WriteBulkString(a.name)
		conn.WriteBulkString("type")
		conn.WriteBulkString(a.typ)
		if a.typ == "key" {
			conn.WriteBulkString("key_spec_index")
			conn.WriteInt(0)
		}
		if a.token != "" {
			conn.WriteBulkString("token")
			conn.WriteBulkString(a.token)
		}
		if a.optional {
			conn.WriteBulkString("flags")
			conn.WriteSet(1)
			conn.WriteString("optional")
		}
		if a.args != nil {
			conn.WriteBulkString("arguments")
			writeArgDocs(conn, a.args)
		}
	}
}

func writeCommandInfo(conn respConn, cmd *command) {
	conn.WriteArray(10)
	conn.WriteBulkString(cmd.name)
	conn.WriteInt(cmd.arity)
	writeFlags(conn, cmd.flags)
	conn.WriteInt(cmd.firstKey)
	conn.WriteInt(cmd.lastKey)
	conn.WriteInt(cmd.step)
	conn.WriteSet(len(cmd.acl))
	for _, cat := range cmd.acl {
		conn.WriteString("@" + cat)
	}
	conn.WriteSet(0) // tips
	// Key specs: a set in Redis 7.0's RESP3, as are the others.
	if cmd.keyFlags == nil {
		conn.WriteSet(0)
	} else {
		conn.WriteSet(1)
		conn.WriteMap(3)
		conn.WriteBulkString("flags")
		writeFlags(conn, cmd.keyFlags)
		conn.WriteBulkString("begin_search")
		conn.WriteMap(2)
		conn.WriteBulkString("type")
		conn.WriteBulkString("index")
		conn.WriteBulkString("spec")
		conn.WriteMap(1)
		conn.WriteBulkString("index")
		conn.WriteInt(cmd.firstKey)
		conn.WriteBulkString("find_keys")
		conn.WriteMap(2)
		conn.WriteBulkString("type")
		conn.WriteBulkString("range")
		conn.WriteBulkString("spec")
		conn.WriteMap(3)
		conn.WriteBulkString("lastkey")
		conn.WriteInt(0)
		conn.WriteBulkString("keystep")
		conn.WriteInt(1)
		conn.WriteBulkString("limit")
		conn.WriteInt(0)
	}
	conn.WriteSet(0) // subcommands
}

func writeFlags(conn respConn, flags []string) {
	conn.WriteSet(len(flags))
	for _, f := range flags {
		conn.WriteString(f)
	}
}

// cmdGetKeys answers COMMAND GETKEYS and GETKEYSANDFLAGS for sluice's
// commands as Redis 7 does for its own: the key of a bucket command, the
// errors of a name it lacks, a command without keys or a wrong count.
func cmdGetKeys(s *Server, conn respConn, args [][]byte, withFlags bool) {
	cmd, ok := commands[strings.ToLower(string(args[2]))]
	switch {
	// Redis looks the target up with its subcommand: a container's
	// subcommand it lacks is no command at all.
	case !ok || cmd.fullName(args[2:]) == nil:
		s.writeError(conn, errors.New("Invalid command specified"))
		return
	case cmd.keyFlags == nil:
		s.writeError(conn, errors.New("The command has no key arguments"))
		return
	}
	if n := len(args) - 2; (cmd.arity > 0 && n != cmd.arity) || n < -cmd.arity {
		s.writeError(conn, errors.New("Invalid number of arguments specified for command"))
		return
	}
	conn.WriteArray(1)
	if withFlags {
		conn.WriteArray(2)
		conn.WriteBulk(args[2+cmd.firstKey])
		writeFlags(conn, cmd.keyFlags)
	} else {
		conn.WriteBulk(args[2+cmd.firstKey])
	}
}
