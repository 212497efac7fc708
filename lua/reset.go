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
func (r *Resetter) Reset(ctx context.Context, c rueidis.Client, keys []string) []rueidis.RedisResult {
	calls := make([]rueidis.LuaExec, len(keys))
	for i, k := range keys {
		calls[i] = rueidis.LuaExec{Keys: []string{k}}
	}
	return r.script.ExecMulti(ctx, c, calls...)
}
