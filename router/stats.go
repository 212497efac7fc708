package router

import (
	"cmp"
	"maps"
	"slices"
	"time"
)

// Stats is one reading of a backend's state: what INFO shows and, later,
// metrics export. Only the fields of the backend in use are set.
type Stats struct {
	// Embedded is the embedded backend's: buckets held.
	Embedded *MemoryStats
	// Cluster is the cluster backend's.
	Cluster *ClusterStats
}

// MemoryStats is the embedded backend's state.
type MemoryStats struct {
	Buckets int
}

// ClusterStats is the cluster backend's state.
type ClusterStats struct {
	Connected    bool    // the cluster has answered at least once
	Fallback     Policy  // for keys of an unhealthy shard
	Share        float64 // of each limit, granted by a local fallback bucket
	Instances    int64   // live sluice instances, as the last heartbeat counted
	LocalBuckets int     // local fallback buckets held
	// Decisions counts decisions by source since start (SourceEmbedded is
	// never one of the cluster's).
	Decisions [numSources]int64
	// Split counts cluster decisions made by a hot key's sub-buckets;
	// DeniedHere those denied from the key's last denial, without a step.
	Split, DeniedHere int64
	Shards            []ShardStats // by address
	HotThreshold      float64      // decisions/s of one key that make it hot
	HotKeys           int          // tracked: split here, declared or followed
	Hot               []HotKeyStats
}

// ShardStats is one primary's state.
type ShardStats struct {
	Addr    string
	Healthy bool
	Since   time.Time // of the current state
	Errors  int64     // faults seen since start
	// ErrorKinds counts them by kind: timeout, connection, clusterdown,
	// tryagain, loading, busy, replica, redirect, other.
	ErrorKinds map[string]int64
	LastError  string
}

// HotKeyStats is one tracked hot key.
type HotKeyStats struct {
	Key string
	// State is "detected" (split by this instance), "declared" (matches
	// --hot-keys) or "following" (another instance's split).
	State      string
	SubBuckets int           // of its live split, 0 when not split
	Rate       float64       // decisions/s here
	SplitLeft  time.Duration // until the live split lapses
	// Held: the split ran out while its parent's shard was down, and is
	// still used until the shard is back and the split taken up again.
	Held bool
}

// hotStatsKeys is how many hot keys Stats lists, the busiest first.
const hotStatsKeys = 16

// Stats reads the cluster backend's state.
func (c *Cluster) Stats() Stats {
	st := &ClusterStats{
		Connected:    c.Connected(),
		Fallback:     c.cfg.Fallback,
		Share:        c.shareNow(),
		Instances:    c.live.Load(),
		LocalBuckets: c.local.Len(),
		Split:        c.split.Load(),
		DeniedHere:   c.deniedHere.Load(),
		HotThreshold: c.cfg.HotThreshold,
	}
	for s := range st.Decisions {
		st.Decisions[s] = c.counts[s].Load()
	}
	c.mu.Lock()
	shards := make([]*shard, 0, len(c.shards))
	for _, s := range c.shards {
		shards = append(shards, s)
	}
	c.mu.Unlock()
	slices.SortFunc(shards, func(a, b *shard) int { return cmp.Compare(a.addr, b.addr) })
	for _, s := range shards {
		s.mu.Lock()
		st.Shards = append(st.Shards, ShardStats{Addr: s.addr, Healthy: s.healthy.Load(), Since: s.since,
			Errors: s.errors, ErrorKinds: maps.Clone(s.kinds), LastError: s.lastErr})
		s.mu.Unlock()
	}
	st.HotKeys, st.Hot = c.hot.stats(time.Now().UnixNano())
	return Stats{Cluster: st}
}

// Stats reads the embedded backend's state.
func (m *Memory) Stats() Stats {
	return Stats{Embedded: &MemoryStats{Buckets: m.Len()}}
}

// stats counts the hot keys tracked and lists the busiest.
func (h *hotSet) stats(now int64) (int, []HotKeyStats) {
	m := *h.keys.Load()
	all := make([]*hotKey, 0, len(m))
	for _, hk := range m {
		all = append(all, hk)
	}
	slices.SortFunc(all, func(a, b *hotKey) int {
		return cmp.Or(cmp.Compare(b.rateNow(), a.rateNow()), cmp.Compare(a.key, b.key))
	})
	var out []HotKeyStats
	for _, hk := range all[:min(len(all), hotStatsKeys)] {
		st := HotKeyStats{Key: hk.key, State: "following", Rate: hk.rateNow()}
		sp, own := hk.split.Load(), hk.renewed.Load()
		switch {
		case hk.declared:
			st.State = "declared"
		case hk.detected.Load(), sp != nil && own != nil && *own == sp.gen:
			st.State = "detected"
		}
		if sp != nil && (now < sp.until || hk.held.Load()) {
			st.SubBuckets, st.SplitLeft = len(sp.tags), time.Duration(max(sp.until-now, 0))
			st.Held = hk.held.Load()
		}
		out = append(out, st)
	}
	return len(all), out
}
