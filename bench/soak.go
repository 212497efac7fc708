package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/redis/rueidis"
)

// soakSample is sluice's footprint at one moment of a soak.
type soakSample struct {
	at         time.Duration
	rss        int64 // KiB
	fds        int
	goroutines int64
	fallback   int64 // local fallback buckets held
	local      int64 // decisions the local fallback made so far
	calls      int64
	errors     int64 // THROTTLE calls that failed: none may
	unreached  int64 // GET and SET that failed: their primary was down
}

// runSoak is make soak: a steady mixed load (THROTTLE on uniform keys,
// GET and SET through to the cluster, PING) against the sluice at -addr
// for -duration, with the primary of -kill (host:port) killed with
// SIGKILL midway. THROTTLE must never fail (the fallback decides); GET and
// SET on the dead primary's keys fail until its replica is promoted, and
// are counted apart. It prints sluice's RSS, file descriptors, goroutines
// and fallback buckets every tenth of the run, and fails when, from the
// first quarter to the end, they grew (more than 10 goroutines or
// descriptors, or half again the RSS plus 8 MB), when the fallback
// buckets are still held at the end, or when a call failed.
func runSoak(cfg config, out io.Writer) error {
	if cfg.sluicePID == 0 || cfg.kill == "" {
		return errors.New("-soak needs -sluice-pid and -kill host:port (a primary to kill midway)")
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cl, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{cfg.addr}, ForceSingleClient: true, DisableCache: true})
	if err != nil {
		return err
	}
	defer cl.Close()
	victim, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{cfg.kill}, ForceSingleClient: true, DisableCache: true})
	if err != nil {
		return err
	}
	defer victim.Close()
	pidText, err := victim.Do(ctx, victim.B().Info().Section("server").Build()).ToString()
	if err != nil {
		return fmt.Errorf("%s: INFO: %w", cfg.kill, err)
	}
	victimPID, err := strconv.Atoi(parseInfo(pidText)["process_id"])
	if err != nil {
		return fmt.Errorf("%s: no process_id in INFO", cfg.kill)
	}

	var calls, failures, unreached atomic.Int64
	var down atomic.Bool // the primary is killed: GET and SET may fail from then on
	var firstErr atomic.Value
	var wg sync.WaitGroup
	for w := range cfg.clients {
		wg.Go(func() {
			for i := 0; ctx.Err() == nil; i++ {
				key := strconv.Itoa((w*7919 + i) % cfg.keys.n)
				var cmd rueidis.Completed
				switch i % 4 {
				case 0, 1:
					cmd = cl.B().Arbitrary("THROTTLE").Keys("soak:"+key).Args("100", "10", "1s").Build()
				case 2:
					cmd = cl.B().Set().Key("soak:v:" + key).Value(key).Build()
				default:
					cmd = cl.B().Get().Key("soak:v:" + key).Build()
				}
				err := cl.Do(ctx, cmd).Error()
				calls.Add(1)
				switch {
				case err == nil || rueidis.IsRedisNil(err) || ctx.Err() != nil:
				case i%4 >= 2 && down.Load():
					// An ordinary command has no fallback: while its
					// primary is down it fails, as it would straight to
					// the cluster. Before the kill, a failure is one.
					unreached.Add(1)
				default:
					failures.Add(1)
					firstErr.CompareAndSwap(nil, err.Error())
				}
			}
		})
	}

	start := time.Now()
	sample := func() (soakSample, error) {
		s := soakSample{at: time.Since(start).Round(time.Second), calls: calls.Load(), errors: failures.Load(), unreached: unreached.Load()}
		status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", cfg.sluicePID))
		if err != nil {
			return s, err
		}
		for _, line := range strings.Split(string(status), "\n") {
			if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
				s.rss, _ = strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			}
		}
		fds, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", cfg.sluicePID))
		if err != nil {
			return s, err
		}
		s.fds = len(fds)
		text, err := cl.Do(ctx, cl.B().Info().Section("server", "backend").Build()).ToString()
		if err != nil {
			return s, fmt.Errorf("sluice INFO: %w", err)
		}
		f := parseInfo(text)
		s.goroutines, _ = strconv.ParseInt(f["goroutines"], 10, 64)
		s.fallback, _ = strconv.ParseInt(f["local_buckets"], 10, 64)
		s.local, _ = strconv.ParseInt(f["decisions_local"], 10, 64)
		return s, nil
	}
	var samples []soakSample
	killed := false
	step := cfg.duration / 10
	for at := step; at <= cfg.duration; at += step {
		time.Sleep(time.Until(start.Add(at)))
		if !killed && at >= cfg.duration/2 {
			down.Store(true)
			if err := syscall.Kill(victimPID, syscall.SIGKILL); err != nil {
				return fmt.Errorf("killing %s (pid %d): %w", cfg.kill, victimPID, err)
			}
			killed = true
			fmt.Fprintf(out, "killed the primary %s (pid %d) at %v\n", cfg.kill, victimPID, time.Since(start).Round(time.Second))
		}
		s, err := sample()
		if err != nil {
			return err
		}
		samples = append(samples, s)
	}
	cancel()
	wg.Wait()

	w := tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(w, "at\tcalls\tTHROTTLE errors\tGET/SET unreached\tRSS MB\tfds\tgoroutines\tfallback buckets\t")
	for _, s := range samples {
		fmt.Fprintf(w, "%v\t%d\t%d\t%d\t%.1f\t%d\t%d\t%d\t\n", s.at, s.calls, s.errors, s.unreached, float64(s.rss)/1024, s.fds, s.goroutines, s.fallback)
	}
	w.Flush()
	base, last := samples[len(samples)/4], samples[len(samples)-1]
	var problems []string
	if last.errors > 0 {
		problems = append(problems, fmt.Sprintf("%d THROTTLE calls (or GET and SET before the kill) failed, the first with %v", last.errors, firstErr.Load()))
	}
	// The outage must have been decided by the fallback: a kill that never
	// reached it would pass the checks above without testing them.
	if last.local == 0 {
		problems = append(problems, "the fallback decided nothing: the killed primary's keys never fell back")
	}
	if last.goroutines > base.goroutines+10 {
		problems = append(problems, fmt.Sprintf("goroutines grew from %d to %d", base.goroutines, last.goroutines))
	}
	if last.fds > base.fds+10 {
		problems = append(problems, fmt.Sprintf("file descriptors grew from %d to %d", base.fds, last.fds))
	}
	if last.rss > base.rss*3/2+8<<10 {
		problems = append(problems, fmt.Sprintf("RSS grew from %d to %d KiB", base.rss, last.rss))
	}
	if last.fallback > 0 {
		problems = append(problems, fmt.Sprintf("%d fallback buckets still held at the end", last.fallback))
	}
	if len(problems) > 0 {
		return errors.New("soak: " + strings.Join(problems, "; "))
	}
	fmt.Fprintf(out, "soak: %d calls, 0 THROTTLE errors (%d decided by the fallback; %d GET/SET failed while their primary was down, none before); goroutines, descriptors and RSS flat from %v on; fallback buckets released\n",
		last.calls, last.local, last.unreached, base.at)
	return nil
}
