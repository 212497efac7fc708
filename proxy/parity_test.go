package proxy_test

import (
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sluice-rl/sluice/proxy"
	"github.com/sluice-rl/sluice/router"
	"github.com/sluice-rl/sluice/router/clustertest"
)

// parityOp is one command of a parity sequence and how its two replies
// must agree.
type parityOp struct {
	args []string
	// exact: the whole reply must be the same bytes (errors, a fresh
	// bucket's first take, THROTTLE.RESET); otherwise a five-integer
	// reply must agree on limited, capacity and remaining, and on its two
	// times within what the test's elapsed time can explain, in units of
	// unit µs (1000: ms, 1e6: s).
	exact bool
	unit  int64
}

// A slow limit refills nothing while the test runs: every token interval
// used on a shared key is a multiple of 1d/168 (514 s), so remaining never
// depends on when a call came, only the two times do.
var (
	paritySlowThrottle = [][3]string{
		{"1", "1", "1d"}, {"5", "1", "1d"}, {"5", "1", "86400"}, {"5", "1", "24h"},
		{"5", "1", "1440m"}, {"5", "1", "1440M"}, {"5", "1", "86400000ms"},
		{"5", "1", "86400.000s"}, {"5", "1", "1.0D"}, {"5", "2", "1d"}, {"10", "3", "1d"},
		{"10", "7", "1d"}, {"3", "2", "2d"}, {"100", "24", "1d"}, {"12", "12", "0.5d"},
		{"26062", "1", "1d"}, // the range's edge: C*U <= 2^51
		{"1000", "1", "1.5d"}, {"7", "1", "7d"}, {"2", "5", "5d"}, {"1000000", "1", "1d"},
	}
	// GCRA limits whose emission interval is a whole number of µs, so that
	// they are THROTTLE limits exactly and mix with them on a key.
	paritySlowGCRA = [][3]string{
		{"4", "1", "86400"}, {"9", "24", "86400"}, {"2", "3", "86400"}, {"4", "1", "8.64e4"},
		{"0", "1", "86400"}, {"6", "1", "604800"}, {"4", "2", "172800.0"}, {"4", "1", "86400.0000001e0"},
	}
	paritySlowCell = [][3]string{
		{"4", "1", "86400"}, {"0", "1", "86400"}, {"9", "3", "86400"}, {"2", "1", "172800"},
		{"23", "24", "86400"}, {"+4", "1", "86400"}, {"004", "01", "86400"},
	}
	// Fast limits: only a fresh bucket's first calls are the same on both
	// sides, at any instant.
	parityFastThrottle = [][3]string{
		{"5", "3", "1s"}, {"1000000", "1000000", "1s"}, {"5", "7777", "1s"}, {"1", "1", "1ms"},
		{"2199023255552", "1000", "1s"}, {"3", "1", "1.5s"}, {"10", "3333", "1S"}, {"100", "1", "0.001s"},
		{"7", "2048", "1"}, {"50", "1", "1m"},
	}
	parityFastGCRA = [][3]string{
		{"4", "7777", "1"}, {"0", "1", "0.001"}, {"9", "1", "1e-7"}, {"4", "3", "1"}, {"5", "10", "60"},
		{"2", "7", "86400"},
	}
	parityFastCell = [][3]string{{"15", "30", "60"}, {"4", "3", "1"}, {"0", "7", "1"}}
	// Arguments that every backend must refuse alike.
	parityErrors = [][]string{
		{"THROTTLE"}, {"THROTTLE", "k"}, {"THROTTLE", "k", "5", "1", "1d", "1", "x"},
		{"THROTTLE", "k", "0", "1", "1d"}, {"THROTTLE", "k", "-1", "1", "1d"}, {"THROTTLE", "k", "x", "1", "1d"},
		{"THROTTLE", "k", "5.0", "1", "1d"}, {"THROTTLE", "k", "+5", "1", "1d"}, {"THROTTLE", "k", " 5", "1", "1d"},
		{"THROTTLE", "k", "9223372036854775808", "1", "1d"}, {"THROTTLE", "k", "5", "0", "1d"},
		{"THROTTLE", "k", "5", "-3", "1d"}, {"THROTTLE", "k", "5", "1", "0"}, {"THROTTLE", "k", "5", "1", "0.5ms"},
		{"THROTTLE", "k", "5", "1", "999us"}, {"THROTTLE", "k", "5", "1", "1.0000001s"}, {"THROTTLE", "k", "5", "1", ""},
		{"THROTTLE", "k", "5", "1", "-1"}, {"THROTTLE", "k", "5", "1", "1x"}, {"THROTTLE", "k", "5", "1", "1 d"},
		{"THROTTLE", "k", "5", "1", "1ds"}, {"THROTTLE", "k", "5", "1", "1e3"}, {"THROTTLE", "k", "5", "1", "1."},
		{"THROTTLE", "k", "5", "1", ".5s"}, {"THROTTLE", "k", "5", "1", "1d", "-1"}, {"THROTTLE", "k", "5", "1", "1d", "x"},
		{"THROTTLE", "k", "5", "1", "1d", "1.5"}, {"THROTTLE", "k", "26063", "1", "1d"},
		{"THROTTLE", "k", "2251799813685248", "1", "1ms"}, {"THROTTLE", "k", "1", "1099511627777", "1d"},
		{"THROTTLE", "k", "POLICY"}, {"THROTTLE", "k", "POLICY", "nope"}, {"THROTTLE", "k", "policy", "daily", "-1"},
		{"THROTTLE", "nomatch"}, {"THROTTLE", "nomatch", "1"}, {"THROTTLE", "k", "POLICY", "daily", "1", "2"},
		{"CL.THROTTLE"}, {"CL.THROTTLE", "k", "1", "1"}, {"CL.THROTTLE", "k", "-1", "1", "60"},
		{"CL.THROTTLE", "k", "1", "0", "60"}, {"CL.THROTTLE", "k", "1", "1", "0"}, {"CL.THROTTLE", "k", "1", "1", "60", "-1"},
		{"CL.THROTTLE", "k", "9223372036854775807", "1", "60"}, {"CL.THROTTLE", "k", "1", "1", "1.5"},
		{"CL.THROTTLE", "k", "1", "1", "60", "1", "1"}, {"CL.THROTTLE", "k", "x", "1", "60"},
		{"CL.THROTTLE", "k", "1", "1", "9223372036854"},
		{"GCRA"}, {"GCRA", "k", "1", "1"}, {"GCRA", "k", "1", "1", "0"}, {"GCRA", "k", "1", "1", "-1"},
		{"GCRA", "k", "1", "1", "1e12"}, {"GCRA", "k", "1", "1", "inf"}, {"GCRA", "k", "1", "1", "nan"},
		{"GCRA", "k", "1", "0", "60"}, {"GCRA", "k", "-1", "1", "60"}, {"GCRA", "k", "1", "1", "60", "TOKENS", "0"},
		{"GCRA", "k", "1", "1", "60", "TOKENS", "x"}, {"GCRA", "k", "1", "1", "60", "FOO", "1"},
		{"GCRA", "k", "1", "1", "60", "TOKENS"}, {"GCRA", "k", "x", "1", "60"}, {"GCRA", "k", "1", "1", "x"},
		{"GCRA", "k", "9223372036854775807", "1", "60"}, {"GCRA", "k", "1000000000000", "1", "999999999999"},
		{"THROTTLE.RESET"}, {"THROTTLE.RESET", "a", "b"},
	}
)

// parityGen makes random sequences of bucket commands under prefix.
type parityGen struct {
	rng    *rand.Rand
	prefix string
	raw    string // the prefix of keys of odd bytes
	fresh  int
}

func (g *parityGen) cost(c int64) string {
	switch g.rng.IntN(10) {
	case 0:
		return "0"
	case 1:
		return strconv.FormatInt(c, 10)
	case 2:
		return strconv.FormatInt(c+1, 10)
	case 3:
		return strconv.FormatInt(max(c-1, 0), 10)
	case 4:
		return "1000000000000"
	case 5:
		return strconv.Itoa(g.rng.IntN(4))
	}
	return "1"
}

// paritySpecialKeys are keys of odd bytes, taken as they are by both.
var paritySpecialKeys = []string{"", "{", "{}", "{x}a", "{x}b", "\x00\xff\r\n", "=", "~1:2:3:", strings.Repeat("k", 5000)}

func (g *parityGen) slowKey() string {
	switch g.rng.IntN(8) {
	case 0, 1:
		return g.prefix + "pd:" + strconv.Itoa(g.rng.IntN(3)) // matches the rule of policy daily
	case 2:
		// Without the prefix, but for a run's own one: the runs share
		// their backends.
		return g.raw + paritySpecialKeys[g.rng.IntN(len(paritySpecialKeys))]
	}
	return g.prefix + "s:" + strconv.Itoa(g.rng.IntN(6))
}

func (g *parityGen) freshKey() string {
	g.fresh++
	return g.prefix + "f:" + strconv.Itoa(g.fresh)
}

func (g *parityGen) next() []parityOp {
	r := g.rng
	switch n := r.IntN(100); {
	case n < 30: // THROTTLE, a slow limit
		l := paritySlowThrottle[r.IntN(len(paritySlowThrottle))]
		c, _ := strconv.ParseInt(l[0], 10, 64)
		args := []string{"THROTTLE", g.slowKey(), l[0], l[1], l[2]}
		if r.IntN(3) > 0 {
			args = append(args, g.cost(c))
		}
		return []parityOp{{args: args, unit: 1000}}
	case n < 38: // the policy forms, on slow keys
		key := g.slowKey()
		args := []string{"THROTTLE", key, []string{"POLICY", "policy", "Policy"}[r.IntN(3)], []string{"daily", "shadowed"}[r.IntN(2)]}
		if strings.Contains(key, ":pd:") && r.IntN(2) == 0 {
			args = []string{"THROTTLE", key}
		}
		if r.IntN(2) == 0 {
			args = append(args, g.cost(5))
		}
		return []parityOp{{args: args, unit: 1000}}
	case n < 48:
		l := paritySlowCell[r.IntN(len(paritySlowCell))]
		b, _ := strconv.ParseInt(l[0], 10, 64)
		args := []string{"CL.THROTTLE", g.slowKey(), l[0], l[1], l[2]}
		if r.IntN(2) == 0 {
			args = append(args, g.cost(b+1))
		}
		return []parityOp{{args: args, unit: 1e6}}
	case n < 58:
		l := paritySlowGCRA[r.IntN(len(paritySlowGCRA))]
		b, _ := strconv.ParseInt(l[0], 10, 64)
		args := []string{"GCRA", g.slowKey(), l[0], l[1], l[2]}
		if r.IntN(2) == 0 {
			args = append(args, []string{"TOKENS", "tokens"}[r.IntN(2)], strconv.FormatInt(max(1, b+1+int64(r.IntN(3))-1), 10))
		}
		return []parityOp{{args: args, unit: 1e6}}
	case n < 62: // GCRA with 7 per day: E is 86400e6/7 rounded, on keys of its own
		args := []string{"GCRA", g.prefix + "g7:" + strconv.Itoa(r.IntN(2)), "4", "7", "86400"}
		if r.IntN(2) == 0 {
			args = append(args, "TOKENS", strconv.Itoa(1+r.IntN(6)))
		}
		return []parityOp{{args: args, unit: 1e6}}
	case n < 70:
		return []parityOp{{args: []string{"THROTTLE.RESET", g.slowKey()}, exact: true}}
	case n < 85: // a fresh bucket: a peek or two, then one take
		key := g.freshKey()
		var ops []parityOp
		switch r.IntN(4) {
		case 0, 1:
			l := parityFastThrottle[r.IntN(len(parityFastThrottle))]
			if r.IntN(3) == 0 {
				l = [3]string{"", "", ""}
			}
			c, _ := strconv.ParseInt(l[0], 10, 64)
			for range r.IntN(3) {
				ops = append(ops, g.fastThrottle(key, l, "0"))
			}
			ops = append(ops, g.fastThrottle(key, l, g.cost(c)))
		case 2:
			l := parityFastCell[r.IntN(len(parityFastCell))]
			b, _ := strconv.ParseInt(l[0], 10, 64)
			for range r.IntN(3) {
				ops = append(ops, parityOp{args: []string{"CL.THROTTLE", key, l[0], l[1], l[2], "0"}, exact: true})
			}
			ops = append(ops, parityOp{args: []string{"CL.THROTTLE", key, l[0], l[1], l[2], g.cost(b + 1)}, exact: true})
		default:
			l := parityFastGCRA[r.IntN(len(parityFastGCRA))]
			b, _ := strconv.ParseInt(l[0], 10, 64)
			args := []string{"GCRA", key, l[0], l[1], l[2]}
			if r.IntN(2) == 0 {
				args = append(args, "TOKENS", strconv.FormatInt(max(1, b+int64(r.IntN(3))), 10))
			}
			ops = append(ops, parityOp{args: args, exact: true})
		}
		if r.IntN(4) == 0 {
			ops = append(ops, parityOp{args: []string{"THROTTLE.RESET", g.freshKey()}, exact: true})
		}
		return ops
	}
	e := parityErrors[r.IntN(len(parityErrors))]
	args := append([]string(nil), e...)
	if len(args) > 1 {
		args[1] = g.prefix + args[1]
	}
	if r.IntN(5) == 0 && len(args) > 2 { // garbage in a number
		i := 2 + r.IntN(len(args)-2)
		b := make([]byte, 1+r.IntN(4))
		for j := range b {
			b[j] = byte(r.IntN(256))
		}
		args[i] = string(b)
	}
	return []parityOp{{args: args, exact: true}}
}

// fastThrottle is THROTTLE on key with l, or with the policy fast when l
// is empty.
func (g *parityGen) fastThrottle(key string, l [3]string, cost string) parityOp {
	if l[0] == "" {
		return parityOp{args: []string{"THROTTLE", key, "POLICY", "fast", cost}, exact: true}
	}
	return parityOp{args: []string{"THROTTLE", key, l[0], l[1], l[2], cost}, exact: true}
}

// parityReply is a five-integer reply's values, or nil for any other.
func parityReply(s string) []int64 {
	lines := strings.Split(s, "\r\n")
	if len(lines) != 7 || lines[0] != "*5" || lines[6] != "" {
		return nil
	}
	v := make([]int64, 5)
	for i := range v {
		n, err := strconv.ParseInt(strings.TrimPrefix(lines[i+1], ":"), 10, 64)
		if err != nil || !strings.HasPrefix(lines[i+1], ":") {
			return nil
		}
		v[i] = n
	}
	return v
}

// parityCompare reports how a, the embedded backend's reply to op, and b,
// the cluster's, disagree, or "".
func parityCompare(op parityOp, a, b string, elapsed time.Duration) string {
	if a == b {
		return ""
	}
	va, vb := parityReply(a), parityReply(b)
	if op.exact || va == nil || vb == nil {
		return "differ"
	}
	for i := range 3 {
		if va[i] != vb[i] {
			return []string{"limited", "capacity", "remaining"}[i] + " differ"
		}
	}
	tol := elapsed.Microseconds()/op.unit + 2
	for i := 3; i < 5; i++ {
		if (va[i] == -1) != (vb[i] == -1) || (va[i] == 0) != (vb[i] == 0) || max(va[i]-vb[i], vb[i]-va[i]) > tol {
			return fmt.Sprintf("%s differ by more than %d", []string{"retry_after", "reset_after"}[i-3], tol)
		}
	}
	return ""
}

func parityPolicies(t *testing.T) *proxy.Policies {
	t.Helper()
	p, err := proxy.NewPolicies([]proxy.Policy{
		{Name: "daily", Capacity: 5, Refill: 1, Period: "1d"},
		{Name: "fast", Capacity: 10, Refill: 7777, Period: "1s"},
		{Name: "shadowed", Capacity: 2, Refill: 1, Period: "12h", Shadow: true},
	}, []proxy.KeyRule{{Pattern: "*:pd:*", Policy: "daily"}, {Pattern: "*:f:*", Policy: "fast"}})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// The embedded backend and the cluster answer the same random sequences
// of THROTTLE (inline and by policy), CL.THROTTLE, GCRA and
// THROTTLE.RESET alike, each on both serving paths and in RESP2 and RESP3:
// slow limits mixed on shared keys (limited, capacity and remaining
// exactly; the times within the test's elapsed time, as the two clocks
// differ), fresh buckets of fast and odd limits exactly, and every refusal
// of bad arguments byte for byte. PARITY_SEED replays a sequence.
func TestParityEmbeddedCluster(t *testing.T) {
	c := clustertest.New(t, clustertest.Config{Replicas: -1})
	pol := parityPolicies(t)
	mem, clu := router.NewMemory(0), newRouter(t, c)
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv("PARITY_SEED"); s != "" {
		seed, _ = strconv.ParseUint(s, 10, 64)
	}
	t.Logf("PARITY_SEED=%d", seed)
	for i, run := range []struct {
		name               string
		embLoops, cluLoops int
		hello, raw         string
	}{
		{"resp2", 0, -1, "2", ""},
		{"resp3", -1, 0, "3", "3"},
	} {
		t.Run(run.name, func(t *testing.T) {
			emb := dialRaw(t, serveConfig(t, proxy.Config{Decider: mem, Loops: run.embLoops, Policies: pol}))
			cl := dialRaw(t, serveConfig(t, proxy.Config{Decider: clu, Loops: run.cluLoops, Policies: pol}))
			emb.do("HELLO", run.hello)
			cl.do("HELLO", run.hello)
			g := &parityGen{rng: rand.New(rand.NewPCG(seed, uint64(i))), prefix: fmt.Sprintf("%d:%s:", seed, run.name), raw: run.raw}
			// The README's examples, and its range's edges, on new keys.
			for _, ex := range []struct{ args, want []string }{
				{[]string{"THROTTLE", "user:1", "5", "1", "1s"}, []string{"0", "5", "4", "-1", "1000"}},
				{[]string{"CL.THROTTLE", "user123", "15", "30", "60"}, []string{"0", "16", "15", "-1", "2"}},
				{[]string{"GCRA", "api:user:123", "5", "10", "60"}, []string{"0", "6", "5", "-1", "6"}},
				{[]string{"THROTTLE", "edge", "2251799813685248", "1000", "1ms", "2251799813685248"}, []string{"0", "2251799813685248", "0", "-1", "2251799813686"}},
				{[]string{"THROTTLE", "edge2", "2251799813685249", "1000", "1ms"}, nil},
				{[]string{"THROTTLE", "big", "1000000", "1000000", "1s", "1000000"}, []string{"0", "1000000", "0", "-1", "1000"}},
				{[]string{"THROTTLE", "day", "1", "1", "1d"}, []string{"0", "1", "0", "-1", "86400000"}},
				{[]string{"THROTTLE", "third", "3", "3", "1s", "3"}, []string{"0", "3", "0", "-1", "1000"}},
			} {
				ex.args[1] = g.prefix + ex.args[1]
				want := "-ERR capacity, refill and period out of range: the bucket cannot be computed exactly\r\n"
				if ex.want != nil {
					want = "*5\r\n:" + strings.Join(ex.want, "\r\n:") + "\r\n"
				}
				for _, conn := range []*rawConn{emb, cl} {
					if got := conn.do(ex.args...); got != want {
						t.Errorf("%q: %q, want %q", ex.args, got, want)
					}
				}
			}
			start := time.Now()
			kinds := map[string]int{}
			defer func() { t.Logf("replies: %v", kinds) }()
			for n := 0; n < 600; {
				// Half the ops one at a time, half in pipelines of up
				// to 24: the cluster then sends a shard's buckets in one
				// script call, a limit repeated as "=".
				var ops []parityOp
				for want := 1 + (n/300)*g.rng.IntN(24); len(ops) < want; {
					ops = append(ops, g.next()...)
				}
				n += len(ops)
				cmds := make([][]string, len(ops))
				for i, op := range ops {
					cmds[i] = op.args
				}
				emb.send(cmds...)
				cl.send(cmds...)
				for _, op := range ops {
					a, b := emb.read(), cl.read()
					kinds[parityKind(a)]++
					if d := parityCompare(op, a, b, time.Since(start)); d != "" {
						t.Errorf("%q: %s: embedded %q, cluster %q", op.args, d, a, b)
					}
				}
			}
		})
	}
}

// parityKind names a reply's kind, to show what a sequence covered.
func parityKind(s string) string {
	if v := parityReply(s); v != nil {
		if v[0] == 0 {
			return "allowed"
		}
		return "limited"
	}
	if strings.HasPrefix(s, "-") {
		return "error"
	}
	return s
}

// A bucket overwritten through passthrough with a value shaped like a
// split marker that sluice cannot read (no split name or tags, a tag
// that is no tag) is answered WRONGTYPE, as any other foreign value is,
// on both serving paths: it is the caller's key's error, not its shard's
// failure, which would send every key of the shard to the fallback.
func TestParityForgedMarkerIsWrongType(t *testing.T) {
	c := clustertest.New(t, clustertest.Config{Replicas: -1})
	eachIOConfig(t, proxy.Config{}, func(t *testing.T, cfg proxy.Config) {
		r := newForwarding(t, c)
		cfg.Decider, cfg.Forwarder = r, r
		conn := dialRaw(t, serveConfig(t, cfg))
		for i, v := range []string{"~1:9999999999999:3:", "~1:9999999999999:0:g:a,,b", "~1:9999999999999:0:g:{a}"} {
			key := fmt.Sprintf("{%s}forged%d", t.Name(), i)
			if got := conn.do("SET", router.KeyPrefix+key, v); got != "+OK\r\n" {
				t.Fatalf("SET: %q", got)
			}
			for _, cmd := range [][]string{
				{"THROTTLE", key, "5", "1", "1d"},
				{"CL.THROTTLE", key, "4", "1", "86400"},
				{"GCRA", key, "4", "1", "86400"},
			} {
				if got := conn.do(cmd...); got != "-WRONGTYPE key holds a value that is not a sluice bucket\r\n" {
					t.Errorf("%q on %q: %q, want WRONGTYPE", cmd, v, got)
				}
			}
			// A bucket of the same shard is still the cluster's.
			other := fmt.Sprintf("{%s}other%d", t.Name(), i)
			if got := conn.do("THROTTLE", other, "5", "1", "1d"); got != "*5\r\n:0\r\n:5\r\n:4\r\n:-1\r\n:86400000\r\n" {
				t.Errorf("a bucket beside it: %q", got)
			}
		}
		st := r.Stats()
		if local := st.Cluster.Decisions[router.SourceLocal]; local != 0 {
			t.Errorf("%d decisions by the local fallback, want none", local)
		}
		for _, s := range st.Cluster.Shards {
			if !s.Healthy {
				t.Errorf("shard %s unhealthy: %s", s.Addr, s.LastError)
			}
		}
	})
}
