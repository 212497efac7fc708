package proxy

import (
	"fmt"
	"net"
	"os"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/sluice-rl/sluice/router"
)

// infoSections are INFO's sections in the order "INFO" and "INFO all" list
// them. As in Redis, a plain INFO (or "default") leaves the extra ones
// out: "all", "everything" or their names ask for them.
var infoSections = []struct {
	name, title string
	write       func(s *Server, b *strings.Builder)
	extra       bool
}{
	{"server", "Server", (*Server).infoServer, false},
	{"clients", "Clients", (*Server).infoClients, false},
	{"stats", "Stats", (*Server).infoStats, false},
	{"policies", "Policies", (*Server).infoPolicies, false},
	{"memory", "Memory", (*Server).infoMemory, false},
	{"backend", "Backend", (*Server).infoBackend, false},
	{"replication", "Replication", (*Server).infoReplication, false},
	{"cpu", "CPU", (*Server).infoCPU, false},
	{"commandstats", "Commandstats", func(s *Server, b *strings.Builder) { s.cmdStats.write(b) }, true},
	{"errorstats", "Errorstats", func(s *Server, b *strings.Builder) { s.stats.errors.write(b) }, false},
	{"latencystats", "Latencystats", func(s *Server, b *strings.Builder) { s.cmdStats.writeLatencies(b) }, true},
	{"cluster", "Cluster", (*Server).infoCluster, false},
}

// infoReplication says sluice is a primary, as HELLO's role does: tools
// that read role: from INFO replication before they write (health checks,
// clients that look for a primary) find one.
func (s *Server) infoReplication(b *strings.Builder) {
	b.WriteString("role:master\r\nconnected_slaves:0\r\n")
}

// infoCluster says sluice is a cluster node, as its CLUSTER replies do
// (a one-node cluster that owns every slot): cluster clients such as
// redis-py's RedisCluster check it before they start.
func (s *Server) infoCluster(b *strings.Builder) {
	b.WriteString("cluster_enabled:1\r\n")
}

func cmdInfo(s *Server, _ *client, conn respConn, args [][]byte) {
	text := s.infoText(args)
	// No primary to count keys on (forwardInfo): Redis with no keys still
	// gives the section, a bare header.
	if want, all := infoWants(args); all || want["keyspace"] {
		if text != "" {
			text += "\r\n"
		}
		text += "# Keyspace\r\n"
	}
	conn.WriteVerbatim(text)
}

// infoWants reports which sections INFO args ask for, and whether all.
func infoWants(args [][]byte) (map[string]bool, bool) {
	want := map[string]bool{}
	for _, a := range args[1:] {
		want[strings.ToLower(string(a))] = true
	}
	return want, len(want) == 0 || want["all"] || want["default"] || want["everything"]
}

// infoText is sluice's own sections of INFO args.
func (s *Server) infoText(args [][]byte) string {
	want, all := infoWants(args)
	every := want["all"] || want["everything"]
	var b strings.Builder
	for _, sec := range infoSections {
		if !want[sec.name] && !(all && (!sec.extra || every)) {
			continue
		}
		if b.Len() > 0 {
			b.WriteString("\r\n")
		}
		fmt.Fprintf(&b, "# %s\r\n", sec.title)
		sec.write(s, &b)
	}
	return b.String()
}

// redisVersion is the Redis version sluice reports, in INFO's
// redis_version and HELLO's version: clients gate features on it (rueidis
// reads HELLO's, and below 7 leaves a pooled connection's shard
// subscriptions in place), and sluice speaks Redis 7's protocol for the
// commands it has. Its own version is INFO's sluice_version.
const redisVersion = "7.0.0"

func (s *Server) infoServer(b *strings.Builder) {
	// 0 when no TCP port is served (a Unix socket alone), as Redis's
	// port 0.
	port := 0
	if a, ok := s.Addr().(*net.TCPAddr); ok {
		port = a.Port
	}
	up := time.Since(s.start)
	fmt.Fprintf(b, "sluice_version:%s\r\n", s.cfg.Version)
	fmt.Fprintf(b, "redis_version:%s\r\n", redisVersion)
	fmt.Fprintf(b, "redis_mode:cluster\r\n")
	fmt.Fprintf(b, "backend:%s\r\n", s.cfg.Backend)
	fmt.Fprintf(b, "go_version:%s\r\n", runtime.Version())
	fmt.Fprintf(b, "process_id:%d\r\n", os.Getpid())
	fmt.Fprintf(b, "tcp_port:%d\r\n", port)
	// 0: each client on its own goroutine.
	loops, polling := s.ioLoops()
	fmt.Fprintf(b, "io_loops:%d\r\n", loops)
	// What the loops poll before they sleep: 0 when they do not.
	fmt.Fprintf(b, "busy_poll_us:%d\r\n", polling.Microseconds())
	fmt.Fprintf(b, "goroutines:%d\r\n", runtime.NumGoroutine())
	fmt.Fprintf(b, "uptime_in_seconds:%d\r\n", int64(up.Seconds()))
	fmt.Fprintf(b, "uptime_in_days:%d\r\n", int64(up.Hours()/24))
}

func (s *Server) infoClients(b *strings.Builder) {
	fmt.Fprintf(b, "connected_clients:%d\r\n", s.stats.connected.Load())
	fmt.Fprintf(b, "maxclients:%d\r\n", s.cfg.MaxClients)
	blocked := s.clients.list(func(v *clientView) bool { return v.waiting() })
	fmt.Fprintf(b, "blocked_clients:%d\r\n", len(blocked))
}

func (s *Server) infoStats(b *strings.Builder) {
	st := &s.stats
	fmt.Fprintf(b, "total_connections_received:%d\r\n", st.connections.Load()-st.since.connections.Load())
	fmt.Fprintf(b, "rejected_connections:%d\r\n", st.rejected.Load()-st.since.rejected.Load())
	// Less the INFO being answered, counted when it was read: Redis counts
	// a command once it has run, so its count leaves that INFO out.
	fmt.Fprintf(b, "total_commands_processed:%d\r\n", st.commands.Load()-st.since.commands.Load()-1)
	fmt.Fprintf(b, "instantaneous_ops_per_sec:%d\r\n", st.ops.perSecond())
	fmt.Fprintf(b, "total_error_replies:%d\r\n", st.errors.total.Load()-st.since.errors.Load())
	fmt.Fprintf(b, "throttle_allowed:%d\r\n", st.allowed.Load()-st.since.allowed.Load())
	fmt.Fprintf(b, "throttle_limited:%d\r\n", st.limited.Load()-st.since.limited.Load())
	fmt.Fprintf(b, "throttle_shadow_limited:%d\r\n", st.shadowLimited.Load()-st.since.shadowLimited.Load())
}

// infoPolicies lists the policies in force, each with its decisions as
// the bucket made them: a shadow policy's limited were allowed, and say
// what enforcing it would deny.
func (s *Server) infoPolicies(b *strings.Builder) {
	p := s.policies.Load()
	n, rules := p.Len()
	fmt.Fprintf(b, "policies:%d\r\n", n)
	fmt.Fprintf(b, "key_rules:%d\r\n", rules)
	if p == nil {
		return
	}
	for _, name := range sortedKeys(p.byName) {
		pol := p.byName[name]
		var allowed, limited int64
		for src := range pol.counts.decisions {
			allowed += pol.counts.decisions[src][0].Load()
			limited += pol.counts.decisions[src][1].Load()
		}
		fmt.Fprintf(b, "policy_%s:capacity=%d,refill=%d,period_us=%d,shadow=%d,allowed=%d,limited=%d\r\n",
			name, pol.limit.Capacity, pol.limit.Refill, pol.limit.Period, btoi(pol.shadow), allowed, limited)
	}
}

// statser is a Decider that reports its state, for INFO.
type statser interface {
	Stats() router.Stats
}

func (s *Server) infoBackend(b *strings.Builder) {
	fmt.Fprintf(b, "backend:%s\r\n", s.cfg.Backend)
	if st, ok := s.cfg.Decider.(statser); ok {
		writeStats(b, st.Stats())
	}
}

// writeStats renders a backend's state as INFO lines.
func writeStats(b *strings.Builder, st router.Stats) {
	if m := st.Embedded; m != nil {
		fmt.Fprintf(b, "embedded_buckets:%d\r\n", m.Buckets)
	}
	c := st.Cluster
	if c == nil {
		return
	}
	fmt.Fprintf(b, "cluster_connected:%d\r\n", boolInt(c.Connected))
	fmt.Fprintf(b, "fallback_policy:%s\r\n", c.Fallback)
	fmt.Fprintf(b, "fallback_share:%.4f\r\n", c.Share)
	fmt.Fprintf(b, "sluice_instances:%d\r\n", c.Instances)
	fmt.Fprintf(b, "local_buckets:%d\r\n", c.LocalBuckets)
	for src, n := range c.Decisions {
		if router.Source(src) != router.SourceEmbedded {
			fmt.Fprintf(b, "decisions_%s:%d\r\n", router.Source(src), n)
		}
	}
	fmt.Fprintf(b, "decisions_split:%d\r\n", c.Split)
	fmt.Fprintf(b, "decisions_split_denied_here:%d\r\n", c.DeniedHere)
	for i, sh := range c.Shards {
		state := "healthy"
		if !sh.Healthy {
			state = "unhealthy"
		}
		fmt.Fprintf(b, "shard%d:addr=%s,state=%s,since=%s,errors=%d,last_error=%s\r\n", i, sh.Addr, state,
			sh.Since.UTC().Format(time.RFC3339), sh.Errors, strings.NewReplacer(",", ";", "=", `\x3d`, "\r", " ", "\n", " ").Replace(sh.LastError))
	}
	// Detection off is negative in the router, 0 in --hot-threshold.
	fmt.Fprintf(b, "hot_threshold:%s\r\n", strconv.FormatFloat(max(c.HotThreshold, 0), 'f', -1, 64))
	fmt.Fprintf(b, "hot_keys:%d\r\n", c.HotKeys)
	for i, hk := range c.Hot {
		held := 0
		if hk.Held {
			held = 1
		}
		fmt.Fprintf(b, "hot%d:key=%s,state=%s,split=%d,rate=%.0f,split_ms_left=%d,held=%d\r\n",
			i, infoValue(hk.Key), hk.State, hk.SubBuckets, hk.Rate, hk.SplitLeft.Milliseconds(), held)
	}
}

// infoValue keeps a caller's key from breaking an INFO line, or the
// field it is in: parsers split a value at ',' into items and each item at
// its last '=' (redis-py's info()), so both are escaped.
func infoValue(s string) string {
	q := fmt.Sprintf("%q", s)
	return strings.NewReplacer(",", `\x2c`, "=", `\x3d`).Replace(q[1 : len(q)-1])
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// infoMemory reports the Go heap and the process's resident set, the
// figure that sizes a deployment.
func (s *Server) infoMemory(b *strings.Builder) {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	fmt.Fprintf(b, "used_memory:%d\r\n", ms.HeapAlloc)
	fmt.Fprintf(b, "used_memory_sys:%d\r\n", ms.Sys)
	if rss, ok := residentBytes(); ok {
		fmt.Fprintf(b, "used_memory_rss:%d\r\n", rss)
	}
}

// residentBytes reads the resident set size from /proc (Linux only).
func residentBytes() (int64, bool) {
	statm, err := os.ReadFile("/proc/self/statm")
	if err != nil {
		return 0, false
	}
	fields := strings.Fields(string(statm))
	if len(fields) < 2 {
		return 0, false
	}
	pages, err := strconv.ParseInt(fields[1], 10, 64)
	if err != nil {
		return 0, false
	}
	return pages * int64(os.Getpagesize()), true
}

// infoCPU reports the process's CPU time as Redis does, so a benchmark can
// set sluice's cost per decision beside the shards'.
func (s *Server) infoCPU(b *strings.Builder) {
	sys, user, ok := processCPU()
	if !ok {
		return
	}
	fmt.Fprintf(b, "used_cpu_sys:%.6f\r\n", sys.Seconds())
	fmt.Fprintf(b, "used_cpu_user:%.6f\r\n", user.Seconds())
}

// With a cluster behind it, INFO's Keyspace section sums the primaries'
// (each asked INFO keyspace), after sluice's own sections; when Memory is
// asked too, it adds the primaries' maxmemory_policy, which says whether
// the cluster may evict keys (job queues such as BullMQ and Sidekiq read
// it from a plain INFO to warn that an evicting policy loses their data;
// sluice's own memory lines are its process's). INFO memory alone stays
// sluice's, answered at once: a health check that asks for it must not
// wait on a hung primary, as no node's INFO waits on another.

// forwardInfo queues INFO for every primary when it asks for the
// keyspace; it reports false when sluice answers it alone.
func (s *Server) forwardInfo(c *client, r *round, args [][]byte) bool {
	want, all := infoWants(args)
	primaries := s.cfg.Forwarder.Primaries()
	if (!all && !want["keyspace"]) || len(primaries) == 0 {
		return false
	}
	if !c.offPin() {
		c.retake, c.counted = true, true
		return true
	}
	it := fwdItem{first: len(r.fwd), how: mergeKeyspace, info: s.infoText(args), resp3: c.resp3}
	cmd := []byte("*2\r\n$4\r\nINFO\r\n$8\r\nkeyspace\r\n")
	if all || want["memory"] {
		cmd = []byte("*3\r\n$4\r\nINFO\r\n$6\r\nmemory\r\n$8\r\nkeyspace\r\n")
	}
	for _, sl := range primaries {
		r.fwd = append(r.fwd, router.Forward{Slot: sl, Cmd: cmd})
	}
	r.queueItem(c, it)
	c.offPinSent()
	return true
}

// keyspace makes INFO's reply from sluice's own text and the primaries'
// INFO replies: their keyspace summed into one section at the end, and
// their maxmemory_policy in the Memory section (the first that evicts,
// if one does: a caller checks that none does). A primary that answered
// an error (down, hung) is left out, as Redis's INFO is never an error:
// ioredis's ready check sends INFO at each connection, and drops one
// where it fails.
func (it *fwdItem) keyspace(parts [][]byte) []byte {
	type db struct {
		keys, expires int64
		ttlSum        float64 // avg_ttl times expires overflows an int64 for long TTLs on many keys
		ttlKeys       int64   // the expires of the primaries whose avg_ttl is in ttlSum
	}
	dbs := map[string]*db{}
	var names []string
	var policy string
	for _, p := range parts {
		if len(p) > 0 && p[0] == '-' {
			continue
		}
		_, body, ok := strings.Cut(string(p), "\r\n")
		if !ok {
			return unexpected(p)
		}
		body = strings.TrimPrefix(body, "txt:")
		for _, line := range strings.Split(body, "\r\n") {
			name, fields, ok := strings.Cut(line, ":")
			if ok && name == "maxmemory_policy" && (policy == "" || policy == "noeviction") {
				policy = fields
			}
			if !ok || !strings.HasPrefix(name, "db") {
				continue
			}
			var keys, expires, ttl int64
			for _, f := range strings.Split(fields, ",") {
				k, v, _ := strings.Cut(f, "=")
				n, _ := strconv.ParseInt(v, 10, 64)
				switch k {
				case "keys":
					keys = n
				case "expires":
					expires = n
				case "avg_ttl":
					ttl = n
				}
			}
			d := dbs[name]
			if d == nil {
				d = &db{}
				dbs[name] = d
				names = append(names, name)
			}
			d.keys += keys
			d.expires += expires
			// avg_ttl weighs each primary by its keys with a TTL. One that
			// says 0 has not sampled its keys yet (Redis estimates it in
			// the expire cycle): counting it would pull the mean toward 0.
			if ttl > 0 {
				d.ttlSum += float64(ttl) * float64(expires)
				d.ttlKeys += expires
			}
		}
	}
	sort.Strings(names)
	var b strings.Builder
	info := it.info
	if at := strings.Index(info, "# Memory\r\n"); at >= 0 && policy != "" {
		// At the end of sluice's Memory section: before the next one's
		// separating line, or at the end.
		end := len(info)
		if next := strings.Index(info[at:], "\r\n\r\n"); next >= 0 {
			end = at + next + 2
		}
		info = info[:end] + "maxmemory_policy:" + policy + "\r\n" + info[end:]
	}
	b.WriteString(info)
	if b.Len() > 0 {
		b.WriteString("\r\n")
	}
	b.WriteString("# Keyspace\r\n")
	for _, name := range names {
		d := dbs[name]
		avg := int64(0)
		if d.ttlKeys > 0 {
			avg = int64(d.ttlSum / float64(d.ttlKeys))
		}
		fmt.Fprintf(&b, "%s:keys=%d,expires=%d,avg_ttl=%d\r\n", name, d.keys, d.expires, avg)
	}
	w := replyBuf{resp3: it.resp3}
	w.WriteVerbatim(b.String())
	return w.b
}
