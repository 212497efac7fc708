package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"

	"github.com/redis/rueidis"

	"github.com/sluice-rl/sluice/lua"
	"github.com/sluice-rl/sluice/proxy"
	"github.com/sluice-rl/sluice/router"
	"github.com/sluice-rl/sluice/router/bucket"
)

// conn is one load-generating client's connection to a target. Every
// client has its own, as redis-benchmark's clients do, so -clients 50 means
// 50 independent callers whichever the target.
type conn interface {
	// decide asks for one decision per key, pipelined, and counts them.
	decide(ctx context.Context, keys []string) (allowed, limited int, err error)
	close()
}

// target makes connections and reports the CPU time spent serving them.
type target interface {
	name() string
	dial() (conn, error)
	// cpu is the CPU seconds of the processes that decide (sluice for a
	// proxy target) and of the cluster's primaries, where known.
	cpu(ctx context.Context) (proxy, primaries float64, err error)
	close()
}

type limits struct {
	capacity, refill int64
	period           string // as THROTTLE takes it
	cost             int64
}

// sluiceTarget sends THROTTLE to sluice: to one instance, or with several
// addrs, each client to the next instance in turn, as behind a load
// balancer.
type sluiceTarget struct {
	label   string
	addrs   []string
	next    int // the instance the next dial connects to
	lim     limits
	args    []string
	cluster []string // for the primaries' CPU, optional
	srv     *proxy.Server
}

func newSluiceTarget(label string, addrs []string, lim limits, cluster []string) *sluiceTarget {
	return &sluiceTarget{label: label, addrs: addrs, lim: lim, cluster: cluster, args: []string{
		strconv.FormatInt(lim.capacity, 10), strconv.FormatInt(lim.refill, 10), lim.period, strconv.FormatInt(lim.cost, 10),
	}}
}

// newEmbeddedTarget starts sluice's embedded backend in this process and
// talks RESP to it like to any other sluice.
func newEmbeddedTarget(lim limits) (*sluiceTarget, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	srv := proxy.New(proxy.Config{Decider: router.NewMemory(0), Backend: "embedded"})
	go srv.Serve(ln)
	t := newSluiceTarget("embedded", []string{ln.Addr().String()}, lim, nil)
	t.srv = srv
	return t, nil
}

func (t *sluiceTarget) name() string { return t.label }

func (t *sluiceTarget) dial() (conn, error) {
	addr := t.addrs[t.next%len(t.addrs)]
	t.next++
	c, err := rueidis.NewClient(rueidis.ClientOption{
		InitAddress:       []string{addr},
		ForceSingleClient: true,
		DisableCache:      true,
		PipelineMultiplex: -1, // one connection per client
	})
	if err != nil {
		return nil, err
	}
	return &sluiceConn{c: c, args: t.args}, nil
}

func (t *sluiceTarget) cpu(ctx context.Context) (float64, float64, error) {
	own := 0.0
	if t.srv == nil {
		for _, addr := range t.addrs {
			v, err := infoCPU(ctx, addr)
			if err != nil {
				return 0, 0, err
			}
			own += v
		}
	}
	prim, err := primariesCPU(ctx, t.cluster)
	return own, prim, err
}

func (t *sluiceTarget) close() {
	if t.srv != nil {
		t.srv.Close()
	}
}

type sluiceConn struct {
	c    rueidis.Client
	args []string
	cmds rueidis.Commands
}

func (c *sluiceConn) decide(ctx context.Context, keys []string) (int, int, error) {
	c.cmds = c.cmds[:0]
	for _, k := range keys {
		c.cmds = append(c.cmds, c.c.B().Arbitrary("THROTTLE").Keys(k).Args(c.args...).Build())
	}
	var allowed, limited int
	for _, r := range c.c.DoMulti(ctx, c.cmds...) {
		v, err := r.AsIntSlice()
		if err != nil {
			return allowed, limited, err
		}
		if len(v) != 5 {
			return allowed, limited, fmt.Errorf("THROTTLE answered %d values", len(v))
		}
		if v[0] == 0 {
			allowed++
		} else {
			limited++
		}
	}
	return allowed, limited, nil
}

func (c *sluiceConn) close() { c.c.Close() }

// directTarget is the baseline a user would write without sluice: the same
// token-bucket script, EVALSHA straight to the cluster with rueidis.
type directTarget struct {
	seeds  []string
	iv     bucket.Interval
	cost   int64
	script *lua.Throttle
}

func newDirectTarget(seeds []string, lim limits, period int64) (*directTarget, error) {
	iv, err := bucket.Limit{Capacity: lim.capacity, Refill: lim.refill, Period: period}.Interval()
	if err != nil {
		return nil, err
	}
	return &directTarget{seeds: seeds, iv: iv, cost: lim.cost, script: lua.NewThrottle()}, nil
}

func (t *directTarget) name() string { return "direct" }

func (t *directTarget) dial() (conn, error) {
	c, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: t.seeds, DisableCache: true})
	if err != nil {
		return nil, err
	}
	return &directConn{c: c, t: t}, nil
}

func (t *directTarget) cpu(ctx context.Context) (float64, float64, error) {
	prim, err := primariesCPU(ctx, t.seeds)
	return 0, prim, err
}

func (t *directTarget) close() {}

type directConn struct {
	c     rueidis.Client
	t     *directTarget
	calls []lua.Call
	res   []lua.Result
	errs  []error
}

func (c *directConn) decide(ctx context.Context, keys []string) (int, int, error) {
	c.calls = c.calls[:0]
	for _, k := range keys {
		c.calls = append(c.calls, lua.Call{Key: k, Capacity: c.t.iv.Capacity, U: c.t.iv.U, V: c.t.iv.V, Cost: c.t.cost})
	}
	c.res = append(c.res[:0], make([]lua.Result, len(keys))...)
	c.errs = append(c.errs[:0], make([]error, len(keys))...)
	c.t.script.Do(ctx, c.c, c.calls, c.res, c.errs)
	var allowed, limited int
	for i, r := range c.res {
		if c.errs[i] != nil {
			return allowed, limited, c.errs[i]
		}
		if r.Limited {
			limited++
		} else {
			allowed++
		}
	}
	return allowed, limited, nil
}

func (c *directConn) close() { c.c.Close() }

// infoCPU reads used_cpu_user + used_cpu_sys from INFO cpu at addr.
func infoCPU(ctx context.Context, addr string) (float64, error) {
	f, err := infoFields(ctx, addr, "cpu")
	if err != nil {
		return 0, err
	}
	user, err1 := strconv.ParseFloat(f["used_cpu_user"], 64)
	sys, err2 := strconv.ParseFloat(f["used_cpu_sys"], 64)
	if err1 != nil || err2 != nil {
		return 0, fmt.Errorf("%s: INFO cpu has no used_cpu_user/used_cpu_sys", addr)
	}
	return user + sys, nil
}

// infoFields reads one INFO section at addr as field: value pairs.
func infoFields(ctx context.Context, addr, section string) (map[string]string, error) {
	c, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{addr}, ForceSingleClient: true, DisableCache: true})
	if err != nil {
		return nil, err
	}
	defer c.Close()
	text, err := c.Do(ctx, c.B().Info().Section(section).Build()).ToString()
	if err != nil {
		return nil, err
	}
	return parseInfo(text), nil
}

// parseInfo reads INFO's text as field: value pairs.
func parseInfo(text string) map[string]string {
	fields := map[string]string{}
	for _, line := range strings.Split(text, "\n") {
		if k, v, ok := strings.Cut(strings.TrimSpace(line), ":"); ok {
			fields[k] = v
		}
	}
	return fields
}

// primariesCPU sums the CPU seconds of the cluster's primaries.
func primariesCPU(ctx context.Context, seeds []string) (float64, error) {
	if len(seeds) == 0 {
		return 0, nil
	}
	var total float64
	err := eachPrimary(ctx, seeds, func(addr string) error {
		v, err := infoCPU(ctx, addr)
		total += v
		return err
	})
	return total, err
}

// eachPrimary calls f with the address of each of the cluster's primaries.
func eachPrimary(ctx context.Context, seeds []string, f func(addr string) error) error {
	c, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: seeds, DisableCache: true})
	if err != nil {
		return err
	}
	defer c.Close()
	nodes := c.Nodes()
	if len(nodes) == 0 {
		return errors.New("no cluster nodes")
	}
	for addr, n := range nodes {
		role, err := n.Do(ctx, n.B().Role().Build()).ToArray()
		if err != nil || len(role) == 0 {
			return fmt.Errorf("%s: ROLE: %v", addr, err)
		}
		if r, _ := role[0].ToString(); r != "master" {
			continue
		}
		if err := f(addr); err != nil {
			return err
		}
	}
	return nil
}
