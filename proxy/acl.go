package proxy

import (
	"bytes"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/sluice-rl/sluice/router/glob"

	cmdspec "github.com/sluice-rl/sluice/router/command"
)

// Users are the ACL users of a sluice that requires authentication: the
// default user and those of an ACL file, in Redis's own syntax
// (`user alice on #<sha256> ~rate:* +throttle +@read`), the subset that
// makes sense for a proxy: on/off, passwords, commands and categories,
// key and channel patterns. Selectors are refused when loaded: sluice
// could not enforce them.
type Users struct {
	byName map[string]*User
	order  []string // by name, as ACL LIST gives them
}

// User is one ACL user.
type User struct {
	name   string
	on     bool
	nopass bool
	hashes [][sha256.Size]byte
	// allKeys, or the glob patterns (Redis glob) of the keys it may use.
	allKeys bool
	keys    []string
	// allChannels, or the glob patterns of the pub/sub channels it may
	// use: none unless given, as Redis 7's acl-pubsub-default
	// (resetchannels) has it for the users of an ACL file.
	allChannels bool
	channels    []string
	// rules apply in order, the last that matches a command deciding it,
	// as Redis applies them.
	rules []aclRule
	// all: every command on every key and channel, so nothing is checked
	// per command.
	all bool
}

type aclRule struct {
	allow    bool
	all      bool   // +@all, allcommands
	name     string // a command, or "parent|sub"
	category string // without '@'
}

// aclCategories are Redis 7's ACL categories (ACL CAT); rate_limit, Redis
// 8.8's for GCRA; and those of the modules Redis 8 ships (RediSearch,
// RedisJSON, RedisTimeSeries, RedisBloom), whose commands a Redis 8
// cluster reports in them: a file written for such a cluster loads.
var aclCategories = []string{"keyspace", "read", "write", "set", "sortedset", "list", "hash", "string", "bitmap",
	"hyperloglog", "geo", "stream", "pubsub", "admin", "fast", "slow", "blocking", "dangerous", "connection",
	"transaction", "scripting", "rate_limit",
	"search", "json", "timeseries", "bloom", "cuckoo", "cms", "topk", "tdigest"}

// allowAll is the user of a sluice that requires no authentication.
var allowAll = &User{name: "default", on: true, nopass: true, allKeys: true, allChannels: true, all: true,
	rules: []aclRule{{allow: true, all: true}}} // for ACL LIST: all alone is not listed

// ParseUsers reads an ACL file's text (one "user" line per user; blank
// lines and # comments are skipped) and the --requirepass password of the
// default user. A file that defines "default" and a requirepass together
// are refused, as Redis refuses them.
func ParseUsers(text, requirepass string) (*Users, error) {
	us := &Users{byName: map[string]*User{}}
	for n, line := range strings.Split(text, "\n") {
		f := aclFields(line)
		if len(f) == 0 || strings.HasPrefix(f[0], "#") {
			continue
		}
		if f[0] != "user" || len(f) < 2 {
			return nil, fmt.Errorf("ACL file, line %d: want \"user <name> <rules...>\"", n+1)
		}
		if strings.ContainsAny(f[1], asciiSpace+"\x00") {
			return nil, fmt.Errorf("ACL file, line %d: user name %q contains white space", n+1, f[1])
		}
		if _, dup := us.byName[f[1]]; dup {
			return nil, fmt.Errorf("ACL file, line %d: user %q defined twice", n+1, f[1])
		}
		u := &User{name: f[1]}
		for i, r := range f[2:] {
			if err := u.apply(r); err != nil {
				return nil, fmt.Errorf("ACL file, line %d, word %d: %w", n+1, i+3, err)
			}
		}
		u.settle()
		us.byName[u.name] = u
		us.order = append(us.order, u.name)
	}
	if _, ok := us.byName["default"]; ok && requirepass != "" {
		return nil, errors.New("--requirepass and an ACL file that defines the default user: set its password in the file")
	}
	if _, ok := us.byName["default"]; !ok {
		d := &User{name: "default", on: true, nopass: true, allKeys: true, allChannels: true, rules: []aclRule{{allow: true, all: true}}}
		if requirepass != "" {
			d.nopass = false
			d.hashes = [][sha256.Size]byte{sha256.Sum256([]byte(requirepass))}
		}
		d.settle()
		us.byName["default"] = d
		us.order = append(us.order, "default")
	}
	slices.Sort(us.order) // Redis keeps its users in a radix tree
	return us, nil
}

// asciiSpace is C's isspace.
const asciiSpace = " \t\n\v\f\r"

// aclFields splits an ACL file's line as Redis's ACLLoadFromFile does: the
// line trimmed of spaces, tabs and line ends is cut at each space, and each
// part trimmed of tabs and line ends. A tab, or a Unicode space (U+00A0),
// inside a password is the password's: ">secret\ton" is one password, not
// the password "secret" and the rule "on". Empty parts (two spaces) are
// skipped, as Redis skips an empty rule.
func aclFields(line string) []string {
	var f []string
	for _, part := range strings.Split(strings.Trim(line, " \t\r\n"), " ") {
		if part = strings.Trim(part, "\t\r\n"); part != "" {
			f = append(f, part)
		}
	}
	return f
}

// apply takes one rule of an ACL line. Its keywords are read in any case,
// as Redis reads them (strcasecmp): -@ALL is -@all, not a category "all"
// that revokes nothing.
func (u *User) apply(r string) error {
	switch lr := strings.ToLower(r); lr {
	case "on", "off", "nopass", "resetpass", "allkeys", "resetkeys", "allcommands", "+@all",
		"nocommands", "-@all", "reset", "allchannels", "resetchannels", "sanitize-payload":
		r = lr
	}
	switch {
	case r == "on", r == "off":
		u.on = r == "on"
	case r == "nopass":
		u.nopass, u.hashes = true, nil
	case r == "resetpass":
		u.nopass, u.hashes = false, nil
	case strings.HasPrefix(r, ">"), strings.HasPrefix(r, "#"):
		h, err := passwordHash(r)
		if err != nil {
			return err
		}
		u.nopass = false
		if !slices.Contains(u.hashes, h) {
			u.hashes = append(u.hashes, h)
		}
	case strings.HasPrefix(r, "<"), strings.HasPrefix(r, "!"):
		h, err := passwordHash(r)
		if err != nil {
			return err
		}
		i := slices.Index(u.hashes, h)
		if i < 0 {
			// Refused, as Redis refuses it: the password a misspelt
			// removal meant to revoke would stay valid unnoticed.
			return errors.New("the password to remove is not the user's")
		}
		u.hashes = slices.Delete(u.hashes, i, i+1)
	case r == "allkeys", r == "~*":
		u.allKeys, u.keys = true, nil
	case r == "resetkeys":
		u.allKeys, u.keys = false, nil
	case strings.HasPrefix(r, "~"):
		if u.allKeys {
			// As Redis: the pattern would grant nothing more.
			return fmt.Errorf("%q: a key pattern after allkeys (~*) has no effect; resetkeys first", r)
		}
		u.keys = append(u.keys, r[1:])
	case r == "allcommands", r == "+@all":
		u.rules = append(u.rules, aclRule{allow: true, all: true})
	case r == "nocommands", r == "-@all":
		u.rules = append(u.rules, aclRule{all: true})
	case strings.HasPrefix(r, "+@"), strings.HasPrefix(r, "-@"):
		cat := strings.ToLower(r[2:])
		if !slices.Contains(aclCategories, cat) {
			// As Redis refuses it: a misspelt -@dangerous would deny
			// nothing.
			return fmt.Errorf("%q: unknown ACL category", r)
		}
		u.rules = append(u.rules, aclRule{allow: r[0] == '+', category: cat})
	case len(r) > 1 && (r[0] == '+' || r[0] == '-'):
		// In ASCII only, as Redis lowers it: a first argument's other bytes
		// are kept (strings.ToLower would turn the Kelvin sign into k).
		u.rules = append(u.rules, aclRule{allow: r[0] == '+', name: lowerASCII(r[1:])})
	case r == "reset":
		*u = User{name: u.name}
	case r == "sanitize-payload":
		// Redis's default for every user, which its ACL SAVE and ACL LIST
		// write: a file Redis saved loads. RESTORE runs as sluice's
		// cluster user, whose flags the cluster applies, so this changes
		// nothing; skip-sanitize-payload, which asks for less checking, is
		// refused below.
	case r == "allchannels", r == "&*":
		u.allChannels, u.channels = true, nil
	case r == "resetchannels":
		u.allChannels, u.channels = false, nil
	case strings.HasPrefix(r, "&"):
		if u.allChannels {
			// As Redis: the pattern would grant nothing more.
			return fmt.Errorf("%q: a channel pattern after allchannels (&*) has no effect; resetchannels first", r)
		}
		u.channels = append(u.channels, r[1:])
	default:
		return errors.New("not a rule sluice knows, or a password without its '>' (read or write only key patterns, %R~ %W~, and selectors are not enforced, so they are refused)")
	}
	return nil
}

// passwordHash is the SHA-256 of a password rule's password: given plain
// after '>' or '<', or after '#' or '!' as 64 hex digits in lower case, the
// only form Redis takes (it compares hashes as text).
func passwordHash(r string) ([sha256.Size]byte, error) {
	if r[0] == '>' || r[0] == '<' {
		return sha256.Sum256([]byte(r[1:])), nil
	}
	b, err := hex.DecodeString(r[1:])
	if err != nil || len(b) != sha256.Size || strings.ToLower(r[1:]) != r[1:] {
		// Unquoted, as the rule below: a password mistaken for its hash
		// would be printed at start and logged at a reload.
		return [sha256.Size]byte{}, errors.New("a password hash (# or !) is 64 lower case hex digits of its SHA-256")
	}
	return [sha256.Size]byte(b), nil
}

// UnknownCommands is the command names of users' rules (+name, -name,
// +container|sub, +command|first-arg) that match no command sluice
// checks: a command neither sluice nor the cluster, whose command table is
// specs, has, a subcommand no container has, or a deny rule on a plain
// command's first argument (-debug|segfault). Redis refuses them when it
// loads the file; sluice learns the cluster's commands only once the
// cluster answers, so it reports them then: a misspelt -flushal denies
// nothing.
func (us *Users) UnknownCommands(specs map[string]*cmdspec.Spec) []string {
	var out []string
	for _, name := range us.order {
		for _, r := range us.byName[name].rules {
			if r.name != "" && !slices.Contains(out, r.name) && !knownCommand(r, specs) {
				out = append(out, r.name)
			}
		}
	}
	return out
}

// knownCommand reports whether r names a command, or "container|sub" a
// subcommand, of sluice's (which answers its containers' subcommands
// itself) or else of the cluster's; or, allowing, "command|arg", the first
// argument of one without subcommands.
func knownCommand(r aclRule, specs map[string]*cmdspec.Spec) bool {
	parent, sub, isSub := strings.Cut(r.name, "|")
	// Redis refuses an empty first argument (+get|), and takes the last
	// '|' as the split (+get|a|b names a command "get|a").
	arg := r.allow && sub != "" && !strings.Contains(sub, "|")
	if cmd := commands[parent]; cmd != nil {
		return !isSub || cmd.subs[sub] != nil || arg && cmd.subs == nil
	}
	spec := specs[parent]
	return spec != nil && (!isSub || spec.Subcommands[sub] != nil || arg && len(spec.Subcommands) == 0)
}

// allCommands reports whether u's rules permit every command: the last
// +@all or -@all is +@all, and no rule after it denies anything.
func (u *User) allCommands() bool {
	all := false
	for _, r := range u.rules {
		switch {
		case r.all:
			all = r.allow
		case !r.allow:
			all = false
		}
	}
	return all
}

// settle works out what needs no check per command.
func (u *User) settle() {
	u.all = u.on && u.allKeys && u.allChannels && len(u.rules) > 0 && u.rules[len(u.rules)-1].all && u.rules[len(u.rules)-1].allow
}

// AuthRequired reports whether a new connection must authenticate: the
// default user has a password or is off.
func (us *Users) AuthRequired() bool {
	d := us.byName["default"]
	return !d.on || !d.nopass
}

// defaultUser is who a new connection is, or nil while it must
// authenticate.
func (us *Users) defaultUser() *User {
	if us == nil {
		return allowAll
	}
	if us.AuthRequired() {
		return nil
	}
	return us.byName["default"]
}

// authenticate returns the user name is when pass is its password, nil
// otherwise (a user that does not exist or is off included). The
// password's hash is compared with every hash the user has, in constant
// time.
func (us *Users) authenticate(name, pass []byte) *User {
	if us == nil {
		if string(name) == "default" {
			return allowAll
		}
		return nil
	}
	u := us.byName[string(name)]
	sum := sha256.Sum256(pass)
	ok := 0
	if u != nil {
		for _, h := range u.hashes {
			ok |= subtle.ConstantTimeCompare(sum[:], h[:])
		}
	}
	if u == nil || !u.on || (ok == 0 && !u.nopass) {
		return nil
	}
	return u
}

// permits reports whether u may run the command name (a subcommand as
// "parent|sub") of categories cats, whose first argument is first when
// it is a command without subcommands (nil otherwise).
func (u *User) permits(name string, cats []string, first []byte) bool {
	parent, _, _ := strings.Cut(name, "|")
	allowed := false
	for _, r := range u.rules {
		if r.all || r.name == name || r.name == parent || (r.category != "" && slices.Contains(cats, r.category)) ||
			r.allow && first != nil && r.firstArg(name, first) {
			allowed = r.allow
		}
	}
	return allowed
}

// firstArg reports whether r, as "command|arg", allows the command name
// with its first argument first: Redis 7 still takes such a rule on a
// command without subcommands (+select|0), comparing the argument in any
// case, ASCII's only (strcasecmp: no Unicode folding, which would take
// "ſtats" for "stats"), and refuses its deny form.
func (r aclRule) firstArg(name string, first []byte) bool {
	cmd, arg, ok := strings.Cut(r.name, "|")
	if !ok || cmd != name || len(arg) != len(first) {
		return false
	}
	for i := range len(arg) {
		if lowerByte(arg[i]) != lowerByte(first[i]) {
			return false
		}
	}
	return true
}

func lowerByte(c byte) byte {
	if c >= 'A' && c <= 'Z' {
		c += 'a' - 'A'
	}
	return c
}

// lowerASCII is s with its ASCII letters in lower case, its other bytes
// as they are.
func lowerASCII(s string) string {
	b := []byte(s)
	for i, c := range b {
		b[i] = lowerByte(c)
	}
	return string(b)
}

// mayUse reports whether u may use key.
func (u *User) mayUse(key []byte) bool {
	if u.allKeys {
		return true
	}
	for _, p := range u.keys {
		if glob.Match(string(key), p) {
			return true
		}
	}
	return false
}

// mayUseChannel reports whether u may use channel: for a pattern (of
// PSUBSCRIBE), only one of its own patterns given literally, as Redis
// checks it.
func (u *User) mayUseChannel(channel []byte, pattern bool) bool {
	if u.allChannels {
		return true
	}
	for _, p := range u.channels {
		if pattern && p == string(channel) || !pattern && glob.Match(string(channel), p) {
			return true
		}
	}
	return false
}

// line is u as ACL LIST shows it: passwords by their hashes.
func (u *User) line() string {
	var b strings.Builder
	b.WriteString("user ")
	b.WriteString(u.name)
	if u.on {
		b.WriteString(" on")
	} else {
		b.WriteString(" off")
	}
	if u.nopass {
		b.WriteString(" nopass")
	}
	for _, h := range u.hashes {
		b.WriteString(" #" + hex.EncodeToString(h[:]))
	}
	if u.allKeys {
		b.WriteString(" ~*")
	}
	for _, k := range u.keys {
		b.WriteString(" ~" + k)
	}
	if u.allChannels {
		b.WriteString(" &*")
	} else {
		b.WriteString(" resetchannels")
	}
	for _, ch := range u.channels {
		b.WriteString(" &" + ch)
	}
	// As Redis describes them: from +@all or -@all, the rules before the
	// last of those left out, as they no longer decide anything.
	rules := u.rules
	last := -1
	for i, r := range rules {
		if r.all {
			last = i
		}
	}
	if last < 0 {
		b.WriteString(" -@all")
	} else {
		rules = rules[last:]
	}
	for _, r := range rules {
		sign := "-"
		if r.allow {
			sign = "+"
		}
		switch {
		case r.all:
			b.WriteString(" " + sign + "@all")
		case r.category != "":
			b.WriteString(" " + sign + "@" + r.category)
		default:
			b.WriteString(" " + sign + r.name)
		}
	}
	return b.String()
}

var (
	errNoAuth  = errors.New("NOAUTH Authentication required.")
	errNoKey   = errors.New("NOPERM No permissions to access a key")
	errNoChan  = errors.New("NOPERM No permissions to access a channel")
	errBadPass = errors.New("WRONGPASS invalid username-password pair or user is disabled.")
)

// adminSubcommands are the subcommands of sluice's containers that Redis
// 7.0 puts in @admin and @dangerous besides their container's categories
// (COMMAND INFO): the rest of ACL's are @slow, of CLIENT's @slow
// @connection, of CLUSTER's @slow.
var adminSubcommands = map[string]bool{
	"acl|deluser": true, "acl|dryrun": true, "acl|getuser": true, "acl|list": true, "acl|load": true,
	"acl|log": true, "acl|save": true, "acl|setuser": true, "acl|users": true,
	"client|kill": true, "client|list": true, "client|no-evict": true, "client|pause": true,
	"client|unblock": true, "client|unpause": true,
	"cluster|addslots": true, "cluster|addslotsrange": true, "cluster|bumpepoch": true,
	"cluster|count-failure-reports": true, "cluster|delslots": true, "cluster|delslotsrange": true,
	"cluster|failover": true, "cluster|flushslots": true, "cluster|forget": true, "cluster|meet": true,
	"cluster|replicas": true, "cluster|replicate": true, "cluster|reset": true, "cluster|saveconfig": true,
	"cluster|set-config-epoch": true, "cluster|setslot": true, "cluster|slaves": true,
}

// runsCode are the commands that run a script or function, whose keys and
// channels inside sluice cannot see; the rest of @scripting (SCRIPT EXISTS,
// FUNCTION LIST, ...) touches none.
var runsCode = map[string]bool{"eval": true, "evalsha": true, "eval_ro": true, "evalsha_ro": true, "fcall": true, "fcall_ro": true}

// authorize checks that c may run args: it is authenticated, and its user
// may run the command on its keys. cmd is sluice's own command, or nil for
// one the cluster runs.
func (s *Server) authorize(c *client, cmd *command, args [][]byte) error {
	if cmd != nil && cmd.has("no_auth") {
		return nil
	}
	var name string
	var cats []string
	var first []byte // of a command without subcommands
	var keys, channels [][]byte
	pattern := false
	// unchecked refuses what sluice cannot check key by key, once the
	// command itself is permitted: Redis checks the command first.
	var unchecked error
	switch {
	case cmd != nil:
		name, cats = cmd.name, cmd.acl
		if full := cmd.fullName(args); full != nil {
			// A container's subcommand goes by its own name, as Redis
			// grants and denies it (+command|count, -cluster|nodes).
			name = *full
		}
		if cmd.subs == nil && len(args) > 1 {
			first = args[1]
		}
		if (cmd.name == "acl" || cmd.name == "client") && len(args) > 1 {
			name = cmd.name + "|" + string(bytes.ToLower(args[1]))
		}
		if adminSubcommands[name] {
			// Denied to a user without @admin or @dangerous as Redis
			// denies them, before sluice's own refusal of most of them.
			cats = append(slices.Clip(cats), "admin", "dangerous")
		}
		if cmd.firstKey > 0 && len(args) > cmd.firstKey {
			keys = args[cmd.firstKey : cmd.firstKey+1]
		}
	case s.cfg.Forwarder != nil:
		specs := s.cfg.Forwarder.Commands()
		if specs == nil {
			// Refused rather than let through: the table may be read
			// before forward looks again.
			if c.user == nil {
				return errNoAuth
			}
			return errNoTable
		}
		spec, err := cmdspec.Lookup(specs, args)
		if err != nil {
			return nil // answered the error: it runs nothing
		}
		name, cats = spec.Name, spec.Categories
		if len(spec.Subcommands) == 0 && !strings.Contains(name, "|") && len(args) > 1 {
			first = args[1]
		}
		idx, kerr := spec.Keys(nil, args)
		switch {
		case c.user == nil:
		case !c.user.allKeys && kerr != nil && (name == "sort" || name == "sort_ro") && !sortPatterns(args):
			// SORT's key specs are incomplete, so Redis checks the keys
			// its own code finds, as routing does: without BY and GET
			// (which Redis refuses a user without allkeys), its key and
			// the one it stores into.
			idx = sortKeys(args, name == "sort")
		case !c.user.allKeys && kerr != nil:
			// Keys sluice cannot tell (SORT's BY and GET, a malformed
			// line): only a user of every key may send it.
			unchecked = errNoKey
		case (!c.user.allKeys || !c.user.allChannels) && runsCode[name]:
			unchecked = fmt.Errorf("NOPERM User %s may use some keys or channels only: sluice cannot check the keys and channels a script or function touches, so '%s' needs allkeys and allchannels", c.user.name, name)
		case runsCode[name] && !c.user.allCommands():
			// Redis checks every redis.call against the caller's rules; the
			// node runs it as sluice's cluster user, so a user denied a
			// command (-@dangerous, -set) could run it inside a script.
			unchecked = fmt.Errorf("NOPERM User %s may run some commands only: sluice cannot check the commands a script or function runs, so '%s' needs +@all", c.user.name, name)
		}
		// The channels Redis 7 checks (its commands_with_channels);
		// unsubscribing is never refused.
		switch name {
		case "publish", "spublish":
			channels = args[1:2]
		case "subscribe", "ssubscribe":
			channels = args[1:]
		case "psubscribe":
			channels, pattern = args[1:], true
		}
		switch name {
		case "georadius", "georadiusbymember":
			// They store into their last STORE or STOREDIST, where the key
			// specs name the first of each: both are checked.
			idx = append(idx, georadiusKeys(args)...)
		case "xread", "xreadgroup":
			idx = append(idx, xreadKeys(args)...)
		}
		for _, i := range idx {
			keys = append(keys, args[i])
		}
	default:
		return nil // an unknown command: answered so
	}
	u := c.user
	if u == nil {
		return errNoAuth
	}
	if !u.permits(name, cats, first) {
		return fmt.Errorf("NOPERM User %s has no permissions to run the '%s' command", u.name, name)
	}
	if unchecked != nil {
		return unchecked
	}
	for _, k := range keys {
		if !u.mayUse(k) {
			return errNoKey
		}
	}
	for _, ch := range channels {
		if !u.mayUseChannel(ch, pattern) {
			return errNoChan
		}
	}
	return nil
}

func (cmd *command) has(flag string) bool { return slices.Contains(cmd.flags, flag) }

// cmdAuth is AUTH [username] password.
func cmdAuth(s *Server, c *client, conn respConn, args [][]byte) {
	if len(args) > 3 {
		s.writeError(conn, errors.New("syntax error"))
		return
	}
	name, pass := []byte("default"), args[1]
	if len(args) == 3 {
		name, pass = args[1], args[2]
	} else if s.cfg.Users == nil || s.cfg.Users.byName["default"].nopass {
		// As Redis: whether or not the default user is on, it has no
		// password to give.
		s.writeError(conn, errors.New("ERR AUTH <password> called without any password configured for the default user. Are you sure your configuration is correct?"))
		return
	}
	u := s.cfg.Users.authenticate(name, pass)
	if u == nil {
		s.writeError(conn, errBadPass)
		return
	}
	c.user = u
	c.published()
	conn.WriteString("OK")
}

// cmdACL answers ACL WHOAMI and ACL LIST; users are defined in the ACL
// file (--aclfile), not at run time.
func cmdACL(s *Server, c *client, conn respConn, args [][]byte) {
	switch sub := strings.ToLower(string(args[1])); {
	case sub == "whoami":
		conn.WriteBulkString(c.user.name)
	case sub == "list":
		us := s.cfg.Users
		if us == nil {
			conn.WriteArray(1)
			conn.WriteBulkString(allowAll.line())
			return
		}
		conn.WriteArray(len(us.order))
		for _, n := range us.order {
			conn.WriteBulkString(us.byName[n].line())
		}
	default:
		s.writeError(conn, fmt.Errorf("sluice answers ACL WHOAMI and ACL LIST only ('%s'): its users are defined in --aclfile", truncate(args[1])))
	}
}

// sortPatterns reports whether a SORT has a GET option, or a BY whose
// pattern has a '*' (without one Redis sorts nothing by it), read as
// Redis's sortCommand reads its options (LIMIT takes two arguments,
// STORE, BY and GET one): their patterns name keys no key spec gives.
func sortPatterns(args [][]byte) bool {
	for i := 2; i < len(args); i++ {
		switch a := args[i]; {
		case bytes.EqualFold(a, []byte("get")):
			return true
		case bytes.EqualFold(a, []byte("by")):
			if i+1 < len(args) && bytes.IndexByte(args[i+1], '*') >= 0 {
				return true
			}
			i++
		case bytes.EqualFold(a, []byte("limit")):
			i += 2
		case bytes.EqualFold(a, []byte("store")):
			i++
		}
	}
	return false
}
