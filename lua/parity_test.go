package lua_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/sluice-rl/sluice/lua"
	"github.com/sluice-rl/sluice/router/clustertest"
)

// A value shaped like a split marker that sluice cannot read (a caller
// wrote it, through passthrough) is the bucket's WRONGTYPE on the
// declared path (Do) as on the many one (DoMany), never an error of
// another kind, which the router would take for its shard's failure.
func TestUnreadableMarkerIsWrongType(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	s := newShards(t, ctx, clustertest.Config{Primaries: 1, Replicas: -1})
	th := lua.NewThrottle()
	for _, v := range []string{"~1:9999999999999:3:", "~1:9999999999999:0:g:a,,b", "~1:9999999999999:0:g:{a}"} {
		if err := s.cl.Do(ctx, s.cl.B().Set().Key("forged").Value(v).Build()).Error(); err != nil {
			t.Fatal(err)
		}
		calls := []lua.Call{{Key: "forged", Capacity: 5, U: 86_400_000_000, V: 1, Cost: 1}}
		res, errs := make([]lua.Result, 1), make([]error, 1)
		th.Do(ctx, s.cl, calls, res, errs)
		out := make([]lua.Outcome, 1)
		th.DoMany(ctx, s.nodes[0], calls, out)
		for path, err := range map[string]error{"Do": errs[0], "DoMany": out[0].Err} {
			// throttle.lua answers such a marker as the WRONGTYPE it is: the
			// declared call's error reply, or a many call's bucket's error.
			var le *lua.Error
			re, isRedis := rueidis.IsRedisErr(err)
			if !(errors.As(err, &le) && le.IsWrongType()) && !(isRedis && strings.HasPrefix(re.Error(), "WRONGTYPE")) {
				t.Errorf("%s on %q: %v, want WRONGTYPE", path, v, err)
			}
		}
	}
}
