// Package command is the Redis command table as the cluster itself reports
// it in COMMAND: arity, flags and key specifications.
//
// sluice forwards ordinary commands to the node that owns their keys, so it
// must find the keys of any command line, and refuse malformed lines with
// the very errors Redis would send. Reading the table from the cluster,
// instead of writing one by hand, keeps sluice right for commands it has
// never heard of, modules included. Keys follows Redis 7's own algorithm
// (getKeysUsingKeySpecs in src/db.c) and Lookup its checks and error
// wording (processCommand in src/server.c), so that a client sees what it
// would see talking to Redis.
package command

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/redis/rueidis"
)

// Spec is one command as the cluster's COMMAND reply describes it.
type Spec struct {
	Name string // lower case; a subcommand is "parent|sub", as Redis names it
	// Arity follows Redis: n means exactly n arguments, -n at least n,
	// the command name (and a subcommand's name) included.
	Arity int
	Flags []string // lower case: "readonly", "write", "movablekeys", ...
	// Categories are its ACL categories, lower case, without '@'.
	Categories []string
	KeySpecs   []KeySpec
	// Subcommands are by lower-case subcommand name ("get" for
	// "config|get"); nil when the command has none.
	Subcommands map[string]*Spec
}

// KeySpec is one of Redis 7's key specifications: where a search for keys
// begins (BeginSearch) and how the keys are found from there (FindKeys).
// A type Redis reports as "unknown", or one this package does not know,
// means the keys cannot be found without knowing the command.
type KeySpec struct {
	// Flags are as Redis spells them: "RO", "RW", "OW", "RM", "access",
	// "update", "insert", "delete", "not_key", "incomplete",
	// "variable_flags".
	Flags []string

	BeginSearch string // "index", "keyword" or "unknown"
	Index       int    // index: the position of the first key
	// Keyword: the keys begin after this argument, searched for from
	// StartFrom towards the end, or, when StartFrom is negative, from
	// len(args)+StartFrom backwards.
	Keyword   string
	StartFrom int

	FindKeys string // "range", "keynum" or "unknown"
	// Range: the last key is LastKey positions after the first one or, when
	// negative, counts from the end of the arguments (-1 is the last); when
	// Limit is not 0, only the first 1/Limit of the arguments from the
	// first key on are keys (XREAD's come before as many IDs).
	LastKey, Limit int
	// Keynum: the argument KeyNumIdx positions after the beginning holds
	// the number of keys, the first of which is FirstKey positions after
	// the beginning.
	KeyNumIdx, FirstKey int
	KeyStep             int // range and keynum: the distance between keys
}

// ErrUnknownKeys reports a command whose keys its key specs do not locate:
// a spec of unknown type (SORT's BY and GET patterns), a spec Redis marks
// incomplete (MIGRATE's KEYS), or a command with movable keys and no specs
// (a module's). Redis falls back to code written for that command; the
// caller needs its own.
var ErrUnknownKeys = errors.New("command: key specs do not locate the keys")

// ErrBadKeys reports arguments that make no sense where the keys should be:
// a number of keys that is not a non-negative integer or counts past the
// last argument, or no key at all for a command that needs one. Redis finds
// no keys there either and the command itself then refuses the line, each
// with its own message ("ERR Number of keys can't be greater than number
// of args" for EVAL, "ERR at least 1 input key is needed for 'zunionstore'
// command", ...). A node given the line sends that exact message, after a
// redirection at most: Redis's fallback code may still find keys in it. The
// text is what Redis answers to COMMAND GETKEYS for such a line.
var ErrBadKeys = errors.New("ERR Invalid arguments specified for command")

// Parse reads the reply of COMMAND (or COMMAND INFO) into specs by name, in
// RESP3 (maps) or RESP2 (flat arrays). It needs Redis 7's reply, the first
// with key specs.
func Parse(m rueidis.RedisMessage) (map[string]*Spec, error) {
	entries, err := m.ToArray()
	if err != nil {
		return nil, fmt.Errorf("command: reading COMMAND reply: %w", err)
	}
	specs := make(map[string]*Spec, len(entries))
	for i := range entries {
		if entries[i].IsNil() {
			continue // COMMAND INFO's answer for a name it does not know
		}
		s, err := parseSpec(&entries[i])
		if err != nil {
			return nil, fmt.Errorf("command: reading COMMAND reply, entry %d: %w", i, err)
		}
		specs[s.Name] = s
	}
	return specs, nil
}

// parseSpec reads one entry: name, arity, flags, first key, last key,
// step, ACL categories, tips, key specs, subcommands.
func parseSpec(m *rueidis.RedisMessage) (*Spec, error) {
	f, err := m.ToArray()
	if err != nil {
		return nil, err
	}
	if len(f) < 10 {
		return nil, fmt.Errorf("%d fields, not Redis 7's 10: key specs need Redis 7 or later", len(f))
	}
	name, err := f[0].ToString()
	if err != nil {
		return nil, fmt.Errorf("name: %w", err)
	}
	s := &Spec{Name: strings.ToLower(name)}
	arity, err := f[1].AsInt64()
	if err != nil {
		return nil, fmt.Errorf("%s: arity: %w", s.Name, err)
	}
	s.Arity = int(arity)
	if s.Flags, err = f[2].AsStrSlice(); err != nil {
		return nil, fmt.Errorf("%s: flags: %w", s.Name, err)
	}
	for i, fl := range s.Flags {
		s.Flags[i] = strings.ToLower(fl)
	}
	cats, err := f[6].AsStrSlice()
	if err != nil {
		return nil, fmt.Errorf("%s: ACL categories: %w", s.Name, err)
	}
	for _, c := range cats {
		s.Categories = append(s.Categories, strings.TrimPrefix(strings.ToLower(c), "@"))
	}
	kss, err := f[8].ToArray()
	if err != nil {
		return nil, fmt.Errorf("%s: key specs: %w", s.Name, err)
	}
	for i := range kss {
		ks, err := parseKeySpec(&kss[i])
		if err != nil {
			return nil, fmt.Errorf("%s: key spec %d: %w", s.Name, i, err)
		}
		s.KeySpecs = append(s.KeySpecs, ks)
	}
	subs, err := f[9].ToArray()
	if err != nil {
		return nil, fmt.Errorf("%s: subcommands: %w", s.Name, err)
	}
	for i := range subs {
		sub, err := parseSpec(&subs[i])
		if err != nil {
			return nil, fmt.Errorf("%s: subcommand %d: %w", s.Name, i, err)
		}
		parent, name, ok := strings.Cut(sub.Name, "|")
		if !ok || parent != s.Name {
			return nil, fmt.Errorf("%s: subcommand %q is not named %s|...", s.Name, sub.Name, s.Name)
		}
		if s.Subcommands == nil {
			s.Subcommands = make(map[string]*Spec, len(subs))
		}
		s.Subcommands[name] = sub
	}
	return s, nil
}

func parseKeySpec(m *rueidis.RedisMessage) (KeySpec, error) {
	var r fieldReader
	fields := r.asMap(m) // a RESP3 map, or RESP2's flat array of pairs
	ks := KeySpec{Flags: r.strings(fields, "flags")}
	bs := r.asMap(r.field(fields, "begin_search"))
	ks.BeginSearch = r.string(bs, "type")
	spec := r.asMap(r.field(bs, "spec"))
	switch ks.BeginSearch {
	case "index":
		ks.Index = r.int(spec, "index")
	case "keyword":
		ks.Keyword = r.string(spec, "keyword")
		ks.StartFrom = r.int(spec, "startfrom")
	}
	fk := r.asMap(r.field(fields, "find_keys"))
	ks.FindKeys = r.string(fk, "type")
	spec = r.asMap(r.field(fk, "spec"))
	switch ks.FindKeys {
	case "range":
		ks.LastKey = r.int(spec, "lastkey")
		ks.KeyStep = r.int(spec, "keystep")
		ks.Limit = r.int(spec, "limit")
	case "keynum":
		ks.KeyNumIdx = r.int(spec, "keynumidx")
		ks.FirstKey = r.int(spec, "firstkey")
		ks.KeyStep = r.int(spec, "keystep")
	}
	return ks, r.err
}

// fieldReader reads the nested maps of a key spec, keeping the first
// error, so that its many fields are read without a check each.
type fieldReader struct{ err error }

func (r *fieldReader) field(m map[string]rueidis.RedisMessage, k string) *rueidis.RedisMessage {
	v, ok := m[k]
	if !ok {
		if r.err == nil {
			r.err = fmt.Errorf("no %s", k)
		}
		return nil
	}
	return &v
}

func (r *fieldReader) check(v *rueidis.RedisMessage, err error) bool {
	if err != nil && r.err == nil {
		r.err = err
	}
	return v != nil && r.err == nil
}

func (r *fieldReader) asMap(v *rueidis.RedisMessage) map[string]rueidis.RedisMessage {
	if !r.check(v, nil) {
		return nil
	}
	m, err := v.AsMap()
	r.check(v, err)
	return m
}

// int reads an integer of C's int range, as Redis's are, so that the
// arithmetic of Keys cannot overflow.
func (r *fieldReader) int(m map[string]rueidis.RedisMessage, k string) int {
	v := r.field(m, k)
	if !r.check(v, nil) {
		return 0
	}
	n, err := v.AsInt64()
	if err == nil && (n < -1<<31 || n >= 1<<31) {
		err = fmt.Errorf("%s %d out of range", k, n)
	}
	r.check(v, err)
	return int(n)
}

func (r *fieldReader) string(m map[string]rueidis.RedisMessage, k string) string {
	v := r.field(m, k)
	if !r.check(v, nil) {
		return ""
	}
	s, err := v.ToString()
	r.check(v, err)
	return s
}

func (r *fieldReader) strings(m map[string]rueidis.RedisMessage, k string) []string {
	v := r.field(m, k)
	if !r.check(v, nil) {
		return nil
	}
	s, err := v.AsStrSlice()
	r.check(v, err)
	return s
}

// Has reports whether the spec carries flag f, given in lower case.
func (s *Spec) Has(f string) bool {
	return slices.Contains(s.Flags, f)
}

// usable reports whether Keys can follow ks at all.
func (ks *KeySpec) usable() bool {
	return (ks.BeginSearch == "index" || ks.BeginSearch == "keyword") &&
		(ks.FindKeys == "range" && ks.Limit >= 0 || ks.FindKeys == "keynum") &&
		// Redis's own specs never have a step below 1; the loop over the
		// keys needs one.
		ks.KeyStep > 0 &&
		!slices.Contains(ks.Flags, "incomplete")
}

// Keys appends to dst the positions in args of the command's keys, and
// returns the extended slice. args[0] is the command name; for a
// subcommand, args[1] is its name. Positions come in the order of the key
// specs, each once. A command without keys appends nothing, and so does
// one flagged no_mandatory_keys (EVAL) given none.
//
// Keys follows Redis 7's getKeysUsingKeySpecs: for each key spec not
// flagged not_key (SPUBLISH's shard channel), begin_search, then
// find_keys. A spec Redis flags variable_flags still locates its keys
// (SET's GET option changes how the key is used, not where it is). An
// unusable spec answers ErrUnknownKeys; arguments that make a spec point
// nowhere answer ErrBadKeys.
//
// Keys allocates only when dst is too small.
func (s *Spec) Keys(dst []int, args [][]byte) ([]int, error) {
	if len(s.KeySpecs) == 0 && s.Has("movablekeys") {
		return dst, ErrUnknownKeys
	}
	// Redis gives up on the whole line when any spec fails, so an unusable
	// spec anywhere decides the answer before the arguments are read.
	keyed := false // some spec is of keys
	for i := range s.KeySpecs {
		ks := &s.KeySpecs[i]
		if slices.Contains(ks.Flags, "not_key") {
			continue
		}
		if !ks.usable() {
			return dst, ErrUnknownKeys
		}
		keyed = true
	}
	start := len(dst)
	argc := len(args)
	for i := range s.KeySpecs {
		ks := &s.KeySpecs[i]
		if slices.Contains(ks.Flags, "not_key") {
			continue
		}
		var first int
		if ks.BeginSearch == "index" {
			first = ks.Index
		} else if first = ks.search(args); first == 0 {
			continue // an optional keyword, absent
		}
		var last int
		if ks.FindKeys == "range" {
			switch {
			case ks.LastKey >= 0:
				last = first + ks.LastKey
			case ks.Limit == 0:
				last = argc + ks.LastKey
			default:
				last = first + (argc-first)/ks.Limit + ks.LastKey
			}
		} else {
			at := first + ks.KeyNumIdx
			if at < 0 || at >= argc {
				return dst[:start], ErrBadKeys
			}
			n, ok := numKeys(args[at], argc)
			if !ok {
				return dst[:start], ErrBadKeys
			}
			if n == 0 {
				// Redis's specs refuse zero keys too, and then its fallback
				// accepts them only for commands that may have none
				// (EVAL, FCALL).
				if s.Has("no_mandatory_keys") {
					continue
				}
				return dst[:start], ErrBadKeys
			}
			first += ks.FirstKey
			last = first + n - 1
		}
		if first < 0 || last < first || last >= argc {
			return dst[:start], ErrBadKeys
		}
		earlier := dst[start:]
		for p := first; p <= last; p += ks.KeyStep {
			if !slices.Contains(earlier, p) {
				dst = append(dst, p)
			}
		}
	}
	// A line that names no key of a command that needs one (XREAD without
	// STREAMS) is malformed: the command refuses it, and COMMAND GETKEYS
	// too.
	if keyed && len(dst) == start && !s.Has("no_mandatory_keys") {
		return dst, ErrBadKeys
	}
	return dst, nil
}

// search finds a keyword spec's keyword as Redis does, and returns the
// position after it, or 0. Like Redis it never looks at args[0], nor, when
// searching forwards, at the last argument, which could not be followed by
// a key.
func (ks *KeySpec) search(args [][]byte) int {
	argc := len(args)
	i, end := argc+ks.StartFrom, 1
	if ks.StartFrom > 0 {
		i, end = ks.StartFrom, argc-1
	}
	step := 1
	if i > end {
		step = -1
	}
	for ; i != end && i >= 1 && i < argc; i += step {
		if equalFoldC(args[i], ks.Keyword) {
			return i + 1
		}
	}
	return 0
}

// equalFoldC compares as C's strcasecmp, which Redis uses for keywords: an
// argument ends at its first NUL byte ("STREAMS\x00x" is STREAMS), and only
// ASCII letters fold.
func equalFoldC(arg []byte, s string) bool {
	arg = cString(arg, len(arg))
	if len(arg) != len(s) {
		return false
	}
	for i := range len(arg) {
		if lowerASCII(arg[i]) != lowerASCII(s[i]) {
			return false
		}
	}
	return true
}

// numKeys parses a number of keys as Redis's string2ll does (no sign, no
// leading zero, no space), refusing any number above argc, which cannot
// fit.
func numKeys(b []byte, argc int) (int, bool) {
	if len(b) == 1 && b[0] == '0' {
		return 0, true
	}
	if len(b) == 0 || b[0] < '1' || b[0] > '9' {
		return 0, false // empty, negative or a leading zero
	}
	n := 0
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, false
		}
		if n = n*10 + int(c-'0'); n > argc {
			return 0, false
		}
	}
	return n, true
}

// Lookup finds args' spec, the command by args[0], then, when it has
// subcommands and args[1] is present, the subcommand by args[1], both
// regardless of case. It checks arity as Redis does before anything else.
// Its errors are replies for the client: their text is Redis 7's error
// reply, word for word. A wrong arity comes with the spec it is wrong
// for.
//
// Lookup does not allocate when it finds a spec.
func Lookup(specs map[string]*Spec, args [][]byte) (*Spec, error) {
	if len(args) == 0 {
		return nil, unknownCommand(args)
	}
	var buf [32]byte
	s := specs[string(lower(buf[:0], args[0]))]
	// Redis's table of commands holds no subcommands: "config|get" is no
	// name a client can send.
	if s == nil || strings.Contains(s.Name, "|") {
		return nil, unknownCommand(args)
	}
	if s.Subcommands != nil && len(args) > 1 {
		sub := s.Subcommands[string(lower(buf[:0], args[1]))]
		if sub == nil {
			return nil, unknownSubcommand(args)
		}
		s = sub
	}
	if s.Arity > 0 && len(args) != s.Arity || len(args) < -s.Arity {
		return s, errors.New("ERR wrong number of arguments for '" + s.Name + "' command")
	}
	return s, nil
}

// unknownCommand is Redis 7's reply to an unknown command: the name, then
// the arguments, each cut at its first NUL as C's printf cuts it, quoted
// and followed by a space, until the arguments take up 128 bytes.
func unknownCommand(args [][]byte) error {
	b := []byte("ERR unknown command '")
	if len(args) > 0 {
		b = append(b, cString(args[0], 128)...)
		args = args[1:]
	}
	b = append(b, "', with args beginning with: "...)
	n := 0 // bytes of the arguments so far
	for _, a := range args {
		if n >= 128 {
			break
		}
		a = cString(a, 128-n)
		b = append(b, '\'')
		b = append(b, a...)
		b = append(b, "' "...)
		n += len(a) + 3
	}
	return replyError(b)
}

// unknownSubcommand is Redis 7's reply to a container command's unknown
// subcommand.
func unknownSubcommand(args [][]byte) error {
	b := []byte("ERR unknown subcommand '")
	b = append(b, cString(args[1], 128)...)
	b = append(b, "'. Try "...)
	for _, c := range cString(args[0], len(args[0])) {
		if 'a' <= c && c <= 'z' {
			c -= 'a' - 'A'
		}
		b = append(b, c)
	}
	b = append(b, " HELP."...)
	return replyError(b)
}

// replyError makes b an error reply, blanking CR and LF as Redis does so
// that the reply stays one line.
func replyError(b []byte) error {
	for i, c := range b {
		if c == '\r' || c == '\n' {
			b[i] = ' '
		}
	}
	return errors.New(string(b))
}

// cString is b as C's printf("%.*s", max, b) prints it.
func cString(b []byte, max int) []byte {
	for i, c := range b {
		if c == 0 || i == max {
			return b[:i]
		}
	}
	return b
}

func lowerASCII(c byte) byte {
	if 'A' <= c && c <= 'Z' {
		return c + 'a' - 'A'
	}
	return c
}

// lower appends b in lower case to dst: on the stack for any name as short
// as Redis's.
func lower(dst, b []byte) []byte {
	for _, c := range b {
		dst = append(dst, lowerASCII(c))
	}
	return dst
}
