package lua

import (
	"context"
	_ "embed"
	"strconv"
	"time"

	"github.com/redis/rueidis"
)

//go:embed heartbeat.lua
var heartbeatSrc string

// Heartbeat runs heartbeat.lua: it announces one sluice instance in a
// sorted set and answers how many instances are live.
type Heartbeat struct {
	script *rueidis.Lua
}

// NewHeartbeat returns the wrapper of heartbeat.lua.
func NewHeartbeat() *Heartbeat {
	return &Heartbeat{script: rueidis.NewLuaScript(heartbeatSrc)}
}

// Beat announces id in the set at key for ttl and returns the number of
// live instances.
func (h *Heartbeat) Beat(ctx context.Context, c rueidis.Client, key, id string, ttl time.Duration) (int64, error) {
	return h.script.Exec(ctx, c, []string{key}, []string{id, strconv.FormatInt(ttl.Milliseconds(), 10)}).AsInt64()
}
