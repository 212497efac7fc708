// Command sluice is a rate limiter that speaks the Redis protocol. It
// answers THROTTLE and CL.THROTTLE from token buckets kept in a Redis
// Cluster, or in memory when no cluster is given.
//
// Every flag can also be set in the environment as SLUICE_<NAME>, with the
// name in upper case and dashes as underscores (SLUICE_LOG_LEVEL=debug),
// and in the --config file under its own name (log-level: debug). The
// environment wins over the command line, which wins over the file: an
// orchestrator sets the environment per deployment, over the command line
// baked into an image.
//
// SIGHUP reads the --config file again and swaps its policies and key
// rules in whole; a file that does not check is refused and the old one
// stays. Other settings take effect on a restart.
package main

import (
	"context"
	"crypto/sha256"
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"net/http/pprof"
	"net/netip"
	"os"
	"os/signal"
	"runtime/debug"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/sluice-rl/sluice/proxy"
	"github.com/sluice-rl/sluice/router"
	"github.com/sluice-rl/sluice/router/glob"
)

// version is set at link time (-ldflags "-X main.version=v1.2.3"); without
// it the module version from the build info is used.
var version = ""

func main() {
	// As Redis does: a SIGHUP sent while starting (a reload racing a
	// restart) would otherwise kill sluice by Go's default, before run
	// reaches its handler. signal.Notify turns the handler on over this.
	signal.Ignore(syscall.SIGHUP)
	os.Exit(run(os.Args[1:], os.LookupEnv, os.Stderr))
}

type options struct {
	listen    string
	unix      unixOptions
	cluster   string
	logLevel  string
	logFormat string
	pprof     string
	announce  string
	admin     bool
	replicas  bool
	loops     int
	// The framing limits, Redis's own.
	protoMaxBulkLen  byteSize
	queryBufferLimit byteSize
	maxKeyLen        byteSize
	// flushDelay lets the writer to each shard wait a moment after a write
	// so that concurrent clients' commands share the next one.
	flushDelay     time.Duration
	busyPoll       time.Duration
	busyPollSet    bool // by the command line, the environment or the file
	backendTimeout time.Duration
	forwardTimeout time.Duration
	maxBlocking    int
	fallback       string
	fallbackShare  string
	fallbackKeys   int
	hotThreshold   float64
	hotKeys        string
	hotSplit       int
	hotCooldown    time.Duration
	// Who may connect: the default user's password, ACL users, and
	// whether a sluice open to the network without either may start.
	requirepass   string
	aclfile       string
	protectedMode string
	maxClients    int
	idleTimeout   int // seconds, as Redis's timeout
	shutdown      time.Duration
	metrics       string
	outputLimit   outputLimit
	// config is the file of policies and settings SIGHUP reads again.
	config   string
	policies *proxy.Policies
	// settings are every flag's value as it took effect, by name: a
	// reload compares them to say what needs a restart.
	settings map[string]string
	tls      tlsOptions
	// ignored names the cluster's settings given to a sluice without
	// --cluster, where they change nothing.
	ignored []string
}

// clusterOnly are the settings of the cluster backend and of ordinary
// commands, which the embedded backend does not serve. The TLS and
// authentication ones to the cluster are refused instead (tlsOptions.check).
var clusterOnly = []string{
	"backend-flush-delay", "backend-timeout", "forward-timeout", "max-blocking",
	"fallback", "fallback-share", "fallback-max-keys",
	"hot-threshold", "hot-keys", "hot-split", "hot-cooldown",
	"read-from-replicas", "allow-admin",
}

// newFlagSet defines every setting of sluice on o: its flag, and so its
// SLUICE_ variable and its key in the --config file, which are derived
// from the flag's name.
func newFlagSet(o *options) *flag.FlagSet {
	fs := flag.NewFlagSet("sluice", flag.ContinueOnError)
	// A bad value is said once, by run, not buried under the usage.
	fs.SetOutput(io.Discard)
	fs.StringVar(&o.listen, "listen", "127.0.0.1:6380", "`addresses` to serve RESP on, host:port, several separated by commas or spaces (as Redis's bind 127.0.0.1 ::1)")
	fs.StringVar(&o.unix.path, "unixsocket", "", "`path` of a Unix socket to serve RESP on, beside --listen (as Redis's unixsocket); off when empty")
	fs.StringVar(&o.unix.perm, "unixsocketperm", "0", "the Unix socket's `mode`, in octal (as Redis's unixsocketperm, e.g. 700); 0 leaves it as the umask makes it")
	fs.StringVar(&o.cluster, "cluster", "", "Redis Cluster seed nodes, `host:port[,host:port...]`; empty runs the embedded in-memory backend")
	fs.StringVar(&o.logLevel, "log-level", "info", "log `level`: debug, info, warn or error")
	fs.StringVar(&o.logFormat, "log-format", "console", "log `format`: json or console")
	fs.DurationVar(&o.flushDelay, "backend-flush-delay", 20*time.Microsecond, "pause after each write to a shard so that more clients' commands share the next write (fewer syscalls on both sides, a little latency); 0 disables")
	fs.DurationVar(&o.backendTimeout, "backend-timeout", 50*time.Millisecond, "bound on each call to a shard; a shard that misses it is unhealthy until a probe answers")
	fs.DurationVar(&o.forwardTimeout, "forward-timeout", 10*time.Second, "bound on an ordinary command forwarded to a node; past it the node is taken as hung: its connection is closed and its commands answered an error")
	fs.IntVar(&o.maxBlocking, "max-blocking", 1000, "most blocking commands (BLPOP, XREAD BLOCK, ...) waiting at once, each on a connection of its own to its node")
	fs.StringVar(&o.fallback, "fallback", "local", "`policy` for keys of an unhealthy shard: local (in-process bucket with a share of the limit), open (allow) or closed (deny)")
	fs.StringVar(&o.fallbackShare, "fallback-share", "auto", "share of each limit a local fallback bucket grants: auto (1/number of live sluice instances) or a fraction such as 0.25")
	fs.IntVar(&o.fallbackKeys, "fallback-max-keys", 100000, "most local fallback buckets held at once")
	fs.Float64Var(&o.hotThreshold, "hot-threshold", 2000, "decisions per second of one key on this instance that make it hot: it is split across shards; 0 turns detection off")
	fs.StringVar(&o.hotKeys, "hot-keys", "", "`patterns` of keys split from their first call, comma-separated (Redis glob)")
	fs.IntVar(&o.hotSplit, "hot-split", 0, "sub-buckets of a hot key this instance splits, at most 16; 0 means one per primary (a split made by another instance keeps its own number)")
	fs.DurationVar(&o.hotCooldown, "hot-cooldown", 10*time.Second, "how long a hot key stays under the threshold before it is one bucket again")
	fs.DurationVar(&o.busyPoll, "busy-poll", 200*time.Microsecond, "how long an event loop serving one or two busy clients polls before it sleeps, which spares them the wake-up of a sleeping CPU (tens of µs on a VM) at the cost of that CPU time; at most 1ms, 0 never polls (the default under a CPU quota, which polling would spend)")
	fs.IntVar(&o.loops, "io-loops", 0, "event loops serving clients (Linux); 0 means one per two cores, at least one; -1 serves each client on its own goroutine")
	o.protoMaxBulkLen, o.queryBufferLimit, o.maxKeyLen = 512<<20, 1<<30, 1<<20
	fs.Var(&o.maxKeyLen, "throttle-max-key-len", "longest key THROTTLE, CL.THROTTLE, GCRA and THROTTLE.RESET take (`bytes`, same syntax), at most 1mb; a longer one is answered an error")
	fs.Var(&o.protoMaxBulkLen, "proto-max-bulk-len", "longest argument a client may send, as Redis's proto-max-bulk-len (`bytes`, or with b, k, kb, m, mb, g, gb)")
	fs.Var(&o.queryBufferLimit, "client-query-buffer-limit", "most `bytes` of one command, as Redis's client-query-buffer-limit: a client past it is closed")
	fs.Var((*yesNo)(&o.replicas), "read-from-replicas", "send forwarded read-only commands (GET, MGET, ...) to a replica of their slot's primary; replicas lag, so a read may miss a write just made")
	fs.Var((*yesNo)(&o.admin), "allow-admin", "forward commands that change every primary (FLUSHALL, FLUSHDB, CONFIG SET|RESETSTAT, SCRIPT FLUSH, FUNCTION FLUSH|RESTORE) or read its settings (CONFIG GET); refused without it")
	fs.StringVar(&o.announce, "announce", "", "`host:port` cluster-mode clients are told to connect to (sluice answers CLUSTER SLOTS as one node owning every slot); empty means the address each client connected to")
	fs.StringVar(&o.pprof, "pprof", "", "serve net/http/pprof, but not its cmdline, on this `address` (e.g. 127.0.0.1:6060); off when empty")
	fs.Var(&o.outputLimit, "client-output-buffer-limit", "`\"normal <hard> <soft> <seconds>\"`, as redis.conf: a client whose pending replies pass hard, or stay over soft that long, is closed; 0 is no limit")
	fs.StringVar(&o.metrics, "metrics-listen", "", "serve Prometheus metrics at /metrics, and /healthz and /readyz, on this `address`; off when empty")
	fs.StringVar(&o.requirepass, "requirepass", "", "the default user's `password`: clients AUTH before anything else")
	fs.StringVar(&o.aclfile, "aclfile", "", "`file` of ACL users in Redis's syntax (user <name> on >pass ~keys +commands)")
	fs.DurationVar(&o.shutdown, "shutdown-timeout", 10*time.Second, "on SIGTERM or SIGINT, how long the commands already read may take to be answered before the rest are closed")
	fs.IntVar(&o.idleTimeout, "timeout", 0, "close a client idle for this many `seconds`, as Redis's timeout (subscribers and clients waiting for a reply excepted); 0 never does")
	fs.IntVar(&o.maxClients, "maxclients", 10000, "most clients connected at once; past it a new one is answered \"ERR max number of clients reached\" and closed")
	fs.StringVar(&o.protectedMode, "protected-mode", "yes", "yes refuses to start on a non-loopback --listen (or --tls-listen without required client certificates) without --requirepass or a default user with a password; no allows it")
	fs.StringVar(&o.tls.listen, "tls-listen", "", "`address` to serve RESP over TLS on, beside --listen (an empty --listen serves TLS only); off when empty")
	fs.StringVar(&o.tls.cert, "tls-cert-file", "", "`file` of the PEM certificate served on --tls-listen, and presented to the cluster with --cluster-tls")
	fs.StringVar(&o.tls.key, "tls-key-file", "", "`file` of the PEM private key of --tls-cert-file")
	fs.StringVar(&o.tls.ca, "tls-ca-cert-file", "", "`file` of PEM CA certificates that verify clients' certificates, and the nodes' with --cluster-tls (the system's roots when empty)")
	fs.StringVar(&o.tls.authClients, "tls-auth-clients", "yes", "client certificates on --tls-listen, as Redis's tls-auth-clients: yes (required), optional (verified if presented) or no")
	fs.StringVar(&o.tls.clientCert, "tls-client-cert-file", "", "`file` of the PEM certificate presented to the cluster with --cluster-tls, when not --tls-cert-file")
	fs.StringVar(&o.tls.clientKey, "tls-client-key-file", "", "`file` of the PEM private key of --tls-client-cert-file")
	fs.Var((*yesNo)(&o.tls.cluster), "cluster-tls", "reach the cluster's nodes over TLS (nodes with tls-port), verified with --tls-ca-cert-file")
	fs.StringVar(&o.tls.clusterUser, "cluster-user", "", "ACL `user` sluice authenticates as to the cluster's nodes; empty is the default user")
	fs.StringVar(&o.tls.clusterPassword, "cluster-password", "", "`password` sluice authenticates with to the cluster's nodes (AUTH)")
	fs.StringVar(&o.config, "config", "", "YAML `file` of named policies, the key patterns that select them, and any flag by its name; SIGHUP reloads its policies")
	fs.VisitAll(func(f *flag.Flag) { f.Value = &explained{f.Value} })
	return fs
}

func parseFlags(args []string, lookupenv func(string) (string, bool), stderr io.Writer) (options, error) {
	var o options
	fs := newFlagSet(&o)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			// The values' own types name what each flag takes.
			fs.VisitAll(func(f *flag.Flag) { f.Value = f.Value.(*explained).Value })
			fmt.Fprint(stderr, `sluice is a rate limiter that speaks the Redis protocol, in front of a
Redis Cluster (--cluster) or, without --cluster, on an embedded in-memory
backend. Every flag can also be set as SLUICE_<NAME> (the name in upper
case, - as _), which wins over the command line, and by its name as a key
of the --config file, which the command line wins over.

`)
			fmt.Fprintln(stderr, "Usage of sluice:")
			fs.SetOutput(stderr)
			fs.PrintDefaults()
		}
		return o, err
	}
	if fs.NArg() > 0 {
		return o, fmt.Errorf("unexpected arguments: %v", fs.Args())
	}
	// Precedence: the environment, then the command line, then the file,
	// then the defaults.
	onCommandLine := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { onCommandLine[f.Name] = true })
	// A variable set to nothing counts: SLUICE_LISTEN= turns plain RESP
	// off over a --listen baked into an image.
	env := func(f *flag.Flag) (string, string, bool) {
		name := "SLUICE_" + strings.ToUpper(strings.ReplaceAll(f.Name, "-", "_"))
		v, ok := lookupenv(name)
		return name, v, ok
	}
	if _, v, ok := env(fs.Lookup("config")); ok {
		o.config = v
	}
	if o.config != "" {
		cfg, err := readConfig(o.config, fs)
		if err != nil {
			return o, fmt.Errorf("--config %s: %w", o.config, err)
		}
		for name, v := range cfg.flags {
			// Every value of the file must parse, even one the command
			// line or the environment overrides today: a typo kept
			// quiet would stop sluice the day the override is removed.
			if err := fs.Set(name, v); err != nil {
				return o, fmt.Errorf("--config %s: line %d: %s: %w", o.config, cfg.lines[name], name, err)
			}
		}
		if len(onCommandLine) > 0 {
			// The command line over the file: set its flags again (the
			// environment comes after).
			if err := fs.Parse(args); err != nil {
				return o, err
			}
		}
		o.policies = cfg.policies
	}
	var envErr error
	fs.VisitAll(func(f *flag.Flag) {
		if name, v, ok := env(f); ok && v == "" && (f.Name == "requirepass" || f.Name == "aclfile") && envErr == nil {
			// Set to nothing would turn authentication off over what the
			// command line or the file asks: an unset template variable
			// must not do that.
			envErr = fmt.Errorf("%s is set but empty, which would turn authentication off over --%s and the file: unset it, or give it a value", name, f.Name)
		}
		if name, v, ok := env(f); ok && envErr == nil {
			var err error
			if b, isBool := f.Value.(interface{ IsBoolFlag() bool }); isBool && b.IsBoolFlag() {
				v, err = fileBool(v) // yes and no, as in the file
			}
			if err == nil {
				err = f.Value.Set(v)
			}
			if err != nil {
				envErr = fmt.Errorf("%s: %w", name, err)
			}
		}
	})
	if envErr != nil {
		return o, envErr
	}
	// Redis reads its yes/no settings, and the names its settings take
	// (maxmemory-policy ALLKEYS-LRU), in any case. Before the settings are
	// kept: a reload must not name YES over yes as needing a restart.
	for _, v := range []*string{&o.protectedMode, &o.tls.authClients, &o.fallback, &o.fallbackShare, &o.logFormat, &o.logLevel} {
		*v = strings.ToLower(*v)
	}
	o.settings = map[string]string{}
	fs.VisitAll(func(f *flag.Flag) { o.settings[f.Name] = f.Value.String() })
	// fs.Set marks the command line's and the file's; the environment's
	// are set on the flag itself.
	_, _, o.busyPollSet = env(fs.Lookup("busy-poll"))
	fs.Visit(func(f *flag.Flag) { o.busyPollSet = o.busyPollSet || f.Name == "busy-poll" })
	if o.cluster == "" {
		// Said, not refused: one file may serve a laptop's embedded sluice
		// and the deployment's; kept quiet, a --hot-keys that does nothing
		// would look like one that works.
		given := map[string]bool{}
		fs.Visit(func(f *flag.Flag) { given[f.Name] = true })
		for _, name := range clusterOnly {
			if _, _, inEnv := env(fs.Lookup(name)); given[name] || inEnv {
				o.ignored = append(o.ignored, "--"+name)
			}
		}
	}
	o.settings["hot-keys"] = strings.Join(hotPatterns(o.hotKeys), ",") // as a restart reads them, spaces cut
	if !o.busyPollSet {
		// Under a CPU quota the default is 0 and a value set is kept
		// (busyPollUnder): setting the default's value, or removing it,
		// changes what a restart serves.
		o.settings["busy-poll"] = "unset"
	}
	for _, name := range readAtStart {
		// The file, not only its name: a password revoked in the ACL file
		// or a certificate rotated in place needs a restart too, and a
		// reload must say so.
		if path := o.settings[name]; path != "" {
			b, err := os.ReadFile(path)
			sum := sha256.Sum256(b)
			o.settings[name] = fmt.Sprintf("%s %x %v", path, sum[:8], err)
		}
	}
	o.listen = strings.Join(o.listenAddrs(), ",")
	o.settings["listen"] = o.listen // as a restart reads it, spaces cut
	if err := o.tls.check(o.listen, o.unix.path, o.cluster); err != nil {
		return o, err
	}
	if err := o.unix.check(); err != nil {
		return o, err
	}
	type listenFlag struct{ flag, addr string }
	var ls []listenFlag
	for _, addr := range o.listenAddrs() {
		ls = append(ls, listenFlag{"--listen", addr})
	}
	if o.tls.listen != "" {
		ls = append(ls, listenFlag{"--tls-listen", o.tls.listen})
	}
	for i, l := range ls {
		// Said here, by its name: protected mode would take an address
		// without a port for one reachable from other hosts.
		if _, port, err := net.SplitHostPort(l.addr); err != nil || !listenPort(port) {
			return o, fmt.Errorf("%s must be host:port (a port in 0-65535, 0 for any free one), not %q%s", l.flag, l.addr, bracketsHint(l.addr))
		}
		// A second listener on the same address would fail only once
		// the cluster has been waited for.
		for _, m := range ls[:i] {
			if m.addr == l.addr && !strings.HasSuffix(l.addr, ":0") {
				return o, fmt.Errorf("%s names %s twice", l.flag, l.addr)
			}
		}
	}
	if o.cluster != "" {
		// A seed that is no address is a mistake in the deployment: taken,
		// sluice would start and answer by the fallback policy for ever.
		seeds := strings.Split(o.cluster, ",")
		for i, seed := range seeds {
			seeds[i] = strings.TrimSpace(seed) // "a:1, b:2", as lists are written
			if _, port, err := net.SplitHostPort(seeds[i]); err != nil || !validPort(port) {
				return o, fmt.Errorf("--cluster must be host:port[,host:port...], not %q%s", o.cluster, bracketsHint(seeds[i]))
			}
		}
		o.cluster = strings.Join(seeds, ",")
		o.settings["cluster"] = o.cluster // as a restart reads it, spaces cut
	}
	if o.announce != "" {
		if err := proxy.CheckAnnounce(o.announce); err != nil {
			return o, fmt.Errorf("--announce must be host:port (a port in 1-65535, a host that is an IP address or a name of letters, digits, '-' and '.'), not %q%s", o.announce, bracketsHint(o.announce))
		}
	}
	if o.fallbackShare != "auto" {
		if f, err := strconv.ParseFloat(o.fallbackShare, 64); err != nil || !(f > 0 && f <= 1) { // NaN too
			return o, fmt.Errorf("--fallback-share must be auto or a fraction in (0, 1], not %q", o.fallbackShare)
		} else {
			o.settings["fallback-share"] = strconv.FormatFloat(f, 'g', -1, 64) // as a restart reads it: .5 is 0.5
		}
	}
	if _, err := router.ParsePolicy(o.fallback); err != nil {
		return o, fmt.Errorf("--fallback must be local, open or closed, not %q", o.fallback)
	}
	for _, f := range []struct {
		name string
		bad  bool
	}{
		{"--backend-timeout", o.backendTimeout <= 0},
		{"--forward-timeout", o.forwardTimeout <= 0},
		{"--fallback-max-keys", o.fallbackKeys <= 0},
		{"--hot-cooldown", o.hotCooldown <= 0},
		{"--max-blocking", o.maxBlocking <= 0},
	} {
		if f.bad {
			return o, errors.New(f.name + " must be positive")
		}
	}
	if o.fallbackKeys < 64 {
		// The buckets are held in 64 shards, a cap for each.
		return o, errors.New("--fallback-max-keys must be at least 64")
	}
	if !(o.hotThreshold >= 0) {
		return o, errors.New("--hot-threshold must be 0 (off) or more")
	}
	if o.hotSplit < 0 || o.hotSplit > router.MaxSplit {
		return o, fmt.Errorf("--hot-split must be from 0 to %d", router.MaxSplit)
	}
	if o.flushDelay < 0 {
		return o, errors.New("--backend-flush-delay must be 0 or more")
	}
	if o.busyPoll < 0 || o.busyPoll > time.Millisecond {
		return o, errors.New("--busy-poll must be from 0 to 1ms")
	}
	if o.loops < -1 || o.loops > maxLoops {
		return o, fmt.Errorf("--io-loops must be -1, 0 or up to %d", maxLoops)
	}
	if o.maxKeyLen < 1 || o.maxKeyLen > 1<<20 {
		return o, errors.New("--throttle-max-key-len must be from 1 byte to 1mb")
	}
	if o.protoMaxBulkLen < 1<<20 || o.queryBufferLimit < 1<<20 {
		return o, errors.New("--proto-max-bulk-len and --client-query-buffer-limit must be at least 1mb, as in Redis")
	}
	if o.maxClients <= 0 {
		return o, errors.New("--maxclients must be at least 1")
	}
	if o.shutdown <= 0 {
		return o, errors.New("--shutdown-timeout must be positive")
	}
	if o.idleTimeout < 0 {
		return o, errors.New("--timeout must be 0 (never) or more")
	}
	if o.idleTimeout > math.MaxInt32 {
		// Redis's bound; past 2^63 ns the duration would wrap.
		return o, fmt.Errorf("--timeout must be at most %d seconds, as in Redis", math.MaxInt32)
	}
	if o.protectedMode != "yes" && o.protectedMode != "no" {
		return o, fmt.Errorf("--protected-mode must be yes or no, not %q", o.protectedMode)
	}
	// Not zapcore.ParseLevel alone: it takes "" as info, and dpanic,
	// panic and fatal, levels whose logging would stop sluice.
	switch strings.ToLower(o.logLevel) {
	case "debug", "info", "warn", "error":
	default:
		return o, fmt.Errorf("--log-level must be debug, info, warn or error, not %q", o.logLevel)
	}
	if o.logFormat != "json" && o.logFormat != "console" {
		return o, fmt.Errorf("--log-format must be json or console, not %q", o.logFormat)
	}
	return o, nil
}

// httpServer serves h with bounds on a connection that sends no request
// (http.Serve has none): each such connection holds a goroutine. Writes
// are not bounded: a CPU profile takes its seconds to answer.
func httpServer(h http.Handler) *http.Server {
	return &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 2 * time.Minute}
}

// serveHTTP serves h on ln until ln is closed, as sluice stops (its
// servers are never shut down, so that is the net.ErrClosed Serve
// returns). Any other error has ended the server, and /metrics, /healthz
// and /readyz with it for metrics: said, not left to a probe timing out.
func serveHTTP(log *zap.Logger, what string, h http.Handler, ln net.Listener) {
	if err := httpServer(h).Serve(ln); !errors.Is(err, net.ErrClosed) {
		log.Error("stopped serving "+what, zap.String("addr", ln.Addr().String()), zap.Error(err))
	}
}

// pprofMux serves net/http/pprof's profiles but not its
// /debug/pprof/cmdline, which would give anyone who reaches --pprof the
// command line: --requirepass and --cluster-password with it. (The
// default mux is not served: net/http/pprof registers cmdline there.)
func pprofMux() *http.ServeMux {
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index) // cmdline, not a profile: 404
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	return mux
}

// metricsMux serves Prometheus's /metrics, /healthz (the process is up)
// and /readyz (serving: the cluster answered, or, by the policy, the
// fallback decides its keys; not while shutting down).
func metricsMux(srv *proxy.Server, ready *atomic.Bool) *http.ServeMux {
	mux := http.NewServeMux()
	mux.Handle("/metrics", srv.MetricsHandler())
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "ok\n") })
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, _ *http.Request) {
		if !ready.Load() {
			http.Error(w, "not serving", http.StatusServiceUnavailable)
			return
		}
		io.WriteString(w, "ready\n")
	})
	return mux
}

// loadUsers reads the ACL users, or nil when no client need authenticate;
// it refuses a sluice open to the network to anyone (protected mode, as
// in Redis).
func loadUsers(o options) (*proxy.Users, error) {
	var users *proxy.Users
	if o.requirepass != "" || o.aclfile != "" {
		var text []byte
		if o.aclfile != "" {
			var err error
			if text, err = os.ReadFile(o.aclfile); err != nil {
				return nil, fmt.Errorf("--aclfile: %w", err)
			}
		}
		var err error
		if users, err = proxy.ParseUsers(string(text), o.requirepass); err != nil {
			return nil, fmt.Errorf("--aclfile: %w", err)
		}
	}
	if addr := exposed(o); o.protectedMode == "yes" && (users == nil || !users.AuthRequired()) && addr != "" {
		return nil, fmt.Errorf("protected mode: %s is reachable from other hosts, and no password is set: anyone could THROTTLE.RESET any bucket. "+
			"Set --requirepass (or a default user with a password in --aclfile), listen on a loopback address, or pass --protected-mode no", addr)
	}
	return users, nil
}

// reportUnknownACL logs the ACL rules that match no command sluice checks
// (proxy.Users.UnknownCommands), once the cluster's command table is read:
// Redis refuses most such rules at load, but sluice may start before the
// cluster answers.
func reportUnknownACL(ctx context.Context, log *zap.Logger, users *proxy.Users, c *router.Cluster) {
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for c.Commands() == nil {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
	for _, name := range users.UnknownCommands(c.Commands()) {
		log.Error("an ACL rule matches no command sluice checks: it allows or denies nothing",
			zap.String("command", name))
	}
}

// lookupIP resolves a --listen host name: tests give names that this
// host's /etc/hosts lacks.
var lookupIP = net.DefaultResolver.LookupNetIP

// loopback reports whether addr listens on a loopback address only.
func loopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	if ip := net.ParseIP(host); ip != nil {
		return ip.IsLoopback()
	}
	// Go listens on one of a name's addresses: the name is loopback if
	// each is, as Debian's ip6-localhost and Red Hat's localhost6 (::1).
	// One that does not resolve counts as reachable: listening fails then.
	ips, err := lookupIP(context.Background(), "ip", host)
	if err != nil || len(ips) == 0 {
		return false
	}
	for _, ip := range ips {
		if !ip.Unmap().IsLoopback() {
			return false
		}
	}
	return true
}

// validPort reports whether port is one a seed node can be dialled on: a
// number from 1 to 65535, or a service name the system knows.
func validPort(port string) bool {
	p, err := net.LookupPort("tcp", port)
	return err == nil && p > 0
}

// listenPort reports whether port is one to listen on: a number from 0
// to 65535, or a service name the system knows.
func listenPort(port string) bool {
	_, err := net.LookupPort("tcp", port)
	return err == nil
}

// maxLoops bounds --io-loops: each loop is a goroutine and an epoll
// instance, and a loop per core is already the default.
const maxLoops = 1024

func newLogger(o options, w io.Writer) (*zap.Logger, error) {
	level, err := zapcore.ParseLevel(o.logLevel)
	if err != nil {
		return nil, fmt.Errorf("--log-level: %w", err)
	}
	enc := zap.NewProductionEncoderConfig()
	enc.EncodeTime = zapcore.ISO8601TimeEncoder
	var encoder zapcore.Encoder
	if o.logFormat == "json" {
		encoder = zapcore.NewJSONEncoder(enc)
	} else {
		enc.EncodeLevel = zapcore.CapitalLevelEncoder
		// For a reader: "after": "3.6s", where a bare 3.6 names no unit.
		enc.EncodeDuration = zapcore.StringDurationEncoder
		encoder = zapcore.NewConsoleEncoder(enc)
	}
	return zap.New(zapcore.NewCore(encoder, zapcore.AddSync(w), level)), nil
}

// bracketsHint is what to say of addr when it is an IPv6 address and a
// port without brackets, as Redis writes them (CLUSTER NODES, MOVED,
// redis-cli --cluster create): "::1:7000" is no host:port to Go.
func bracketsHint(addr string) string {
	i := strings.LastIndexByte(addr, ':')
	if i < 0 || strings.HasPrefix(addr, "[") {
		return ""
	}
	// netip: a link-local address has a zone (fe80::1%eth0). A last part
	// that is no port is an address without one: bracketed, it would be
	// refused in turn.
	if ip, err := netip.ParseAddr(addr[:i]); err != nil || ip.Is4() || addr[i+1:] == "" || !listenPort(addr[i+1:]) {
		return ""
	}
	return fmt.Sprintf(": an IPv6 address goes in brackets, %s", net.JoinHostPort(addr[:i], addr[i+1:]))
}

// notSettings are SLUICE_ variables that are not settings: the tests'.
var notSettings = map[string]bool{"SLUICE_REQUIRE_REDIS": true}

// strayEnv names the variables of environ that look like settings
// (SLUICE_...) but name none of settings, sorted. Why: a misspelt
// SLUICE_LISTN is otherwise ignored without a word, where a misspelt flag
// or file key stops sluice.
func strayEnv(environ []string, settings map[string]string) []string {
	read := map[string]bool{}
	for name := range settings {
		read["SLUICE_"+strings.ToUpper(strings.ReplaceAll(name, "-", "_"))] = true
	}
	var stray []string
	for _, kv := range environ {
		name, _, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(name, "SLUICE_") && !read[name] && !notSettings[name] {
			stray = append(stray, name)
		}
	}
	slices.Sort(stray)
	return stray
}

func run(args []string, lookupenv func(string) (string, bool), stderr io.Writer) int {
	o, err := parseFlags(args, lookupenv, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintln(stderr, "sluice:", err)
		return 2
	}
	users, err := loadUsers(o)
	if err != nil {
		fmt.Fprintln(stderr, "sluice:", err)
		return 2
	}
	log, err := newLogger(o, stderr)
	if err != nil {
		fmt.Fprintln(stderr, "sluice:", err)
		return 2
	}
	defer log.Sync()
	if len(o.ignored) > 0 {
		log.Warn("settings of the cluster backend are ignored without --cluster", zap.Strings("settings", o.ignored))
	}
	if names := strayEnv(os.Environ(), o.settings); len(names) > 0 {
		log.Warn("SLUICE_ variables that name no setting are ignored: misspelt?", zap.Strings("variables", names))
	}
	if o.cluster == "" && users != nil {
		// The embedded backend's commands are all sluice's and known now,
		// so a misspelt rule (+throtle) is told at start; a rule for an
		// ordinary command is told too, since here it allows nothing.
		if names := users.UnknownCommands(nil); len(names) > 0 {
			log.Warn("ACL rules name commands the embedded backend does not have: they allow or deny nothing without --cluster", zap.Strings("commands", names))
		}
	}
	reserve := 0
	if o.cluster != "" {
		reserve = o.maxBlocking // each blocking command waits on a connection of its own
	}
	if o.maxClients, err = fitMaxClients(o.maxClients, reserve, log); err != nil {
		log.Error("cannot serve --maxclients", zap.Error(err))
		return 1
	}

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)

	// Read before the cluster is waited for: a missing or bad certificate
	// is said at once, not after the wait and the other listeners.
	var serverTLS *tls.Config
	if o.tls.listen != "" {
		if serverTLS, err = o.tls.serverTLS(); err != nil {
			log.Error("cannot serve TLS", zap.Error(err))
			return 1
		}
	}

	var decider proxy.Decider
	var forwarder proxy.Forwarder // the cluster's, for ordinary commands
	backend := "embedded"
	if o.cluster == "" {
		decider = router.NewMemory(0)
	} else {
		backend = "cluster"
		clusterTLS, warning, err := o.tls.clusterTLS(time.Now())
		if err != nil {
			log.Error("cannot reach the cluster with TLS", zap.Error(err))
			return 1
		}
		if warning != "" {
			log.Warn(warning)
		}
		policy, _ := router.ParsePolicy(o.fallback)
		share, _ := strconv.ParseFloat(o.fallbackShare, 64) // "auto" leaves 0
		c := router.NewCluster(router.ClusterConfig{
			Seeds:            strings.Split(o.cluster, ","),
			Timeout:          o.backendTimeout,
			ForwardTimeout:   o.forwardTimeout,
			MaxBlocking:      o.maxBlocking,
			ReadFromReplicas: o.replicas,
			Fallback:         policy,
			Share:            share,
			MaxLocalKeys:     o.fallbackKeys,
			HotThreshold:     hotThreshold(o.hotThreshold),
			HotKeys:          hotPatterns(o.hotKeys),
			HotSplit:         o.hotSplit,
			HotCooldown:      o.hotCooldown,
			FlushDelay:       o.flushDelay,
			Logger:           log,
			TLS:              clusterTLS,
			Username:         o.tls.clusterUser,
			Password:         o.tls.clusterPassword,
		})
		defer c.Close()
		decider, forwarder = c, c
		// Serve cluster decisions from the first request when the cluster
		// is up; when it is not, serve by the fallback policy meanwhile.
		wctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		err = c.WaitConnected(wctx)
		if ctx.Err() != nil {
			// SIGTERM or SIGINT ended the wait: nothing is served yet,
			// so nothing is owed. The cluster was not found unreachable,
			// and "sluice started" would not be true.
			cancel()
			log.Info("sluice stopped before serving: signalled while waiting for the cluster")
			return 0
		}
		if err != nil {
			fields := []zap.Field{zap.String("cluster", o.cluster), zap.String("fallback", o.fallback), zap.Error(err)}
			if hint := o.tls.resetHint(clusterTLS); hint != "" && resetAtConnect(err) {
				fields = append(fields, zap.String("hint", hint))
			}
			log.Warn("cluster not reachable yet: answering by the fallback policy until it is", fields...)
		}
		cancel()
	}

	if o.pprof != "" {
		pln, err := listen(o.pprof)
		if err != nil {
			log.Error("cannot listen for pprof", zap.Error(err))
			return 1
		}
		defer pln.Close()
		go serveHTTP(log, "pprof", pprofMux(), pln)
		log.Info("pprof listening", zap.String("addr", pln.Addr().String()))
	}

	// Listened on before the start is logged: a start that fails here
	// must not have said "sluice started".
	var mln net.Listener
	if o.metrics != "" {
		if mln, err = listen(o.metrics); err != nil {
			log.Error("cannot listen for metrics", zap.Error(err))
			return 1
		}
		defer mln.Close()
	}
	lns, err := listeners(o, serverTLS)
	if err != nil {
		log.Error("cannot listen", zap.Error(err))
		return 1
	}
	busyPoll, quota := busyPollUnder(o, os.DirFS("/"))
	if busyPoll != o.busyPoll {
		log.Info("busy polling is off by default under a CPU quota, which it would spend; --busy-poll sets it anyway", zap.Float64("cpu_quota_cores", quota))
	}
	srv := proxy.New(proxy.Config{Decider: decider, Forwarder: forwarder, Backend: backend, Version: buildVersion(),
		Logger: log, Loops: o.loops, BusyPoll: busyPoll, Announce: o.announce, AllowAdmin: o.admin, Users: users, MaxClients: o.maxClients,
		IdleTimeout: time.Duration(o.idleTimeout) * time.Second, OutputLimit: proxy.OutputLimit(o.outputLimit),
		MaxBulkLen: int64(o.protoMaxBulkLen), QueryBufferLimit: int64(o.queryBufferLimit), MaxKeyLen: int(o.maxKeyLen), Policies: o.policies})
	plain, secure := servedAddrs(o, lns)
	fields := []zap.Field{zap.String("listen", plain), zap.String("tls_listen", secure), zap.String("unixsocket", o.unix.path), zap.String("backend", backend)}
	if o.cluster != "" {
		// Without a cluster the fallback is ignored (said above): named
		// here, it would read as in force.
		fields = append(fields, zap.String("cluster", o.cluster), zap.String("fallback", o.fallback))
	}
	log.Info("sluice started", append(fields, zap.String("config", o.config), zap.String("version", buildVersion()))...)

	var ready atomic.Bool // serving: the cluster answered, or its keys go to the fallback
	if mln != nil {
		go serveHTTP(log, "metrics", metricsMux(srv, &ready), mln)
		log.Info("metrics listening", zap.String("addr", mln.Addr().String()))
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(lns...) }()
	ready.Store(true)
	if cluster, ok := forwarder.(*router.Cluster); ok && users != nil {
		go reportUnknownACL(ctx, log, users, cluster)
	}
	for serving := true; serving; {
		select {
		case err = <-served:
			log.Error("serving failed", zap.Error(err))
			return 1
		case <-hup:
			reload(log, srv, o, args, lookupenv)
		case <-ctx.Done():
			serving = false
		}
	}
	// SIGTERM: no more clients; what was read is answered, within
	// --shutdown-timeout; then the cluster's connections close (deferred).
	// A second SIGINT (Ctrl+C again) exits at once, as Redis's "You
	// insist... exiting now" does; a second SIGTERM changes nothing, as in
	// Redis: a supervisor's next step is SIGKILL.
	insist := make(chan os.Signal, 1)
	signal.Notify(insist, syscall.SIGINT)
	defer signal.Stop(insist)
	start := time.Now()
	ready.Store(false)
	log.Info("shutting down", zap.Duration("shutdown_timeout", o.shutdown))
	sctx, cancel := context.WithTimeout(context.Background(), o.shutdown)
	defer cancel()
	shut := make(chan error, 1)
	go func() {
		err := srv.Shutdown(sctx)
		<-served
		shut <- err
	}()
	select {
	case err := <-shut:
		if err != nil {
			log.Warn("shutdown timed out: closed the clients still connected, with any replies they had not yet taken", zap.Duration("shutdown_timeout", o.shutdown))
		}
	case <-insist:
		log.Warn("SIGINT again: exiting now, without the replies still owed")
		return 1
	}
	log.Info("sluice stopped", zap.Duration("took", time.Since(start)))
	return 0
}

// reload reads the --config file again (SIGHUP), with the same command
// line and environment: its policies and key rules replace the server's
// whole. Every other setting is read at start only; those the file
// changed are named, to be applied by a restart. A file that does not
// check changes nothing, and is one log line.
func reload(log *zap.Logger, srv *proxy.Server, running options, args []string, lookupenv func(string) (string, bool)) {
	if running.config == "" {
		log.Warn("SIGHUP: no --config to reload")
		return
	}
	o, err := parseFlags(args, lookupenv, io.Discard)
	if err == nil {
		// What stops a start stops a reload: restart_needed must not ask
		// for a restart that would exit with status 2.
		_, err = loadUsers(o)
	}
	if err != nil {
		log.Error("config not reloaded: keeping the one in force", zap.Error(err))
		return
	}
	old := srv.SetPolicies(o.policies)
	var restart []string
	for name, v := range o.settings {
		if running.settings[name] != v {
			restart = append(restart, name)
		}
	}
	sort.Strings(restart)
	n, rules := o.policies.Len()
	fields := []zap.Field{zap.String("config", o.config), zap.Int("policies", n), zap.Int("key_rules", rules)}
	if len(restart) > 0 {
		fields = append(fields, zap.Strings("restart_needed", restart))
	}
	if was, wasRules := old.Len(); n+rules == 0 && was+wasRules > 0 {
		// A file read empty (rewritten in place, caught half written) is
		// a valid config without policies: said loudly, since every
		// THROTTLE without a limit of its own is refused from now on.
		log.Warn("config reloaded without policies: THROTTLE needs its limit in the command until the next reload",
			append(fields, zap.Int("policies_before", was), zap.Int("key_rules_before", wasRules))...)
		return
	}
	if len(restart) > 0 {
		log.Warn("config reloaded", fields...)
		return
	}
	log.Info("config reloaded", fields...)
}

// readAtStart are the settings that name files sluice reads once, at
// start.
var readAtStart = []string{"aclfile", "tls-cert-file", "tls-key-file", "tls-ca-cert-file", "tls-client-cert-file", "tls-client-key-file"}

// hotThreshold maps the flag's 0 (off) to the router's negative.
func hotThreshold(f float64) float64 {
	if f == 0 {
		return -1
	}
	return f
}

// hotPatterns are the --hot-keys patterns, cut at the commas that are not
// in a class or escaped ("user[,;]*" is one pattern).
func hotPatterns(s string) []string {
	var out []string
	for _, p := range glob.Split(s, ',') {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

func buildVersion() string {
	if version != "" {
		return version
	}
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		return bi.Main.Version
	}
	return "dev"
}

// resetAtConnect reports whether err is a node closing the connection
// sluice opened (reset, or closed before answering).
func resetAtConnect(err error) bool {
	return errors.Is(err, syscall.ECONNRESET) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF)
}
