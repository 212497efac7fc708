// The heartbeat: how many sluice instances share the cluster, for the
// local fallback's share of each limit.

package router

import (
	"context"
	"math"
	"time"

	"github.com/redis/rueidis"
	"go.uber.org/zap"
)

// heartbeatEvery is how often an instance announces itself; an
// announcement lasts three beats, so one lost beat drops no one.
const heartbeatEvery = time.Second

// beat announces this instance and, while the cluster answers, keeps the
// local share at 1/live instances.
func (c *Cluster) beat(ctx context.Context) {
	client := *c.client.Load()
	// At most a beat's interval: past 725 ms of --backend-timeout the
	// usual deadline would let one slow beat outlast the announcement
	// (3 beats), where the next beat's try could have renewed it.
	ctx, cancel := context.WithTimeout(ctx, min(4*c.cfg.Timeout+100*time.Millisecond, heartbeatEvery))
	defer cancel()
	n, err := c.heartbeat.Beat(ctx, client, instancesKey, c.id, 3*heartbeatEvery)
	if err != nil && !isFault(err) && !c.beatRefused.Swap(true) {
		// No outage, but a refusal (NOPERM: a cluster user not allowed
		// sluice.instances) that would last: each instance counts itself
		// alone, and its fallback would grant the whole limit.
		c.log.Warn("heartbeat refused by the cluster: sluice instances are not counted (the last count is kept; with none, each takes the whole limit in fallback)",
			zap.String("key", instancesKey), zap.Error(err))
	}
	if err != nil || n < 1 {
		return // keep the last known count through an outage
	}
	if old := c.live.Swap(n); old != n {
		c.log.Info("sluice instances sharing the cluster", zap.Int64("instances", n))
	}
	c.share.Store(math.Float64bits(1 / float64(n)))
}

// leave takes this instance's announcement out at once, once run no longer
// beats, so that the others count it no more from their next beat instead
// of while it lapses (3 s), and grant a share too small for that long.
// Best effort on the beat's deadline: a cluster that does not answer lets
// it lapse, as after a crash.
func (c *Cluster) leave(client rueidis.Client) {
	if c.cfg.Share > 0 {
		return // never announced
	}
	ctx, cancel := context.WithTimeout(context.Background(), 4*c.cfg.Timeout+100*time.Millisecond)
	defer cancel()
	client.Do(ctx, client.B().Zrem().Key(instancesKey).Member(c.id).Build())
}

// Instances is the number of live sluice instances the last heartbeat
// counted (1 until one has).
func (c *Cluster) Instances() int64 { return c.live.Load() }
