package proxy

import (
	"slices"
	"strings"
	"testing"
)

// FuzzParseUsers checks that an ACL file (--aclfile) never makes
// ParseUsers panic, and that what it loads ACL LIST shows as lines that
// load again as the same users: listed the same, deciding every command,
// key and channel the same.
func FuzzParseUsers(f *testing.F) {
	for _, seed := range [][2]string{
		{"user alice on >x ~rate:* +throttle +@read", ""},
		{"user default on nopass ~* &* +@all -flushall -debug|segfault", ""},
		{"# a comment\n\nuser bob off #" + strings.Repeat("aB", 32) + " resetkeys ~a ~b* allchannels", "secret"},
		{"user ops on >p +@ALL -@Dangerous +config|get +select|0 reset on nopass allkeys", ""},
		{"user ro on >ro ~k* +throttle\nuser w on resetpass >a >b nocommands +set resetchannels &news.* &c", "pw"},
		{"user x on +@all -@all +get allcommands -get &* resetchannels &y", ""},
		{"user alice on &* &chan:*", ""},
		{"user alice on %R~rate:* +@jsn", ""},
	} {
		f.Add(seed[0], seed[1])
	}
	f.Fuzz(func(t *testing.T, text, requirepass string) {
		us, err := ParseUsers(text, requirepass)
		if err != nil {
			return
		}
		var lines []string
		for _, n := range us.order {
			lines = append(lines, us.byName[n].line())
		}
		again, err := ParseUsers(strings.Join(lines, "\n"), "")
		if err != nil {
			t.Fatalf("%q: ACL LIST %q does not load again: %v", text, lines, err)
		}
		if !slices.Equal(us.order, again.order) {
			t.Fatalf("%q: users %q, loaded again from ACL LIST %q", text, us.order, again.order)
		}
		for i, n := range us.order {
			u, v := us.byName[n], again.byName[n]
			if l := v.line(); l != lines[i] {
				t.Fatalf("%q: ACL LIST %q, loaded again %q", text, lines[i], l)
			}
			if u.all != v.all {
				t.Fatalf("%q: user %q: unchecked %v, loaded again %v", text, n, u.all, v.all)
			}
			// Commands, categories and first arguments the rules name, and
			// the keys and channels the patterns name.
			var names, cats, probes []string
			for _, r := range u.rules {
				names = append(names, r.name)
				if r.category != "" {
					cats = append(cats, r.category)
				}
				cmd, arg, _ := strings.Cut(r.name, "|")
				names = append(names, cmd)
				probes = append(probes, arg)
			}
			names = few(append(names, "get", "throttle", "config|get"))
			catSets := [][]string{nil}
			for _, c := range few(cats) {
				catSets = append(catSets, []string{c})
			}
			for _, name := range names {
				for _, c := range catSets {
					for _, first := range few(append(probes, "")) {
						if u.permits(name, c, []byte(first)) != v.permits(name, c, []byte(first)) {
							t.Fatalf("%q: user %q: %s (%q, first %q) decided otherwise once loaded again from %q",
								text, n, name, c, first, lines[i])
						}
					}
				}
			}
			for _, p := range few(append(append(slices.Clone(u.keys), u.channels...), "", "k", "news.x")) {
				if u.mayUse([]byte(p)) != v.mayUse([]byte(p)) ||
					u.mayUseChannel([]byte(p), false) != v.mayUseChannel([]byte(p), false) ||
					u.mayUseChannel([]byte(p), true) != v.mayUseChannel([]byte(p), true) {
					t.Fatalf("%q: user %q: key or channel %q decided otherwise once loaded again from %q", text, n, p, lines[i])
				}
			}
		}
	})
}

// few is ss without repeats, at most 16 of them, so that a long line
// stays quick to check.
func few(ss []string) []string {
	ss = slices.Compact(slices.Sorted(slices.Values(ss)))
	return ss[:min(len(ss), 16)]
}

// An ACL file's line is split as Redis splits it (checked against
// redis-server 7.0's --aclfile): at spaces only, each part trimmed of tabs
// and line ends. A Unicode space or a tab inside a password is the
// password's, not the end of a shorter password followed by a rule.
func TestACLFileSplitsAsRedis(t *testing.T) {
	for _, tt := range []struct {
		text      string
		pass, not string
		allKeys   bool
		refused   bool
	}{
		{text: "user a on >secret\u00a0on ~* +@all", pass: "secret\u00a0on", not: "secret", allKeys: true},
		{text: "user a on >secret\u0085on", pass: "secret\u0085on", not: "secret"},
		{text: "user a on >p\tq ~* +@all", pass: "p\tq", not: "p", allKeys: true},
		{text: "user a on >x\v~*", pass: "x\v~*", not: "x"},
		{text: "user a on >x\t ~* +@all\r", pass: "x", allKeys: true},
		{text: "\tuser a  on \t>x", pass: "x"},
		{text: "user\ta on nopass", refused: true},
		{text: "user a\tb on nopass", refused: true},
	} {
		us, err := ParseUsers(tt.text, "")
		if tt.refused {
			if err == nil {
				t.Errorf("%q: loaded, want refused as Redis refuses it", tt.text)
			}
			continue
		}
		if err != nil {
			t.Errorf("%q: %v", tt.text, err)
			continue
		}
		if us.authenticate([]byte("a"), []byte(tt.pass)) == nil {
			t.Errorf("%q: password %q refused", tt.text, tt.pass)
		}
		if tt.not != "" && us.authenticate([]byte("a"), []byte(tt.not)) != nil {
			t.Errorf("%q: password %q accepted", tt.text, tt.not)
		}
		if u := us.byName["a"]; u.allKeys != tt.allKeys {
			t.Errorf("%q: all keys %v, want %v", tt.text, u.allKeys, tt.allKeys)
		}
	}
}
