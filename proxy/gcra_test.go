package proxy_test

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"math"
	"net"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluice-rl/sluice/proxy"
	"github.com/sluice-rl/sluice/router"
	"github.com/sluice-rl/sluice/router/bucket"
	"github.com/sluice-rl/sluice/router/bucket/buckettest"
	"github.com/sluice-rl/sluice/router/clustertest"
)

// The expected values in this file are worked out by hand from Redis's
// gcraCommand (src/gcra.c): E = (long long)(period*1e6/tokens_per_period
// + 0.5) µs, C = max_burst+1, variance = E*C, increment = E*count; allowed
// iff now >= max(now, tat) + increment - variance; ttl = new_tat-now when
// allowed, tat-now when not; remaining = (variance-ttl)/E (0 below);
// retry_after = ceil((max(now, tat)+increment-variance-now)/1e6 s), -1
// when allowed or increment > variance; reset_after = ceil(ttl/1e6 s).

// requestRecorder is a Decider that keeps every request it is given.
type requestRecorder struct {
	mu    sync.Mutex // guards reqs
	reqs  []router.Request
	inner proxy.Decider
}

func (r *requestRecorder) Submit(ctx context.Context, reqs []router.Request, res []router.Result, done func([]int)) {
	r.mu.Lock()
	r.reqs = append(r.reqs, reqs...)
	r.mu.Unlock()
	r.inner.Submit(ctx, reqs, res, done)
}

// took returns the requests recorded since the last call.
func (r *requestRecorder) took() []router.Request {
	r.mu.Lock()
	defer r.mu.Unlock()
	reqs := r.reqs
	r.reqs = nil
	return reqs
}

// unlimited answers every request as allowed, storing nothing, so that a
// fuzzer's many keys cost no memory.
type unlimited struct{}

func (unlimited) Submit(_ context.Context, _ []router.Request, res []router.Result, done func([]int)) {
	for i := range res {
		res[i] = router.Result{Result: bucket.Result{RetryAfter: -1}}
	}
	done(nil)
}

// clockedBuckets is the embedded backend's arithmetic on a clock the test
// sets, for known answers at exact instants. Redis reads its clock to the
// ms, so the instants used are whole ms.
type clockedBuckets struct {
	mu   sync.Mutex // guards now and tats
	now  int64      // µs since the epoch
	tats map[string]int64
}

func (c *clockedBuckets) Submit(_ context.Context, reqs []router.Request, res []router.Result, done func([]int)) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for i, r := range reqs {
		br, store := bucket.Take(c.tats[r.Key], c.now, r.Interval, r.Cost)
		if store != 0 {
			c.tats[r.Key] = store
		}
		res[i] = router.Result{Result: br}
	}
	done(nil)
}

func (c *clockedBuckets) at(ms int64) {
	c.mu.Lock()
	c.now = buckettest.Start + ms*1000
	c.mu.Unlock()
}

// roundTrip sends args on conn and reads one reply.
func roundTrip(t testing.TB, conn net.Conn, r *bufio.Reader, args ...string) any {
	t.Helper()
	conn.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := io.WriteString(conn, encode(args...)); err != nil {
		t.Fatal(err)
	}
	v, err := readReply(r)
	if err != nil {
		t.Fatalf("%q: %v", args, err)
	}
	return v
}

func TestParseGCRA(t *testing.T) {
	rec := &requestRecorder{inner: unlimited{}}
	conn, r := raw(t, serve(t, rec))
	valid := []struct {
		line    []string
		c, u, n int64 // capacity, emission interval in µs, cost
	}{
		{[]string{"k", "5", "10", "60"}, 6, 6_000_000, 1},
		{[]string{"k", "0", "1", "1"}, 1, 1_000_000, 1},
		{[]string{"k", "5", "10", "60", "TOKENS", "3"}, 6, 6_000_000, 3},
		{[]string{"k", "5", "10", "60", "tokens", "6"}, 6, 6_000_000, 6},
		{[]string{"k", "5", "10", "60", "ToKeNs", "7"}, 6, 6_000_000, 7},
		// strcasecmp compares C strings: the keyword ends at a NUL.
		{[]string{"k", "5", "10", "60", "tokens\x00x", "2"}, 6, 6_000_000, 2},
		// 333333.33 + 0.5 truncates to 333333; 1500000 + 0.5 to 1500000;
		// 1666666.67 + 0.5 to 1666667; 2.5 + 0.5 is 3; 0.125 + 0.5 is 0,
		// raised to 1.
		{[]string{"k", "2", "3", "1"}, 3, 333_333, 1},
		{[]string{"k", "1", "2", "3"}, 2, 1_500_000, 1},
		{[]string{"k", "1", "3", "5"}, 2, 1_666_667, 1},
		{[]string{"k", "999999", "400000", "1"}, 1_000_000, 3, 1},
		{[]string{"k", "0", "4000000", "0.5"}, 1, 1, 1},
		// Periods in fast_float's syntax, leading '+' allowed.
		{[]string{"k", "0", "1", "+2"}, 1, 2_000_000, 1},
		{[]string{"k", "0", "1", "1e1"}, 1, 10_000_000, 1},
		{[]string{"k", "0", "1", "1E-1"}, 1, 100_000, 1},
		{[]string{"k", "0", "1", ".5"}, 1, 500_000, 1},
		{[]string{"k", "0", "1", "5."}, 1, 5_000_000, 1},
		{[]string{"k", "0", "1", "0.25"}, 1, 250_000, 1},
		{[]string{"k", "0", "3", "0.3"}, 1, 100_000, 1},
		{[]string{"k", "0", "1", "007.50"}, 1, 7_500_000, 1},
		{[]string{"k", "0", "1", "0.0000000000000000000000000000015e30"}, 1, 1_500_000, 1},
		// (max_burst+1) x E just under 2^51 µs.
		{[]string{"k", "0", "1", "2251799813"}, 1, 2_251_799_813_000_000, 1},
		// Far above the bucket, far from Redis's 2^63 µs limit.
		{[]string{"k", "0", "1", "1", "TOKENS", "9000000000000"}, 1, 1_000_000, 9_000_000_000_000},
	}
	for _, tt := range valid {
		args := append([]string{"GCRA"}, tt.line...)
		got := roundTrip(t, conn, r, args...)
		reqs := rec.took()
		if len(reqs) != 1 {
			t.Errorf("%q: got reply %v and %d requests, want one", args, got, len(reqs))
			continue
		}
		want := bucket.Interval{Capacity: tt.c, U: tt.u, V: 1}
		if q := reqs[0]; q.Op != router.Take || q.Key != tt.line[0] || q.Interval != want || q.Cost != tt.n {
			t.Errorf("%q: got %+v, want key %q interval %+v cost %d", args, q, tt.line[0], want, tt.n)
		}
	}

	const maxLong = "9223372036854775807"
	invalid := []struct {
		line []string
		want string
	}{
		{[]string{"k", "1", "1"}, "ERR wrong number of arguments for 'gcra' command"},
		{[]string{"k", "1", "1", "1", "TOKENS", "1", "x"}, "ERR wrong number of arguments for 'gcra' command"},
		// max_burst: getPositiveLongFromObjectOrReply passes its one message
		// for every failure, a non-integer too.
		{[]string{"k", "-1", "1", "1"}, "ERR value is out of range, must be positive"},
		{[]string{"k", "x", "1", "1"}, "ERR value is out of range, must be positive"},
		{[]string{"k", "01", "1", "1"}, "ERR value is out of range, must be positive"},
		{[]string{"k", "-0", "1", "1"}, "ERR value is out of range, must be positive"},
		{[]string{"k", "+1", "1", "1"}, "ERR value is out of range, must be positive"},
		{[]string{"k", " 1", "1", "1"}, "ERR value is out of range, must be positive"},
		{[]string{"k", "", "1", "1"}, "ERR value is out of range, must be positive"},
		{[]string{"k", "9223372036854775808", "1", "1"}, "ERR value is out of range, must be positive"},
		{[]string{"k", "-1", "0", "0"}, "ERR value is out of range, must be positive"},
		{[]string{"k", "1", "0", "1"}, "ERR value is out of range, value must between 1 and 9223372036854775807"},
		{[]string{"k", "1", "-5", "1"}, "ERR value is out of range, value must between 1 and 9223372036854775807"},
		{[]string{"k", "1", "x", "1"}, "ERR value is not an integer or out of range"},
		{[]string{"k", "1", "1.0", "1"}, "ERR value is not an integer or out of range"},
		{[]string{"k", "1", "010", "1"}, "ERR value is not an integer or out of range"},
		{[]string{"k", "1", "9223372036854775808", "1"}, "ERR value is not an integer or out of range"},
		{[]string{"k", "1", "0", "x"}, "ERR value is out of range, value must between 1 and 9223372036854775807"},
		{[]string{"k", "1", "1", "x"}, "ERR value is not a valid float"},
		{[]string{"k", "1", "1", ""}, "ERR value is not a valid float"},
		{[]string{"k", "1", "1", "1e"}, "ERR value is not a valid float"},
		{[]string{"k", "1", "1", "1e+"}, "ERR value is not a valid float"},
		{[]string{"k", "1", "1", " 1"}, "ERR value is not a valid float"},
		{[]string{"k", "1", "1", "1 "}, "ERR value is not a valid float"},
		{[]string{"k", "1", "1", "1s"}, "ERR value is not a valid float"},
		{[]string{"k", "1", "1", "nan"}, "ERR value is not a valid float"},
		{[]string{"k", "1", "1", "1_0"}, "ERR value is not a valid float"},
		{[]string{"k", "1", "1", "--1"}, "ERR value is not a valid float"},
		{[]string{"k", "1", "1", "+-1"}, "ERR value is not a valid float"},
		{[]string{"k", "1", "1", "-+1"}, "ERR value is not a valid float"},
		{[]string{"k", "1", "1", "."}, "ERR value is not a valid float"},
		{[]string{"k", "1", "1", "infinit"}, "ERR value is not a valid float"},
		{[]string{"k", "1", "1", "1\x00"}, "ERR value is not a valid float"},
		{[]string{"k", "1", "1", "0"}, "ERR period must be > 0 and < 1e12"},
		{[]string{"k", "1", "1", "-0"}, "ERR period must be > 0 and < 1e12"},
		{[]string{"k", "1", "1", "-1"}, "ERR period must be > 0 and < 1e12"},
		{[]string{"k", "1", "1", "1e12"}, "ERR period must be > 0 and < 1e12"},
		{[]string{"k", "1", "1", "inf"}, "ERR period must be > 0 and < 1e12"},
		{[]string{"k", "1", "1", "+Infinity"}, "ERR period must be > 0 and < 1e12"},
		{[]string{"k", "1", "1", "0", "FOO"}, "ERR period must be > 0 and < 1e12"},
		{[]string{"k", "1", "1", "1", "TOKEN", "1"}, "ERR syntax error"},
		{[]string{"k", "1", "1", "1", "TOKENSX", "1"}, "ERR syntax error"},
		{[]string{"k", "1", "1", "1", "FOO"}, "ERR syntax error"},
		{[]string{"k", "1", "1", "1", "TOKENS"}, "ERR Missing TOKENS value"},
		{[]string{"k", "1", "1", "1", "TOKENS", "0"}, "ERR value is out of range, value must between 1 and 9223372036854775807"},
		{[]string{"k", "1", "1", "1", "TOKENS", "x"}, "ERR value is not an integer or out of range"},
		{[]string{"k", "1", "1", "1", "TOKENS", "+1"}, "ERR value is not an integer or out of range"},
		// E = 1e6 > LLONG_MAX/count, and > LLONG_MAX/(max_burst+1).
		{[]string{"k", "0", "1", "1", "TOKENS", maxLong}, "ERR GCRA limiting uses microsecond accuracy. Combination of period, tokens_per_period and TOKENS would cause an overflow"},
		{[]string{"k", "9223372036854775806", "1", "1"}, "ERR GCRA limiting uses microsecond accuracy. Combination of period, tokens_per_period and max_burst would cause an overflow"},
		// E = 1 passes both, but now + E*count passes 2^63-1.
		{[]string{"k", "0", "1", "0.000001", "TOKENS", maxLong}, "ERR GCRA limiting uses microsecond accuracy. Combination of period, tokens_per_period and TOKENS would cause an overflow"},
		{[]string{"k", "0", "1", "1", "TOKENS", "9223372036854"}, "ERR GCRA limiting uses microsecond accuracy. Combination of period, tokens_per_period and TOKENS would cause an overflow"},
		// Redis answers these; sluice's exact arithmetic stops at 2^51 µs.
		{[]string{"k", "0", "1", "2251799814"}, "ERR max_burst, tokens_per_period and period out of range: the bucket cannot be computed exactly"},
		{[]string{"k", "1", "1", "2251799813"}, "ERR max_burst, tokens_per_period and period out of range: the bucket cannot be computed exactly"},
		{[]string{"k", "0", "1", "999999999999.9"}, "ERR max_burst, tokens_per_period and period out of range: the bucket cannot be computed exactly"},
		{[]string{"k", "9223372036854775806", "1000000", "1"}, "ERR max_burst, tokens_per_period and period out of range: the bucket cannot be computed exactly"},
		{[]string{"k", maxLong, "1000000", "1"}, "ERR max_burst, tokens_per_period and period out of range: the bucket cannot be computed exactly"},
	}
	for _, tt := range invalid {
		args := append([]string{"GCRA"}, tt.line...)
		got := roundTrip(t, conn, r, args...)
		if e, ok := got.(respError); !ok || string(e) != tt.want {
			t.Errorf("%q: got %#v, want error %q", args, got, tt.want)
		}
		if reqs := rec.took(); len(reqs) != 0 {
			t.Errorf("%q: an error reached the decider: %+v", args, reqs)
		}
	}
}

func TestGCRACommandInfo(t *testing.T) {
	got := command(t, serve(t, router.NewMemory(0)), "COMMAND", "INFO", "gcra")
	// Its key spec is gcra.json's: RW ACCESS UPDATE, the key at index 1.
	want := "[[gcra -5 [write denyoom fast] 1 1 1 [@write @fast @rate_limit] [] " +
		"[[flags [RW access update] begin_search [type index spec [index 1]] find_keys [type range spec [lastkey 0 keystep 1 limit 0]]]] []]]"
	if s := fmt.Sprint(got); s != want {
		t.Fatalf("got %s, want %s", s, want)
	}
}

// GCRA at exact instants, on the embedded backend's arithmetic.
func TestGCRAKnownAnswers(t *testing.T) {
	clock := &clockedBuckets{tats: map[string]int64{}}
	conn, r := raw(t, serve(t, clock))
	for _, seq := range []struct {
		name  string
		steps []struct {
			ms   int64
			args []string
			want string
		}
	}{
		// C = 2, E = 1500000, variance 3e6.
		{"1 2 3", []struct {
			ms   int64
			args []string
			want string
		}{
			{0, nil, "[0 2 1 -1 2]"},                         // ttl 1.5 s
			{200, nil, "[0 2 0 -1 3]"},                       // ttl 2.8 s, (3-2.8)/1.5 = 0 left
			{400, nil, "[1 2 0 2 3]"},                        // allowed at 1.5 s: retry in 1.1 s
			{1500, nil, "[0 2 0 -1 3]"},                      // exactly allowed: diff 0
			{1501, nil, "[1 2 0 2 3]"},                       // retry in 1.499 s, ttl 2.999 s
			{10000, nil, "[0 2 1 -1 2]"},                     // full again
			{10000, []string{"TOKENS", "2"}, "[1 2 1 2 2]"},  // increment = variance: retryable
			{10000, []string{"TOKENS", "3"}, "[1 2 1 -1 2]"}, // increment > variance: never
			{11500, []string{"TOKENS", "2"}, "[0 2 0 -1 3]"}, // tat = now, diff 0
		}},
		// C = 1000, E = 333333 µs, not the exact 333333.33: after 1000
		// tokens at 0 the bucket is full again at 333333 ms, where an exact
		// third of a second would still be 333 µs short.
		{"999 3 1", []struct {
			ms   int64
			args []string
			want string
		}{
			{0, []string{"TOKENS", "1000"}, "[0 1000 0 -1 334]"},     // ttl 333.333 s
			{333332, []string{"TOKENS", "1000"}, "[1 1000 999 1 1]"}, // 1 ms short: ttl 1 ms, 999.997 left
			{333333, []string{"TOKENS", "1000"}, "[0 1000 0 -1 334]"},
		}},
	} {
		t.Run(seq.name, func(t *testing.T) {
			key := "known:" + seq.name
			line := append([]string{"GCRA", key}, strings.Fields(seq.name)...)
			for i, s := range seq.steps {
				clock.at(s.ms)
				args := append(append([]string{}, line...), s.args...)
				if got := fmt.Sprint(roundTrip(t, conn, r, args...)); got != s.want {
					t.Fatalf("step %d at %d ms %q: got %s, want %s", i, s.ms, args, got, s.want)
				}
			}
		})
	}
}

func TestGCRABackends(t *testing.T) {
	cb := newClusterBackend(t, clustertest.Config{Replicas: -1})
	for _, b := range []backend{memoryBackend(), cb.backend} {
		t.Run(b.name, func(t *testing.T) { testGCRA(t, b) })
	}
}

// testGCRA runs GCRA against a real backend, whose clock the test does not
// hold: every sequence must finish well within a second, and the answers
// hold for any elapsed time under one.
func testGCRA(t *testing.T, b backend) {
	c := newGoRedis(t, serve(t, b.decider))
	ctx := context.Background()
	key := func(t *testing.T) string { return b.name + ":" + t.Name() }
	run := func(t *testing.T, k string, steps [][]any) {
		t.Helper()
		for i, s := range steps {
			want := s[len(s)-1].(string)
			args := s[:len(s)-1]
			for j, a := range args {
				if a == "$key" {
					args[j] = k
				}
			}
			if got := fmt.Sprint(throttle(t, c, args...)); got != want {
				t.Fatalf("step %d %v: got %s, want %s", i, args, got, want)
			}
		}
	}

	t.Run("burst then denied", func(t *testing.T) {
		// C = 6, E = 6 s: call k leaves 6-k and a ttl of 6k s.
		run(t, key(t), [][]any{
			{"GCRA", "$key", 5, 10, 60, "[0 6 5 -1 6]"},
			{"GCRA", "$key", 5, 10, 60, "[0 6 4 -1 12]"},
			{"GCRA", "$key", 5, 10, 60, "[0 6 3 -1 18]"},
			{"GCRA", "$key", 5, 10, 60, "[0 6 2 -1 24]"},
			{"GCRA", "$key", 5, 10, 60, "[0 6 1 -1 30]"},
			{"GCRA", "$key", 5, 10, 60, "[0 6 0 -1 36]"},
			{"GCRA", "$key", 5, 10, 60, "[1 6 0 6 36]"},
			{"GCRA", "$key", 5, 10, 60, "TOKENS", 3, "[1 6 0 18 36]"},
			{"GCRA", "$key", 5, 10, 60, "TOKENS", 7, "[1 6 0 -1 36]"},
		})
	})

	t.Run("Redis's rounding of the emission interval", func(t *testing.T) {
		// E = 333333: 3000000 tokens take 999999 s, not 1000000.
		run(t, key(t), [][]any{{"GCRA", "$key", 3000000, 3, 1, "TOKENS", 3000000, "[0 3000001 1 -1 999999]"}})
		// E = 3, not 2.5: 400000 tokens take 1.2 s.
		run(t, key(t)+":2", [][]any{{"GCRA", "$key", 999999, 400000, 1, "TOKENS", 400000, "[0 1000000 600000 -1 2]"}})
		// E = 0.125 µs becomes 1 µs.
		run(t, key(t)+":3", [][]any{{"GCRA", "$key", 0, 4000000, 0.5, "[0 1 0 -1 1]"}})
	})

	t.Run("more tokens than the bucket write nothing", func(t *testing.T) {
		k := key(t)
		run(t, k, [][]any{{"GCRA", "$key", 2, 1, 60, "TOKENS", 4, "[1 3 3 -1 0]"}})
		if b.stored(t, k) {
			t.Fatal("a denial stored a bucket")
		}
	})

	t.Run("THROTTLE, CL.THROTTLE and GCRA share a bucket", func(t *testing.T) {
		k := key(t)
		// All three are 6 tokens, one per 6 s.
		run(t, k, [][]any{
			{"THROTTLE", "$key", 6, 10, "60s", 4, "[0 6 2 -1 24000]"},
			{"GCRA", "$key", 5, 10, 60, "[0 6 1 -1 30]"},
			{"CL.THROTTLE", "$key", 5, 10, 60, "[0 6 0 -1 36]"},
			{"GCRA", "$key", 5, 10, 60, "[1 6 0 6 36]"},
		})
		if n, err := c.Do(ctx, "THROTTLE.RESET", k).Int64(); err != nil || n != 1 {
			t.Fatalf("THROTTLE.RESET of GCRA's bucket: got %d, %v, want 1", n, err)
		}
		run(t, k, [][]any{{"GCRA", "$key", 5, 10, 60, "[0 6 5 -1 6]"}})
	})

	t.Run("errors", func(t *testing.T) {
		for _, tt := range []struct {
			args []any
			want string
		}{
			{[]any{"GCRA", "k", 1, 1}, "ERR wrong number of arguments for 'gcra' command"},
			{[]any{"GCRA", "k", -1, 1, 1}, "ERR value is out of range, must be positive"},
			{[]any{"GCRA", "k", 1, 1, 1, "TOKENS"}, "ERR Missing TOKENS value"},
		} {
			if err := c.Do(ctx, tt.args...).Err(); err == nil || err.Error() != tt.want {
				t.Errorf("%v: got %v, want %q", tt.args, err, tt.want)
			}
		}
	})
}

// gcraOracle is Redis's argument checking restated with regular
// expressions and strconv, independently of parseGCRA: the error Redis
// sends, or "" with the parsed values.
type gcraArgs struct {
	capacity, rate, count int64
	period                float64
}

var (
	redisIntRe   = regexp.MustCompile(`^(0|-?[1-9][0-9]*)$`)
	redisFloatRe = regexp.MustCompile(`^[+-]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?$`)
	redisHexRe   = regexp.MustCompile(`^[+-]?0[xX]([0-9a-fA-F]+\.?[0-9a-fA-F]*|\.[0-9a-fA-F]+)([pP][+-]?[0-9]+)?$`)
	redisInfRe   = regexp.MustCompile(`^(?i)[+-]?inf(inity)?$`)
)

func gcraOracle(args [][]byte) (string, gcraArgs) {
	var a gcraArgs
	long := func(b []byte) (int64, bool) {
		if !redisIntRe.Match(b) {
			return 0, false
		}
		n, err := strconv.ParseInt(string(b), 10, 64)
		return n, err == nil
	}
	if len(args) > 7 {
		return "ERR wrong number of arguments for 'gcra' command", a
	}
	burst, ok := long(args[2])
	if !ok || burst < 0 {
		return "ERR value is out of range, must be positive", a
	}
	a.capacity = burst + 1
	if burst == math.MaxInt64 {
		a.capacity = burst
	}
	if a.rate, ok = long(args[3]); !ok {
		return "ERR value is not an integer or out of range", a
	} else if a.rate < 1 {
		return "ERR value is out of range, value must between 1 and 9223372036854775807", a
	}
	switch p := string(args[4]); {
	case redisInfRe.MatchString(p):
		a.period = math.Inf(1)
		if p[0] == '-' {
			a.period = math.Inf(-1)
		}
	case redisFloatRe.MatchString(p) || redisHexRe.MatchString(p):
		mantissa, nonzero := strings.ToLower(p), "123456789"
		if redisHexRe.MatchString(p) {
			mantissa, _, _ = strings.Cut(mantissa[strings.Index(mantissa, "x")+1:], "p")
			nonzero += "abcdef"
			if !strings.ContainsAny(p, "pP") {
				p += "p0"
			}
		} else {
			mantissa, _, _ = strings.Cut(mantissa, "e")
		}
		var err error
		a.period, err = strconv.ParseFloat(p, 64)
		// strtod's ERANGE: an infinity, or 0 from digits that are not 0.
		if err != nil || a.period == 0 && strings.ContainsAny(mantissa, nonzero) {
			return "ERR value is not a valid float", a
		}
	default:
		return "ERR value is not a valid float", a
	}
	if !(a.period > 0 && a.period < 1e12) {
		return "ERR period must be > 0 and < 1e12", a
	}
	a.count = 1
	if len(args) >= 6 {
		if kw, _, _ := bytes.Cut(args[5], []byte{0}); !strings.EqualFold(string(kw), "tokens") {
			return "ERR syntax error", a
		}
		if len(args) == 6 {
			return "ERR Missing TOKENS value", a
		}
		if a.count, ok = long(args[6]); !ok {
			return "ERR value is not an integer or out of range", a
		} else if a.count < 1 {
			return "ERR value is out of range, value must between 1 and 9223372036854775807", a
		}
	}
	return "", a
}

func FuzzParseGCRA(f *testing.F) {
	f.Add([]byte("k"), []byte("5"), []byte("10"), []byte("60"), []byte("TOKENS"), []byte("3"), uint8(2))
	f.Add([]byte("{t}k"), []byte("0"), []byte("3"), []byte("0.3"), []byte("tokens\x00"), []byte("1"), uint8(0))
	f.Add([]byte(""), []byte("01"), []byte("1"), []byte("1"), []byte(""), []byte(""), uint8(1))
	f.Add([]byte("k"), []byte("9223372036854775806"), []byte("1000000"), []byte("1e-0"), []byte("x"), []byte("1"), uint8(2))
	f.Add([]byte("k"), []byte("1"), []byte("1"), []byte("-+Infinity"), []byte("TOKENS"), []byte("1"), uint8(3))
	f.Add([]byte("k"), []byte("0"), []byte("1"), []byte("0.000001"), []byte("TOKENS"), []byte("9223372036854775807"), uint8(2))
	rec := &requestRecorder{inner: unlimited{}}
	conn, err := net.Dial("tcp", serve(f, rec))
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { conn.Close() })
	r := bufio.NewReader(conn)
	allowed := []string{
		"ERR GCRA limiting uses microsecond accuracy. Combination of period, tokens_per_period and TOKENS would cause an overflow",
		"ERR GCRA limiting uses microsecond accuracy. Combination of period, tokens_per_period and max_burst would cause an overflow",
		"ERR max_burst, tokens_per_period and period out of range: the bucket cannot be computed exactly",
	}
	f.Fuzz(func(t *testing.T, key, burst, rate, period, kw, count []byte, n uint8) {
		if len(key)+len(burst)+len(rate)+len(period)+len(kw)+len(count) > 1<<16 {
			return // the framer refuses arguments over 1 MiB; keep well clear
		}
		args := [][]byte{[]byte("GCRA"), key, burst, rate, period, kw, count, []byte("x")}[:5+n%4]
		strs := make([]string, len(args))
		for i, a := range args {
			strs[i] = string(a)
		}
		got := roundTrip(t, conn, r, strs...)
		reqs := rec.took()
		want, a := gcraOracle(args)
		if e, isErr := got.(respError); isErr {
			if len(reqs) != 0 {
				t.Fatalf("%q: error %q after a request reached the decider", strs, e)
			}
			if want != "" && string(e) != want {
				t.Fatalf("%q: got error %q, want %q", strs, e, want)
			}
			if want == "" && !strings.Contains(strings.Join(allowed, "\n"), string(e)) {
				t.Fatalf("%q: valid arguments got error %q", strs, e)
			}
			return
		}
		if want != "" {
			t.Fatalf("%q: got %v, want error %q", strs, got, want)
		}
		reply, ok := got.([]any)
		if !ok || len(reply) != 5 || len(reqs) != 1 {
			t.Fatalf("%q: got %#v and %d requests, want a 5-array and one request", strs, got, len(reqs))
		}
		q := reqs[0]
		iv := q.Interval
		if q.Key != string(key) || q.Cost != a.count || iv.Capacity != a.capacity || iv.V != 1 || reply[1] != a.capacity {
			t.Fatalf("%q: got request %+v and reply %v, want capacity %d cost %d", strs, q, reply, a.capacity, a.count)
		}
		// E is period/rate in µs to the nearest, at least 1, and within
		// the bound that keeps the bucket exact.
		if exact := a.period * 1e6 / float64(a.rate); iv.U < 1 || (iv.U > 1 && math.Abs(float64(iv.U)-exact) > 0.5+exact*1e-15) {
			t.Fatalf("%q: emission interval %d µs for %v µs", strs, iv.U, exact)
		}
		if iv.U > bucket.MaxCapacityTime/iv.Capacity {
			t.Fatalf("%q: accepted %+v, beyond exact arithmetic", strs, iv)
		}
	})
}

// --throttle-max-key-len bounds GCRA's key after Redis's own checks: Redis
// checks every argument before it looks at the key, so a long key with a
// bad argument gets Redis's error for the argument.
func TestGCRAMaxKeyLenAfterRedisChecks(t *testing.T) {
	const tooLong = "ERR key must be at most 8 bytes (--throttle-max-key-len)"
	for _, loops := range []int{0, -1} {
		conn, r := raw(t, serveConfig(t, proxy.Config{Decider: router.NewMemory(0), MaxKeyLen: 8, Loops: loops}))
		for _, tt := range []struct {
			line []string
			want string
		}{
			{[]string{"123456789", "-1", "1", "1"}, "ERR value is out of range, must be positive"},
			{[]string{"123456789", "1", "0", "1"}, "ERR value is out of range, value must between 1 and 9223372036854775807"},
			{[]string{"123456789", "1", "1", "x"}, "ERR value is not a valid float"},
			{[]string{"123456789", "1", "1", "0"}, "ERR period must be > 0 and < 1e12"},
			{[]string{"123456789", "1", "1", "1", "FOO"}, "ERR syntax error"},
			{[]string{"123456789", "1", "1", "1", "TOKENS"}, "ERR Missing TOKENS value"},
			{[]string{"123456789", "1", "1", "1", "TOKENS", "0"}, "ERR value is out of range, value must between 1 and 9223372036854775807"},
			{[]string{"123456789", "0", "1", "1", "TOKENS", "9223372036854775807"}, "ERR GCRA limiting uses microsecond accuracy. Combination of period, tokens_per_period and TOKENS would cause an overflow"},
			{[]string{"123456789", "1", "1", "1", "TOKENS", "1", "x"}, "ERR wrong number of arguments for 'gcra' command"},
			// Arguments Redis takes: the key is sluice's to refuse.
			{[]string{"123456789", "1", "1", "1"}, tooLong},
			{[]string{"123456789", "1", "1", "1", "TOKENS", "2"}, tooLong},
		} {
			args := append([]string{"GCRA"}, tt.line...)
			if got := roundTrip(t, conn, r, args...); got != respError(tt.want) {
				t.Errorf("loops %d, %q: got %#v, want error %q", loops, args, got, tt.want)
			}
		}
	}
}
