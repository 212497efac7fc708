// Command sluice is a rate limiter that speaks the Redis protocol. It
// answers THROTTLE and CL.THROTTLE from token buckets kept in a Redis
// Cluster, or in memory when no cluster is given.
//
// Every flag can also be set in the environment as SLUICE_<NAME>, with the
// name in upper case and dashes as underscores (SLUICE_LOG_LEVEL=debug); a
// flag on the command line wins.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	_ "net/http/pprof"
	"os"
	"os/signal"
	"runtime/debug"
	"strings"
	"syscall"
	"time"

	"github.com/redis/rueidis"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/sluice-rl/sluice/proxy"
	"github.com/sluice-rl/sluice/router"
)

// version is set at link time (-ldflags "-X main.version=v1.2.3"); without
// it the module version from the build info is used.
var version = ""

func main() {
	os.Exit(run(os.Args[1:], os.Getenv, os.Stderr))
}

type options struct {
	listen    string
	cluster   string
	logLevel  string
	logFormat string
	pprof     string
	// flushDelay lets the writer to each shard wait a moment after a write
	// so that concurrent clients' commands share the next one.
	flushDelay time.Duration
}

func parseFlags(args []string, getenv func(string) string, stderr io.Writer) (options, error) {
	var o options
	fs := flag.NewFlagSet("sluice", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&o.listen, "listen", "127.0.0.1:6380", "`address` to serve RESP on")
	fs.StringVar(&o.cluster, "cluster", "", "Redis Cluster seed nodes, `host:port[,host:port...]`; empty runs the embedded in-memory backend")
	fs.StringVar(&o.logLevel, "log-level", "info", "log `level`: debug, info, warn or error")
	fs.StringVar(&o.logFormat, "log-format", "console", "log `format`: json or console")
	fs.DurationVar(&o.flushDelay, "backend-flush-delay", 20*time.Microsecond, "pause after each write to a shard so that more clients' commands share the next write (fewer syscalls on both sides, a little latency); 0 disables")
	fs.StringVar(&o.pprof, "pprof", "", "serve net/http/pprof on this `address` (e.g. 127.0.0.1:6060); off when empty")
	var envErr error
	fs.VisitAll(func(f *flag.Flag) {
		name := "SLUICE_" + strings.ToUpper(strings.ReplaceAll(f.Name, "-", "_"))
		if v := getenv(name); v != "" {
			if err := f.Value.Set(v); err != nil && envErr == nil {
				envErr = fmt.Errorf("%s: %w", name, err)
			}
			f.DefValue = v
		}
	})
	if envErr != nil {
		return o, envErr
	}
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if fs.NArg() > 0 {
		return o, fmt.Errorf("unexpected arguments: %v", fs.Args())
	}
	if o.logFormat != "json" && o.logFormat != "console" {
		return o, fmt.Errorf("--log-format must be json or console, not %q", o.logFormat)
	}
	return o, nil
}

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
		encoder = zapcore.NewConsoleEncoder(enc)
	}
	return zap.New(zapcore.NewCore(encoder, zapcore.AddSync(w), level)), nil
}

func run(args []string, getenv func(string) string, stderr io.Writer) int {
	o, err := parseFlags(args, getenv, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
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

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()

	var decider proxy.Decider
	backend := "embedded"
	if o.cluster == "" {
		decider = router.NewMemory()
	} else {
		backend = "cluster"
		client, err := rueidis.NewClient(rueidis.ClientOption{
			InitAddress: strings.Split(o.cluster, ","),
			ShuffleInit: true,
			// sluice reads nothing it could cache; RESP3 tracking would only
			// cost the shards work.
			DisableCache:  true,
			MaxFlushDelay: o.flushDelay,
		})
		if err != nil {
			log.Error("cannot reach the cluster", zap.String("cluster", o.cluster), zap.Error(err))
			return 1
		}
		defer client.Close()
		decider = router.NewCluster(client)
	}

	if o.pprof != "" {
		pln, err := net.Listen("tcp", o.pprof)
		if err != nil {
			log.Error("cannot listen for pprof", zap.Error(err))
			return 1
		}
		defer pln.Close()
		// The default mux holds only what net/http/pprof registers.
		go http.Serve(pln, nil)
		log.Info("pprof listening", zap.String("addr", pln.Addr().String()))
	}

	ln, err := net.Listen("tcp", o.listen)
	if err != nil {
		log.Error("cannot listen", zap.Error(err))
		return 1
	}
	srv := proxy.New(proxy.Config{Decider: decider, Backend: backend, Version: buildVersion(), Logger: log})
	log.Info("sluice started",
		zap.String("listen", ln.Addr().String()),
		zap.String("backend", backend),
		zap.String("cluster", o.cluster),
		zap.String("version", buildVersion()))

	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	select {
	case err = <-served:
		log.Error("serving failed", zap.Error(err))
		return 1
	case <-ctx.Done():
	}
	start := time.Now()
	srv.Close()
	<-served
	log.Info("sluice stopped", zap.Duration("took", time.Since(start)))
	return 0
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
