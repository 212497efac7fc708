package proxy_test

import (
	"context"
	"net"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/sluice-rl/sluice/proxy"
	"github.com/sluice-rl/sluice/router"
)

func mustPolicies(t testing.TB, policies []proxy.Policy, rules []proxy.KeyRule) *proxy.Policies {
	t.Helper()
	p, err := proxy.NewPolicies(policies, rules)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// serveServer is serveConfig that also returns the server, for
// SetPolicies and its metrics.
func serveServer(t testing.TB, cfg proxy.Config) (*proxy.Server, string) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	return serveOn(t, ln, cfg), ln.Addr().String()
}

func scrape(t testing.TB, srv *proxy.Server) string {
	rec := httptest.NewRecorder()
	srv.MetricsHandler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	return rec.Body.String()
}

func TestNewPoliciesRefusesBadTables(t *testing.T) {
	ok := proxy.Policy{Name: "free", Capacity: 10, Refill: 1, Period: "1s"}
	for _, tt := range []struct {
		policies []proxy.Policy
		rules    []proxy.KeyRule
		want     string
	}{
		{[]proxy.Policy{{Name: "", Capacity: 1, Refill: 1, Period: "1s"}}, nil, `policy name "" must be 1 to 64 characters`},
		{[]proxy.Policy{{Name: "a b", Capacity: 1, Refill: 1, Period: "1s"}}, nil, `policy name "a b" may hold only`},
		{[]proxy.Policy{{Name: strings.Repeat("p", 65), Capacity: 1, Refill: 1, Period: "1s"}}, nil, "must be 1 to 64 characters"},
		{[]proxy.Policy{ok, ok}, nil, `policy "free" is defined twice`},
		// The metrics' label for a limit given inline: a policy of that
		// name made two series of the same labels, and every scrape fail.
		{[]proxy.Policy{{Name: "inline", Capacity: 1, Refill: 1, Period: "1s"}}, nil, `policy name "inline" is reserved`},
		{[]proxy.Policy{{Name: "p", Capacity: 0, Refill: 1, Period: "1s"}}, nil, `policy "p": capacity must be a positive integer`},
		{[]proxy.Policy{{Name: "p", Capacity: 1, Refill: -1, Period: "1s"}}, nil, `policy "p": refill must be a positive integer`},
		{[]proxy.Policy{{Name: "p", Capacity: 1, Refill: 1, Period: "1w"}}, nil, `policy "p": period must be a positive duration`},
		{[]proxy.Policy{{Name: "p", Capacity: 1, Refill: 1}}, nil, `policy "p": period must be a positive duration`},
		{[]proxy.Policy{{Name: "p", Capacity: 1 << 50, Refill: 1, Period: "1d"}}, nil, `policy "p": capacity, refill and period out of range`},
		{[]proxy.Policy{ok}, []proxy.KeyRule{{"api:*", "paid"}}, `key pattern "api:*" names policy "paid", which is not defined`},
		{[]proxy.Policy{ok}, []proxy.KeyRule{{"", "free"}}, "a key pattern is empty"},
		{[]proxy.Policy{ok}, []proxy.KeyRule{{"a*", "free"}, {"a*", "free"}}, `key pattern "a*" is listed twice`},
	} {
		_, err := proxy.NewPolicies(tt.policies, tt.rules)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%+v %+v: got %v, want %q", tt.policies, tt.rules, err, tt.want)
		}
	}
}

// THROTTLE takes its limit from a named policy, or from the first rule
// its key matches; the inline form is unchanged, and shares the bucket.
func TestThrottleByPolicy(t *testing.T) {
	policies := mustPolicies(t, []proxy.Policy{
		{Name: "free", Capacity: 3, Refill: 1, Period: "1s"},
		{Name: "paid", Capacity: 100, Refill: 10, Period: "1s"},
		{Name: "login.v2", Capacity: 1, Refill: 1, Period: "1m"},
	}, []proxy.KeyRule{
		{"api:free:vip", "paid"}, // before the broader rule: it wins
		{"api:free:*", "free"},
		{"api:v[12]:*", "free"}, // Redis's glob: classes and escapes
		{`lit:\*`, "free"},
		{"api:*", "paid"},
	})
	for _, loops := range []int{0, -1} { // event loops, and a goroutine per client
		_, addr := serveServer(t, proxy.Config{Decider: router.NewMemory(0), Policies: policies, Backend: "test", Loops: loops})
		c := newGoRedis(t, addr)
		ctx := context.Background()
		for _, tt := range []struct {
			args []any
			want []int64
		}{
			{[]any{"THROTTLE", "x:1", "POLICY", "free"}, []int64{0, 3, 2, -1}},
			{[]any{"THROTTLE", "x:1", "policy", "free", 2}, []int64{0, 3, 0, -1}},
			{[]any{"THROTTLE", "x:1", "Policy", "free", 0}, []int64{0, 3, 0, -1}}, // a peek
			{[]any{"THROTTLE", "api:free:1"}, []int64{0, 3, 2, -1}},
			{[]any{"THROTTLE", "api:free:1", 2}, []int64{0, 3, 0, -1}},
			{[]any{"THROTTLE", "api:free:vip"}, []int64{0, 100, 99, -1}},
			{[]any{"THROTTLE", "api:other"}, []int64{0, 100, 99, -1}},
			{[]any{"THROTTLE", "api:v2:1"}, []int64{0, 3, 2, -1}},
			{[]any{"THROTTLE", "api:v3:1"}, []int64{0, 100, 99, -1}},
			{[]any{"THROTTLE", "lit:*"}, []int64{0, 3, 2, -1}},
			{[]any{"THROTTLE", "login", "POLICY", "login.v2"}, []int64{0, 1, 0, -1}},
			// The inline form, on a bucket a policy emptied: the same bucket.
			{[]any{"THROTTLE", "x:1", 3, 1, "1s", 0}, []int64{0, 3, 0, -1}},
			{[]any{"THROTTLE", "y:1", 5, 1, "1s"}, []int64{0, 5, 4, -1}},
		} {
			got := throttle(t, c, tt.args...)
			if !eq(got[:4], tt.want) {
				t.Errorf("%v: got %v, want %v...", tt.args, got, tt.want)
			}
		}
		if got := throttle(t, c, "THROTTLE", "x:1", "POLICY", "free"); got[0] != 1 || got[3] <= 0 {
			t.Errorf("over a policy's limit: got %v, want limited", got)
		}
		for _, tt := range []struct {
			args []any
			want string
		}{
			{[]any{"THROTTLE", "x:1", "POLICY", "gold"}, "ERR no policy named 'gold'"},
			{[]any{"THROTTLE", "other:1"}, "ERR no policy matches key 'other:1'"},
			{[]any{"THROTTLE", "lit:x"}, "ERR no policy matches key 'lit:x'"},
			{[]any{"THROTTLE", "other:1", 1}, "ERR no policy matches key 'other:1'"},
			{[]any{"THROTTLE", "api:1", -1}, "ERR cost must be a non-negative integer"},
			{[]any{"THROTTLE", "x:1", "POLICY", "free", "x"}, "ERR cost must be a non-negative integer"},
			{[]any{"THROTTLE", "x:1", "POLICY"}, "ERR wrong number of arguments for 'throttle' command"},
			{[]any{"THROTTLE", "x:1", "POLICY", "free", 1, 1}, "ERR wrong number of arguments for 'throttle' command"},
			{[]any{"THROTTLE", "x:1", 1, 1}, "ERR wrong number of arguments for 'throttle' command"},
			{[]any{"THROTTLE"}, "ERR wrong number of arguments for 'throttle' command"},
			// CL.THROTTLE keeps redis-cell's arguments only.
			{[]any{"CL.THROTTLE", "x:1", "POLICY", "free", 1}, "ERR max_burst must be a non-negative integer"},
		} {
			if err := c.Do(ctx, tt.args...).Err(); err == nil || !strings.HasPrefix(err.Error(), tt.want) {
				t.Errorf("%v: got %v, want %q", tt.args, err, tt.want)
			}
		}
	}
}

// Without policies the short forms say what is missing; SetPolicies
// swaps the table for the commands that follow.
func TestSetPolicies(t *testing.T) {
	srv, addr := serveServer(t, proxy.Config{Decider: router.NewMemory(0), Backend: "test"})
	c := newGoRedis(t, addr)
	ctx := context.Background()
	if err := c.Do(ctx, "THROTTLE", "k", "POLICY", "free").Err(); err == nil || !strings.HasPrefix(err.Error(), "ERR no policies are configured") {
		t.Fatalf("without policies: got %v", err)
	}
	srv.SetPolicies(mustPolicies(t, []proxy.Policy{{Name: "free", Capacity: 3, Refill: 1, Period: "1s"}}, []proxy.KeyRule{{"k*", "free"}}))
	if got := throttle(t, c, "THROTTLE", "k"); !eq(got[:3], []int64{0, 3, 2}) {
		t.Fatalf("after SetPolicies: got %v, want a bucket of 3", got)
	}
	srv.SetPolicies(mustPolicies(t, []proxy.Policy{{Name: "free", Capacity: 10, Refill: 1, Period: "1s"}}, nil))
	if got := throttle(t, c, "THROTTLE", "k2", "POLICY", "free"); !eq(got[:3], []int64{0, 10, 9}) {
		t.Fatalf("after a second SetPolicies: got %v, want a bucket of 10", got)
	}
	if err := c.Do(ctx, "THROTTLE", "k").Err(); err == nil || !strings.HasPrefix(err.Error(), "ERR no policy matches key 'k'") {
		t.Fatalf("a rule the new table dropped: got %v", err)
	}
	info := c.Info(ctx, "policies").Val()
	for _, want := range []string{"policies:1\r\n", "key_rules:0\r\n", "policy_free:capacity=10,refill=1,period_us=1000000,shadow=0,allowed=2,limited=0\r\n"} {
		if !strings.Contains(info, want) {
			t.Errorf("INFO policies lacks %q:\n%s", want, info)
		}
	}
}

// A shadow policy decides and counts, but allows: the reply is allowed
// with the bucket's real remaining, and INFO and the metrics count what it
// would have denied.
func TestShadowPolicy(t *testing.T) {
	policies := mustPolicies(t, []proxy.Policy{
		{Name: "paid", Capacity: 2, Refill: 1, Period: "1h", Shadow: true},
		{Name: "free", Capacity: 2, Refill: 1, Period: "1h"},
	}, []proxy.KeyRule{{"paid:*", "paid"}, {"free:*", "free"}})
	srv, addr := serveServer(t, proxy.Config{Decider: router.NewMemory(0), Policies: policies, Backend: "test"})
	c := newGoRedis(t, addr)
	ctx := context.Background()
	for i, want := range [][]int64{{0, 2, 1, -1}, {0, 2, 0, -1}, {0, 2, 0, -1}, {0, 2, 0, -1}, {0, 2, 0, -1}} {
		if got := throttle(t, c, "THROTTLE", "paid:1"); !eq(got[:4], want) || got[4] <= 0 {
			t.Fatalf("shadow call %d: got %v, want %v and a reset time", i+1, got, want)
		}
	}
	for range 3 {
		throttle(t, c, "THROTTLE", "free:1")
	}
	if got := throttle(t, c, "THROTTLE", "free:1"); got[0] != 1 {
		t.Fatalf("an enforced policy over its limit: got %v, want limited", got)
	}
	info := c.Info(ctx, "stats", "policies").Val()
	for _, want := range []string{
		"throttle_allowed:7\r\n", "throttle_limited:2\r\n", "throttle_shadow_limited:3\r\n",
		"policy_paid:capacity=2,refill=1,period_us=3600000000,shadow=1,allowed=2,limited=3\r\n",
		"policy_free:capacity=2,refill=1,period_us=3600000000,shadow=0,allowed=2,limited=2\r\n",
	} {
		if !strings.Contains(info, want) {
			t.Errorf("INFO lacks %q:\n%s", want, info)
		}
	}
	text := scrape(t, srv)
	for _, want := range []string{
		`sluice_decisions_total{policy="paid",result="allowed",source="embedded"} 2`,
		`sluice_decisions_total{policy="paid",result="limited",source="embedded"} 3`,
		`sluice_decisions_total{policy="free",result="limited",source="embedded"} 2`,
		`sluice_shadow_limited_total{policy="paid"} 3`,
	} {
		if !strings.Contains(text, want) {
			t.Errorf("metrics lack %q", want)
		}
	}
	if strings.Contains(text, `sluice_shadow_limited_total{policy="free"}`) || strings.Contains(text, `policy="inline"`) {
		t.Errorf("metrics count what did not happen:\n%s", text)
	}
	if t.Failed() {
		t.Log(text)
	}
}

// gatedDecider holds each Submit until released, so that a test can act
// while a decision is in flight.
type gatedDecider struct {
	proxy.Decider
	submitted, release chan struct{}
}

func (g gatedDecider) Submit(ctx context.Context, reqs []router.Request, res []router.Result, done func(idx []int)) {
	g.submitted <- struct{}{}
	<-g.release
	g.Decider.Submit(ctx, reqs, res, done)
}

// A command read before a reload keeps the policy it was parsed with.
func TestInFlightKeepsItsPolicy(t *testing.T) {
	// A goroutine per client: the gate holds the caller of Submit, and an
	// event loop held so would hold every client with it.
	g := gatedDecider{Decider: router.NewMemory(0), submitted: make(chan struct{}, 8), release: make(chan struct{})}
	srv, addr := serveServer(t, proxy.Config{Decider: g, Backend: "test", Loops: -1,
		Policies: mustPolicies(t, []proxy.Policy{{Name: "p", Capacity: 3, Refill: 1, Period: "1s"}}, nil)})
	conn := dialRaw(t, addr)
	conn.send([]string{"THROTTLE", "k", "POLICY", "p"})
	<-g.submitted
	srv.SetPolicies(mustPolicies(t, []proxy.Policy{{Name: "p", Capacity: 9, Refill: 1, Period: "1s"}}, nil))
	close(g.release)
	if got := conn.read(); !strings.HasPrefix(got, "*5\r\n:0\r\n:3\r\n:2\r\n") {
		t.Fatalf("decided across a reload: %q, want the old policy's bucket of 3", got)
	}
	if got := conn.do("THROTTLE", "k2", "POLICY", "p"); !strings.HasPrefix(got, "*5\r\n:0\r\n:9\r\n:8\r\n") {
		t.Fatalf("after the reload: %q, want the new policy's bucket of 9", got)
	}
}
