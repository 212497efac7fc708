// The fallback policy: how a key is decided while its shard cannot.

package router

import (
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/sluice-rl/sluice/router/bucket"
)

// Policy says how a decision is made when the key's shard cannot make it.
type Policy uint8

const (
	// FallbackLocal decides with an in-process bucket holding this
	// instance's share of the limit.
	FallbackLocal Policy = iota
	// FallbackOpen allows: availability first.
	FallbackOpen
	// FallbackClosed denies.
	FallbackClosed
)

// ParsePolicy reads "local", "open" or "closed".
func ParsePolicy(s string) (Policy, error) {
	switch s {
	case "local":
		return FallbackLocal, nil
	case "open":
		return FallbackOpen, nil
	case "closed":
		return FallbackClosed, nil
	}
	return 0, fmt.Errorf("router: fallback policy %q: want local, open or closed", s)
}

// ErrResetNotInCluster answers a Reset whose key's shard is unhealthy (or
// with no cluster yet): the cluster's bucket was not reset, only this
// instance's fallback bucket was. The caller retries once the shard is
// back. A reset remembered and replayed later could wipe out what other
// instances admitted meanwhile, and lost with this instance if it stops:
// an error the caller sees is the honest answer.
var ErrResetNotInCluster = errors.New("router: reset not applied to the cluster: the key's shard is unhealthy, only this instance's fallback bucket was reset; retry once the shard is back")

// fallback decides reqs without the cluster.
func (c *Cluster) fallback(reqs []Request, res []Result) {
	now := time.Now().UnixMicro()
	for i := range reqs {
		r := &reqs[i]
		if r.Op == Reset {
			if (*c.hot.keys.Load())[r.Key] != nil {
				// A split key's fallback bucket starts from what was
				// seen of its sub-buckets (fallbackHot), which would
				// take back this reset at the next call.
				res[i] = c.local.resetPinned(r.Key, now)
			} else {
				res[i] = c.local.decide(r, now)
			}
			res[i].Source = SourceLocal
			res[i].Err = ErrResetNotInCluster
			continue
		}
		switch c.cfg.Fallback {
		case FallbackOpen:
			br, _ := bucket.Take(0, now, r.Interval, r.Cost)
			res[i] = Result{Result: br, Source: SourceOpen}
		case FallbackClosed:
			res[i] = Result{Source: SourceClosed, Result: bucket.Result{
				Limited:    true,
				RetryAfter: c.fallbackRetry(r),
				ResetAfter: fillTime(r.Interval),
			}}
		default:
			scaled := *r
			scaled.Interval = c.scale(r.Interval)
			res[i] = c.local.decide(&scaled, now)
			res[i].Source = SourceLocal
			if res[i].Limited && res[i].RetryAfter < 0 {
				// The share's bucket can never hold cost; the limit's
				// may, once the shard is back.
				res[i].RetryAfter = c.fallbackRetry(r)
			}
		}
	}
}

// fallbackRetry is a fallback denial's retry_after: the probe interval, when
// the shard may answer again, or -1 for a cost above the capacity, which
// no bucket of this limit can ever grant (the reply promises -1 then,
// whatever decided it).
func (c *Cluster) fallbackRetry(r *Request) int64 {
	if r.Cost > r.Interval.Capacity {
		return -1
	}
	return c.cfg.ProbeInterval.Microseconds()
}

// scale grants this instance its share of a limit: share x the capacity
// (at least one token) and share x the rate, by stretching the interval.
func (c *Cluster) scale(iv bucket.Interval) bucket.Interval {
	share := c.shareNow()
	if share >= 1 {
		return iv
	}
	s := iv
	// Rounded down: N instances each rounding up would admit more than
	// the limit between them (3 tokens at 1/2 each gave 2 + 2). The
	// epsilon keeps an exact share such as 6 x 1/3 from flooring to 1.
	s.Capacity = max(int64(math.Floor(float64(iv.Capacity)*share+1e-9)), 1)
	// Rounded up, for the same reason: a shorter interval is a faster
	// rate than the share. The tolerance keeps an exact quotient such as
	// 2 / (1/3) from rounding up past 6.
	u := math.Ceil(float64(iv.U) / share * (1 - 1e-12))
	if u*float64(s.Capacity) > bucket.MaxCapacityTime {
		return iv // cannot be stretched exactly; grant the whole limit
	}
	s.U = int64(u)
	return s
}

// shareNow is the fraction of each limit a local fallback bucket grants.
func (c *Cluster) shareNow() float64 { return math.Float64frombits(c.share.Load()) }

func (p Policy) String() string { return [...]string{"local", "open", "closed"}[p] }
