package lua

import (
	"context"
	_ "embed"

	"github.com/redis/rueidis"
)

//go:embed reset.lua
var resetSrc string

// Resetter runs reset.lua: it deletes buckets, and leaves a key that holds
// anything else (passthrough can write sluice's keys) as it is.
type Resetter struct {
	script *rueidis.Lua
}

// NewResetter returns the wrapper of reset.lua.
func NewResetter() *Resetter {
	return &Resetter{script: rueidis.NewLuaScript(resetSrc)}
}

// Reset deletes the buckets at keys, one script call each, on c. Each
// result is the bucket deleted, nil (none, or a bucket full again), a
// split's marker with 1 when its own state is not full (else 0), or an
// error: WRONGTYPE for a key that is not a bucket.
//
// Through a cluster client, one ExecMulti carries at most one reset of a
// key, as DoBatch one step: rueidis sends those a node answered MOVED
// again before those answered ASK, so a client's two resets of one bucket
// at a node that ends its slot's move between them would run in the wrong
// order, the second answering the bucket the first should have.
func (r *Resetter) Reset(ctx context.Context, c rueidis.Client, keys []string) []rueidis.RedisResult {
	if c.Mode() != rueidis.ClientModeCluster {
		return r.exec(ctx, c, keys)
	}
	res := make([]rueidis.RedisResult, 0, len(keys))
	for len(keys) > 0 {
		n := distinct(keys, func(k string) string { return k })
		res = append(res, r.exec(ctx, c, keys[:n])...)
		keys = keys[n:]
	}
	return res
}

// exec resets keys in one ExecMulti.
func (r *Resetter) exec(ctx context.Context, c rueidis.Client, keys []string) []rueidis.RedisResult {
	calls := make([]rueidis.LuaExec, len(keys))
	for i, k := range keys {
		calls[i] = rueidis.LuaExec{Keys: []string{k}}
	}
	return r.script.ExecMulti(ctx, c, calls...)
}
