package proxy

import (
	"fmt"
	"net"
	"os"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// infoSections are INFO's sections in the order "INFO" and "INFO all" list
// them.
var infoSections = []struct {
	name, title string
	write       func(s *Server, b *strings.Builder)
}{
	{"server", "Server", (*Server).infoServer},
	{"clients", "Clients", (*Server).infoClients},
	{"stats", "Stats", (*Server).infoStats},
	{"memory", "Memory", (*Server).infoMemory},
	{"backend", "Backend", (*Server).infoBackend},
	{"cpu", "CPU", (*Server).infoCPU},
}

func cmdInfo(s *Server, _ *client, conn respConn, args [][]byte) {
	want := map[string]bool{}
	for _, a := range args[1:] {
		want[strings.ToLower(string(a))] = true
	}
	all := len(want) == 0 || want["all"] || want["default"] || want["everything"]
	var b strings.Builder
	for _, sec := range infoSections {
		if !all && !want[sec.name] {
			continue
		}
		if b.Len() > 0 {
			b.WriteString("\r\n")
		}
		fmt.Fprintf(&b, "# %s\r\n", sec.title)
		sec.write(s, &b)
	}
	conn.WriteBulkString(b.String())
}

func (s *Server) infoServer(b *strings.Builder) {
	port := ""
	if a := s.Addr(); a != nil {
		_, port, _ = net.SplitHostPort(a.String())
	}
	up := time.Since(s.start)
	fmt.Fprintf(b, "sluice_version:%s\r\n", s.cfg.Version)
	// Clients gate features on redis_version; sluice speaks Redis 7's
	// protocol for the commands it has.
	fmt.Fprintf(b, "redis_version:7.0.0\r\n")
	fmt.Fprintf(b, "redis_mode:standalone\r\n")
	fmt.Fprintf(b, "backend:%s\r\n", s.cfg.Backend)
	fmt.Fprintf(b, "go_version:%s\r\n", runtime.Version())
	fmt.Fprintf(b, "process_id:%d\r\n", os.Getpid())
	fmt.Fprintf(b, "tcp_port:%s\r\n", port)
	// 0: each client on its own goroutine.
	fmt.Fprintf(b, "io_loops:%d\r\n", s.ioLoops())
	fmt.Fprintf(b, "uptime_in_seconds:%d\r\n", int64(up.Seconds()))
	fmt.Fprintf(b, "uptime_in_days:%d\r\n", int64(up.Hours()/24))
}

func (s *Server) infoClients(b *strings.Builder) {
	fmt.Fprintf(b, "connected_clients:%d\r\n", s.stats.connected.Load())
}

func (s *Server) infoStats(b *strings.Builder) {
	fmt.Fprintf(b, "total_connections_received:%d\r\n", s.stats.connections.Load())
	fmt.Fprintf(b, "total_commands_processed:%d\r\n", s.stats.commands.Load())
	fmt.Fprintf(b, "total_error_replies:%d\r\n", s.stats.errors.Load())
	fmt.Fprintf(b, "throttle_allowed:%d\r\n", s.stats.allowed.Load())
	fmt.Fprintf(b, "throttle_limited:%d\r\n", s.stats.limited.Load())
}

// backendInfo is what a Decider may add to INFO: lines of field:value.
type backendInfo interface {
	Info() string
}

func (s *Server) infoBackend(b *strings.Builder) {
	fmt.Fprintf(b, "backend:%s\r\n", s.cfg.Backend)
	if bi, ok := s.cfg.Decider.(backendInfo); ok {
		b.WriteString(bi.Info())
	}
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
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return
	}
	fmt.Fprintf(b, "used_cpu_sys:%.6f\r\n", seconds(ru.Stime))
	fmt.Fprintf(b, "used_cpu_user:%.6f\r\n", seconds(ru.Utime))
}

func seconds(tv syscall.Timeval) float64 {
	return float64(tv.Sec) + float64(tv.Usec)/1e6
}
