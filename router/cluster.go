package router

import (
	"context"

	"github.com/redis/rueidis"

	"github.com/sluice-rl/sluice/lua"
	"github.com/sluice-rl/sluice/router/bucket"
)

// Cluster keeps buckets in a Redis Cluster, each decided by the Lua step on
// the shard that owns its slot.
type Cluster struct {
	client rueidis.Client
	script *lua.Throttle
}

// NewCluster decides requests through client, a rueidis cluster client.
// The caller keeps ownership of client.
func NewCluster(client rueidis.Client) *Cluster {
	return &Cluster{client: client, script: lua.NewThrottle()}
}

// Decide decides reqs, pipelined. Requests are grouped in runs of one Op so
// that a Reset and a Take on one key in one pipeline keep their order.
func (c *Cluster) Decide(ctx context.Context, reqs []Request, res []Result) {
	for start := 0; start < len(reqs); {
		end := start + 1
		for end < len(reqs) && reqs[end].Op == reqs[start].Op {
			end++
		}
		if reqs[start].Op == Reset {
			c.reset(ctx, reqs[start:end], res[start:end])
		} else {
			c.take(ctx, reqs[start:end], res[start:end])
		}
		start = end
	}
}

func (c *Cluster) take(ctx context.Context, reqs []Request, res []Result) {
	calls := make([]lua.Call, len(reqs))
	for i := range reqs {
		calls[i] = lua.Call{Key: KeyPrefix + reqs[i].Key, Interval: reqs[i].Interval, Cost: reqs[i].Cost}
	}
	br := make([]bucket.Result, len(reqs))
	errs := make([]error, len(reqs))
	c.script.Do(ctx, c.client, calls, br, errs)
	for i := range res {
		res[i] = Result{Result: br[i], Err: errs[i]}
	}
}

func (c *Cluster) reset(ctx context.Context, reqs []Request, res []Result) {
	cmds := make(rueidis.Commands, len(reqs))
	for i := range reqs {
		cmds[i] = c.client.B().Del().Key(KeyPrefix + reqs[i].Key).Build()
	}
	for i, r := range c.client.DoMulti(ctx, cmds...) {
		n, err := r.AsInt64()
		res[i] = Result{Existed: n > 0, Err: err}
	}
}
