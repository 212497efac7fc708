package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/sluice-rl/sluice/router"
	"github.com/sluice-rl/sluice/router/clustertest"
)

// binary is the sluice command, built once for the test binary: a link
// per test cost a second or two each, a dozen times.
func binary(t *testing.T) string {
	t.Helper()
	bin, err := built()
	if err != nil {
		t.Fatal(err)
	}
	return bin
}

var built = sync.OnceValues(func() (string, error) {
	dir, err := os.MkdirTemp("", "sluice-bin-")
	if err != nil {
		return "", err
	}
	builtDir = dir
	bin := filepath.Join(dir, "sluice")
	// go test puts its own GOROOT/bin first on the PATH it runs tests with.
	out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("go build: %v\n%s", err, out)
	}
	return bin, nil
})

// builtDir is where built put the binary, removed by TestMain.
var builtDir string

func TestMain(m *testing.M) {
	code := m.Run()
	if builtDir != "" {
		os.RemoveAll(builtDir)
	}
	os.Exit(code)
}

// process is a running sluice whose JSON log lines are decoded.
type process struct {
	cmd     *exec.Cmd
	lines   chan map[string]any
	addr    string
	tlsAddr string // --tls-listen's, when served
}

func start(t *testing.T, bin string, env []string, args ...string) *process {
	t.Helper()
	p := launch(t, bin, env, args...)
	started := p.next(t, "sluice started")
	p.addr, _ = started["listen"].(string)
	p.tlsAddr, _ = started["tls_listen"].(string)
	return p
}

// launch starts sluice and decodes its log lines, without waiting for it
// to serve.
func launch(t *testing.T, bin string, env []string, args ...string) *process {
	t.Helper()
	cmd := exec.Command(bin, append([]string{"--log-format", "json"}, args...)...)
	cmd.Env = append(os.Environ(), env...)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &process{cmd: cmd, lines: make(chan map[string]any, 100)}
	go func() {
		defer close(p.lines)
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			var line map[string]any
			if json.Unmarshal(sc.Bytes(), &line) == nil {
				p.lines <- line
			}
		}
	}()
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
	})
	return p
}

// next waits for the log line with message msg.
func (p *process) next(t *testing.T, msg string) map[string]any {
	t.Helper()
	timeout := time.After(20 * time.Second)
	for {
		select {
		case line, ok := <-p.lines:
			if !ok {
				t.Fatalf("sluice exited before logging %q", msg)
			}
			if line["msg"] == msg {
				return line
			}
		case <-timeout:
			t.Fatalf("no %q log line in 20s", msg)
		}
	}
}

// nextLine is the next log line, whatever it says.
func (p *process) nextLine(t *testing.T) map[string]any {
	t.Helper()
	select {
	case line, ok := <-p.lines:
		if !ok {
			t.Fatal("sluice exited")
		}
		return line
	case <-time.After(20 * time.Second):
		t.Fatal("no log line in 20s")
	}
	return nil
}

func redisCLI(t *testing.T, addr string, args ...string) []string {
	t.Helper()
	host, port, _ := strings.Cut(addr, ":")
	out, err := exec.Command("redis-cli", append([]string{"-h", host, "-p", port}, args...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("redis-cli %v: %v\n%s", args, err, out)
	}
	return strings.Fields(string(out))
}

// The README's session (at 1 a minute, not 1 a second: each call is a
// redis-cli process, and five of them may take a second on a loaded
// machine): five allowed with 4..0 left, the sixth denied.
func checkFiveThenDenied(t *testing.T, addr, key string) {
	t.Helper()
	for want := 4; want >= 0; want-- {
		got := redisCLI(t, addr, "THROTTLE", key, "5", "1", "1m")
		if len(got) != 5 || got[0] != "0" || got[2] != strconv.Itoa(want) {
			t.Fatalf("got %v, want limited 0, remaining %d", got, want)
		}
	}
	got := redisCLI(t, addr, "THROTTLE", key, "5", "1", "1m")
	retry, _ := strconv.Atoi(got[3])
	if got[0] != "1" || retry <= 0 || retry > 60_000 {
		t.Fatalf("sixth: got %v, want limited 1 and retry_after_ms in (0, 60000]", got)
	}
}

// noEnv is an empty environment.
func noEnv(string) (string, bool) { return "", false }

// envOf is the environment m.
func envOf(m map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) {
		v, ok := m[k]
		return v, ok
	}
}

func requireRedisCLI(t *testing.T) {
	clustertest.Require(t)
	if _, err := exec.LookPath("redis-cli"); err != nil {
		t.Fatal("redis-cli is not on PATH (install redis-tools, or run make test)")
	}
}

// stop sends SIGTERM and waits for a clean exit: nothing logged at warn
// or above on the way (no shard marked unhealthy as its connections
// close, no failed backend call).
func stop(t *testing.T, p *process) {
	t.Helper()
	for len(p.lines) > 0 {
		<-p.lines // what it logged before
	}
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	stopped := false
	timeout := time.After(20 * time.Second)
	for done := false; !done; {
		select {
		case line, ok := <-p.lines:
			switch {
			case !ok:
				done = true
			case line["msg"] == "sluice stopped":
				stopped = true
			case line["level"] != "info" && line["level"] != "debug":
				t.Errorf("logged after SIGTERM: %v", line)
			}
		case <-timeout:
			t.Fatal("sluice did not exit within 20s of SIGTERM")
		}
	}
	if err := p.cmd.Wait(); err != nil || !stopped {
		t.Fatalf("sluice exited with %v after SIGTERM (stopped logged: %v), want 0", err, stopped)
	}
}

func TestEmbedded(t *testing.T) {
	requireRedisCLI(t)
	p := start(t, binary(t), []string{"SLUICE_LISTEN=127.0.0.1:0"})
	checkFiveThenDenied(t, p.addr, "user:1")
	if info := strings.Join(redisCLI(t, p.addr, "INFO", "server"), " "); !strings.Contains(info, "backend:embedded") {
		t.Fatalf("INFO server: %s", info)
	}
	stop(t, p)
}

func TestCluster(t *testing.T) {
	requireRedisCLI(t)
	c := clustertest.New(t, clustertest.Config{})
	bin := binary(t)
	p := start(t, bin, nil, "--listen", "127.0.0.1:0", "--cluster", strings.Join(c.Addrs()[:2], ","))
	checkFiveThenDenied(t, p.addr, "user:1")

	key := router.KeyPrefix + "user:1"
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	slot, err := c.Nodes[0].Do(ctx, "CLUSTER", "KEYSLOT", key).AsInt64()
	if err != nil {
		t.Fatal(err)
	}
	owner, err := c.Primary(ctx, int(slot))
	if err != nil {
		t.Fatal(err)
	}
	reset := redisCLI(t, p.addr, "THROTTLE", "user:1", "5", "1", "1m", "0")[4]
	pttl, err := owner.Do(ctx, "PTTL", key).AsInt64()
	resetMS, _ := strconv.ParseInt(reset, 10, 64)
	if err != nil || pttl <= 0 || pttl > resetMS {
		t.Fatalf("on %s, the owner of slot %d: PTTL %d (%v), want in (0, %d], the time to full", owner.Addr, slot, pttl, err, resetMS)
	}

	// A second sluice process shares the buckets: across both, a burst of
	// 30 calls admits exactly the capacity.
	q := start(t, bin, nil, "--listen", "127.0.0.1:0", "--cluster", c.Addrs()[3], "--hot-keys", "tenant:*", "--hot-split", "2")
	// burst sends 30 calls on a bucket of 10 to p and q in turn.
	burst := func(key string) (admitted int) {
		for i := range 30 {
			addr := p.addr
			if i%2 == 1 {
				addr = q.addr
			}
			if redisCLI(t, addr, "THROTTLE", key, "10", "1", "1h")[0] == "0" {
				admitted++
			}
		}
		return admitted
	}
	if admitted := burst("shared"); admitted != 10 {
		t.Fatalf("two processes admitted %d of 30 calls on a bucket of 10, want 10", admitted)
	}

	// A key declared hot on q is split in two; p, which declares nothing,
	// follows the split from its first call. Across both, a burst still
	// admits exactly the capacity.
	hasLine := func(addr, prefix string) bool {
		return slices.ContainsFunc(redisCLI(t, addr, "INFO", "backend"), func(l string) bool { return strings.HasPrefix(l, prefix) })
	}
	deadline := time.Now().Add(5 * time.Second)
	for !hasLine(q.addr, "hot0:key=tenant:big,state=declared,split=2,") {
		if time.Now().After(deadline) {
			t.Fatalf("q never split tenant:big:\n%v", redisCLI(t, q.addr, "INFO", "backend"))
		}
		redisCLI(t, q.addr, "THROTTLE", "tenant:big", "10", "1", "1h", "0") // a peek
	}
	if admitted := burst("tenant:big"); admitted != 10 {
		t.Fatalf("a split key admitted %d of 30 calls on a bucket of 10 across two processes, want 10", admitted)
	}
	if !hasLine(p.addr, "hot0:key=tenant:big,state=following,split=2,") {
		t.Fatalf("p does not follow the split:\n%v", redisCLI(t, p.addr, "INFO", "backend"))
	}
	stop(t, q)
	stop(t, p)
}

func TestBadFlags(t *testing.T) {
	var out strings.Builder
	for _, args := range [][]string{{"--log-format", "xml"}, {"--log-level", "loud"}, {"--log-level", ""}, {"--log-level", "fatal"}, {"--nope"}, {"extra"},
		{"--fallback", "maybe"}, {"--fallback-share", "2"}, {"--fallback-share", "none"}, {"--backend-timeout", "0s"}, {"--fallback-max-keys", "63"},
		{"--hot-split", "17"}, {"--hot-threshold", "-1"}, {"--hot-cooldown", "0s"},
		{"--io-loops", "-2"}, {"--io-loops", "1025"}, {"--busy-poll", "2ms"}, {"--busy-poll", "-1us"}, {"--maxclients", "0"}, {"--timeout", "-1"}} {
		out.Reset()
		if code := run(args, noEnv, &out); code != 2 {
			t.Errorf("%v: exit %d, want 2", args, code)
		}
		if !strings.Contains(out.String(), "sluice:") && !strings.Contains(out.String(), "flag provided but not defined") {
			t.Errorf("%v: no message, got %q", args, out.String())
		}
	}
	if code := run(nil, envOf(map[string]string{"SLUICE_LOG_FORMAT": "yaml"}), &out); code != 2 {
		t.Errorf("SLUICE_LOG_FORMAT=yaml: exit %d, want 2", code)
	}
	if code := run(nil, envOf(map[string]string{"SLUICE_LOG_LEVEL": ""}), &out); code != 2 {
		t.Errorf("SLUICE_LOG_LEVEL= (empty): exit %d, want 2", code)
	}
	// Seconds past Redis's bound (INT_MAX) overflowed the duration: this
	// one wrapped to under a second, and every client was closed at once.
	for _, secs := range []string{"2147483648", "18446744074"} {
		if _, err := parseFlags([]string{"--timeout", secs}, noEnv, io.Discard); err == nil || !strings.Contains(err.Error(), "--timeout") {
			t.Errorf("--timeout %s: %v, want it refused", secs, err)
		}
	}
	// NaN passed every range check, as no comparison holds for it: a
	// share of NaN made fallback buckets of a negative interval.
	for _, args := range [][]string{{"--fallback-share", "NaN"}, {"--fallback-share", "nan"}, {"--hot-threshold", "NaN"}} {
		if _, err := parseFlags(args, noEnv, io.Discard); err == nil {
			t.Errorf("%v: accepted, want it refused", args)
		}
	}
	if o, err := parseFlags([]string{"--timeout", "2147483647"}, noEnv, io.Discard); err != nil || o.idleTimeout != 2147483647 {
		t.Errorf("--timeout 2147483647 (Redis's most): %v, %v", o.idleTimeout, err)
	}
}

// Protected mode: a sluice reachable from other hosts with no password
// refuses to start and says why; a password, a loopback address or
// --protected-mode no lets it start.
func TestProtectedMode(t *testing.T) {
	none := noEnv
	var out strings.Builder
	if code := run([]string{"--listen", "0.0.0.0:0"}, none, &out); code != 2 || !strings.Contains(out.String(), "protected mode") {
		t.Errorf("--listen 0.0.0.0:0 without a password: exit %d, %q; want 2 and why", code, out.String())
	}
	out.Reset()
	acl := filepath.Join(t.TempDir(), "users.acl")
	if err := os.WriteFile(acl, []byte("user alice on >a ~* +@all\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if code := run([]string{"--listen", ":0", "--aclfile", acl}, none, &out); code != 2 || !strings.Contains(out.String(), "protected mode") {
		t.Errorf("an ACL file whose default user has no password, on all interfaces: exit %d, %q; want 2", code, out.String())
	}
	for _, o := range []options{
		{listen: "0.0.0.0:0", requirepass: "secret", protectedMode: "yes"},
		{listen: "0.0.0.0:0", protectedMode: "no"},
		{listen: "127.0.0.1:0", protectedMode: "yes"},
		{listen: "[::1]:0", protectedMode: "yes"},
		{listen: "localhost:0", protectedMode: "yes"},
	} {
		if _, err := loadUsers(o); err != nil {
			t.Errorf("%+v: %v, want it to start", o, err)
		}
	}
	// Read in any case, as Redis reads its yes/no settings.
	if o, err := parseFlags([]string{"--protected-mode", "NO", "--tls-auth-clients", "Optional"}, none, &out); err != nil ||
		o.protectedMode != "no" || o.tls.authClients != "optional" {
		t.Errorf("--protected-mode NO --tls-auth-clients Optional: %q, %q, %v; want no and optional", o.protectedMode, o.tls.authClients, err)
	}
	for _, args := range [][]string{{"--protected-mode", "maybe"}, {"--aclfile", filepath.Join(t.TempDir(), "missing")}} {
		out.Reset()
		if code := run(args, none, &out); code != 2 {
			t.Errorf("%v: exit %d, want 2", args, code)
		}
	}
}

// --requirepass through the binary: redis-cli is refused until it
// authenticates, with Redis's own words.
func TestRequirePass(t *testing.T) {
	requireRedisCLI(t)
	p := start(t, binary(t), []string{"SLUICE_LISTEN=127.0.0.1:0", "SLUICE_REQUIREPASS=s3cret"})
	if got := strings.Join(redisCLI(t, p.addr, "THROTTLE", "k", "5", "1", "1m"), " "); !strings.Contains(got, "NOAUTH Authentication required.") {
		t.Errorf("without AUTH: %q", got)
	}
	t.Setenv("REDISCLI_AUTH", "s3cret") // redis-cli's AUTH, for every call below
	checkFiveThenDenied(t, p.addr, "user:1")
	stop(t, p)
}

// An ACL file whose rules match no command sluice checks (a command that
// neither sluice nor the cluster has) is reported once the cluster's
// command table is read, one line per name (Redis refuses such a file at
// load; sluice may start before the cluster answers).
func TestUnknownACLCommandsLogged(t *testing.T) {
	c := clustertest.New(t, clustertest.Config{Replicas: -1})
	acl := filepath.Join(t.TempDir(), "users.acl")
	if err := os.WriteFile(acl, []byte("user default on nopass ~* &* +@all -flushal +config|get\nuser ops on >pw ~* -debugg\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	p := start(t, binary(t), nil, "--listen", "127.0.0.1:0", "--cluster", c.Addrs()[0], "--aclfile", acl)
	var got []string
	for len(got) < 2 {
		line := p.next(t, "an ACL rule matches no command sluice checks: it allows or denies nothing")
		got = append(got, fmt.Sprint(line["command"]))
	}
	if want := []string{"flushal", "debugg"}; !slices.Equal(got, want) {
		t.Fatalf("reported %q, want %q (by user, in name order)", got, want)
	}
	stop(t, p)
}

// --metrics-listen serves Prometheus metrics after known traffic, and
// /healthz and /readyz.
func TestMetricsEndpoint(t *testing.T) {
	requireRedisCLI(t)
	p := start(t, binary(t), []string{"SLUICE_LISTEN=127.0.0.1:0", "SLUICE_METRICS_LISTEN=127.0.0.1:0"})
	maddr, _ := p.next(t, "metrics listening")["addr"].(string)
	if maddr == "" {
		t.Fatal("no \"metrics listening\" log line with its address")
	}
	checkFiveThenDenied(t, p.addr, "m:1")
	get := func(path string) (int, string) {
		resp, err := http.Get("http://" + maddr + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	for _, path := range []string{"/healthz", "/readyz"} {
		if code, _ := get(path); code != 200 {
			t.Errorf("%s: %d, want 200", path, code)
		}
	}
	_, text := get("/metrics")
	for _, want := range []string{
		`sluice_decisions_total{policy="inline",result="allowed",source="embedded"} 5`,
		`sluice_decisions_total{policy="inline",result="limited",source="embedded"} 1`,
		`sluice_decision_duration_seconds_count 6`,
		`sluice_embedded_buckets 1`,
	} {
		if !strings.Contains(text, want) {
			t.Errorf("/metrics lacks %q:\n%s", want, text)
		}
	}
	stop(t, p)
}

// A second SIGINT during a shutdown that waits on a client exits at once,
// as Redis does; the first waits, up to --shutdown-timeout.
func TestSecondSIGINTExitsAtOnce(t *testing.T) {
	requireRedisCLI(t)
	// The goroutine path: a client that reads nothing holds its pipeline
	// in a write until the shutdown's time is up.
	p := start(t, binary(t), nil, "--listen", "127.0.0.1:0", "--io-loops", "-1", "--shutdown-timeout", "60s")
	conn, err := net.Dial("tcp", p.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	cmd := []byte(strings.Repeat("*6\r\n$8\r\nTHROTTLE\r\n$1\r\nk\r\n$1\r\n5\r\n$1\r\n1\r\n$2\r\n1s\r\n$1\r\n0\r\n", 1000))
	// Write until sluice stops reading: its replies fill both sockets.
	for i := 0; ; i++ {
		if i == 10_000 {
			t.Fatal("sluice read 10,000 batches from a client that reads nothing")
		}
		conn.SetWriteDeadline(time.Now().Add(500 * time.Millisecond))
		if _, err := conn.Write(cmd); err != nil {
			break
		}
	}
	for len(p.lines) > 0 {
		<-p.lines
	}
	if err := p.cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	p.next(t, "shutting down")
	if err := p.cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- p.cmd.Wait() }()
	select {
	case err := <-exited:
		if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 1 {
			t.Fatalf("sluice exited with %v after the second SIGINT, want exit status 1", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("sluice still runs 20s after a second SIGINT (its shutdown timeout is 60s)")
	}
}

// --cluster is host:port[,host:port...]: a seed that is not one is a
// mistake in the deployment, refused at start with the flag named, rather
// than a sluice that starts and answers by the fallback policy forever.
func TestClusterSeedsChecked(t *testing.T) {
	for _, cluster := range []string{"redis", "127.0.0.1:7000,", "127.0.0.1:7000,,127.0.0.1:7001", "127.0.0.1", "127.0.0.1:", "127.0.0.1:99999", "127.0.0.1:0", "127.0.0.1:-1", "127.0.0.1:7000,127.0.0.1:70000"} {
		// parseFlags, not run: a sluice that took the seed would serve.
		if _, err := parseFlags([]string{"--cluster", cluster}, noEnv, io.Discard); err == nil || !strings.Contains(err.Error(), "--cluster") {
			t.Errorf("--cluster %q: %v; want it refused, the flag named", cluster, err)
		}
	}
	// A list written with spaces after its commas, as in YAML's flow
	// style, is the same seeds.
	o, err := parseFlags([]string{"--cluster", "127.0.0.1:7000, 127.0.0.1:7001", "--listen", "127.0.0.1:0"}, noEnv, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Split(o.cluster, ","); !slices.Equal(got, []string{"127.0.0.1:7000", "127.0.0.1:7001"}) {
		t.Errorf("seeds: %q", got)
	}
}

// An --announce that CLUSTER SLOTS could not give (no host, a port out of
// range or not a number) is refused at start: taken, every cluster-mode
// client's CLUSTER SLOTS was answered an error, for ever.
func TestAnnounceChecked(t *testing.T) {
	for _, a := range []string{"redis", "::1:7000", ":7000", "redis:0", "redis:65536", "[::1]:7000x", "redis:-1", "redis:"} {
		if _, err := parseFlags([]string{"--announce", a}, noEnv, io.Discard); err == nil || !strings.Contains(err.Error(), "--announce") {
			t.Errorf("--announce %q: %v; want it refused, the flag named", a, err)
		}
	}
	for _, a := range []string{"redis.example:6380", "[::1]:7000", "10.0.0.1:65535"} {
		if _, err := parseFlags([]string{"--announce", a}, noEnv, io.Discard); err != nil {
			t.Errorf("--announce %q: %v; want it taken", a, err)
		}
	}
}

// --pprof serves the profiles, but not the command line: it holds
// --requirepass and --cluster-password, and /debug/pprof/cmdline would
// give them to anyone who reaches the pprof address.
func TestPprofHidesTheCommandLine(t *testing.T) {
	p := launch(t, binary(t), nil, "--listen", "127.0.0.1:0", "--pprof", "127.0.0.1:0",
		"--requirepass", "pprof-secret", "--cluster", "127.0.0.1:1", "--cluster-password", "cluster-secret")
	addr, _ := p.next(t, "pprof listening")["addr"].(string)
	if addr == "" {
		t.Fatal("no address in the \"pprof listening\" log line")
	}
	get := func(path string) (int, string) {
		resp, err := http.Get("http://" + addr + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, body := get("/debug/pprof/cmdline"); strings.Contains(body, "secret") {
		t.Errorf("/debug/pprof/cmdline: %d %q: the passwords are served", code, body)
	}
	if code, body := get("/debug/pprof/"); code != http.StatusOK || !strings.Contains(body, "goroutine") {
		t.Errorf("/debug/pprof/: %d %q; want the index", code, body)
	}
	if code, body := get("/debug/pprof/goroutine?debug=1"); code != http.StatusOK || !strings.Contains(body, "goroutine profile") {
		t.Errorf("/debug/pprof/goroutine: %d, want 200 and the profile; got %.200q", code, body)
	}
	if code, _ := get("/debug/pprof/symbol"); code != http.StatusOK {
		t.Errorf("/debug/pprof/symbol: %d, want 200", code)
	}
}

// A --metrics-listen that cannot be listened on stops the start before
// "sluice started" is logged: a supervisor or an operator reading the log
// must not see a start that did not happen.
func TestMetricsListenFailsBeforeStarted(t *testing.T) {
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	for _, addr := range []string{"no-port", taken.Addr().String()} {
		var out strings.Builder
		code := run([]string{"--listen", "127.0.0.1:0", "--metrics-listen", addr, "--log-format", "json"}, noEnv, &out)
		if code != 1 || !strings.Contains(out.String(), "cannot listen for metrics") || strings.Contains(out.String(), "sluice started") {
			t.Errorf("--metrics-listen %s: exit %d, log:\n%s\nwant 1, the failure, and no start", addr, code, out.String())
		}
	}
}

// A bad number or duration says what is wrong with it, once, on the
// command line and in the environment alike: the flag package alone says
// "parse error", after the whole usage.
func TestBadValuesExplained(t *testing.T) {
	for _, tt := range []struct {
		args []string
		env  map[string]string
		want string
	}{
		{args: []string{"--backend-timeout", "50"}, want: `missing unit in duration "50"`},
		{env: map[string]string{"SLUICE_BACKEND_TIMEOUT": "50"}, want: `SLUICE_BACKEND_TIMEOUT: missing unit in duration "50"`},
		{args: []string{"--maxclients", "lots"}, want: `"lots" is not a whole number`},
		{args: []string{"--hot-threshold", "hot"}, want: `"hot" is not a number`},
	} {
		var out strings.Builder
		code := run(tt.args, envOf(tt.env), &out)
		if code != 2 || !strings.Contains(out.String(), tt.want) || strings.Contains(out.String(), "Usage") {
			t.Errorf("%v %v: exit %d, %q; want 2 and only %q", tt.args, tt.env, code, out.String(), tt.want)
		}
	}
	var out strings.Builder
	if code := run([]string{"-h"}, noEnv, &out); code != 0 || !strings.Contains(out.String(), "-backend-timeout duration") {
		t.Errorf("-h: exit %d, %q; want the usage, each flag's type named", code, out.String())
	}
}

// Names a setting takes are read in any case, as Redis reads its own
// (maxmemory-policy ALLKEYS-LRU).
func TestSettingNamesInAnyCase(t *testing.T) {
	o, err := parseFlags([]string{"--fallback", "OPEN", "--fallback-share", "AUTO", "--log-format", "JSON", "--protected-mode", "Yes"}, noEnv, io.Discard)
	if err != nil || o.fallback != "open" || o.fallbackShare != "auto" || o.logFormat != "json" || o.protectedMode != "yes" {
		t.Fatalf("%v: fallback %q, share %q, log format %q, protected mode %q", err, o.fallback, o.fallbackShare, o.logFormat, o.protectedMode)
	}
}

// A --tls-listen whose certificate cannot be read stops the start before
// the cluster is waited for (up to 2 s when it does not answer), with
// nothing listened on or logged as started.
func TestBadCertificateFailsFirst(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "missing.pem")
	var out strings.Builder
	code := run([]string{"--listen", "127.0.0.1:0", "--tls-listen", "127.0.0.1:0", "--tls-cert-file", missing, "--tls-key-file", missing, "--tls-auth-clients", "no",
		"--cluster", "127.0.0.1:1", "--log-format", "json"}, noEnv, &out)
	log := out.String()
	if code != 1 || !strings.Contains(log, "cannot serve TLS") || strings.Contains(log, "cluster not reachable") || strings.Contains(log, "sluice started") {
		t.Errorf("exit %d, log:\n%s\nwant 1 and the certificate's error before any word of the cluster", code, log)
	}
}

// --listen 0.0.0.0:port serves IPv4 alone, as Redis's bind 0.0.0.0: Go's
// own listener for "tcp" takes IPv6 too. (Decided here without binding:
// tests listen on loopback only.)
func TestListenOnIPv4Alone(t *testing.T) {
	for addr, want := range map[string]string{
		"0.0.0.0:6380": "tcp4", "127.0.0.1:6380": "tcp4", "10.1.2.3:1": "tcp4",
		"[::]:6380": "tcp", ":6380": "tcp", "[::1]:6380": "tcp", "localhost:6380": "tcp",
	} {
		if got := listenNetwork(addr); got != want {
			t.Errorf("%s: listened on %q, want %q", addr, got, want)
		}
	}
}
