package proxy_test

import (
	"fmt"
	"math/rand/v2"
	"strconv"
	"testing"

	"github.com/sluice-rl/sluice/router/bucket/buckettest"
)

// cellModel is redis-cell's RateLimiter::rate_limit and its reply
// (src/cell/mod.rs, src/lib.rs), line for line: times in ns, the key's
// expiry in whole ms as RedisModule_SetExpire keeps it.
type cellModel struct {
	tat    map[string]int64 // ns
	expire map[string]int64 // ms
}

func (m *cellModel) throttle(key string, burst, count, period, qty, now int64) [5]int64 {
	ei := int64(float64(period*1e9) / float64(count))
	dvt := ei * (burst + 1)
	increment := ei * qty
	tatVal, ok := m.tat[key]
	if ok && now/1e6 > m.expire[key] {
		ok = false
	}
	tat := now
	if ok {
		tat = tatVal
	}
	newTat := tat + increment
	if now > tat {
		newTat = now + increment
	}
	diff := now - (newTat - dvt)
	retry := int64(-1e9)
	limited := int64(0)
	var ttl int64
	if diff < 0 {
		if increment <= dvt {
			retry = -diff
		}
		limited, ttl = 1, tat-now
	} else {
		ttl = newTat - now
		m.tat[key], m.expire[key] = newTat, now/1e6+ttl/1e6
	}
	remaining := int64(0)
	if next := dvt - ttl; next > -ei {
		remaining = int64(float64(next/1000) / float64(ei/1000))
	}
	secs := func(d int64) int64 {
		s := int64(float64(d) / 1e9)
		if d%1e9/1e6 > 0 {
			s++
		}
		return s
	}
	return [5]int64{limited, burst + 1, remaining, secs(retry), secs(ttl)}
}

// CL.THROTTLE answers as redis-cell's GCRA over random sequences, limits
// mixed on a key, whose instants and token intervals are whole ms: the
// README's differences (a part of a second under 1 ms rounded up, finer
// counts computed exactly) need finer times, and a peek's is excepted.
func TestCellThrottleMatchesRedisCell(t *testing.T) {
	c := &clockedBuckets{tats: make(map[string]int64)}
	conn, r := raw(t, serve(t, c))
	m := &cellModel{tat: make(map[string]int64), expire: make(map[string]int64)}
	limits := [][3]int64{{0, 1, 1}, {4, 1, 1}, {15, 30, 60}, {2, 1, 3}, {9, 5, 1}, {1, 2, 1}, {3, 4, 2}, {5, 1, 10}, {0, 2, 3}}
	rng := rand.New(rand.NewPCG(1, 2))
	ms := int64(0)
	for i := range 4000 {
		key := "k" + strconv.Itoa(rng.IntN(3))
		l := limits[rng.IntN(len(limits))]
		qty := int64(rng.IntN(int(l[0]) + 4))
		switch rng.IntN(4) {
		case 0:
		case 1:
			ms += int64(rng.IntN(10))
		case 2:
			ms += int64(rng.IntN(1500))
		default:
			ms += int64(rng.IntN(20000))
		}
		c.at(ms)
		now := (buckettest.Start + ms*1000) * 1000
		want := m.throttle(key, l[0], l[1], l[2], qty, now)
		args := []string{"CL.THROTTLE", key, strconv.FormatInt(l[0], 10), strconv.FormatInt(l[1], 10), strconv.FormatInt(l[2], 10), strconv.FormatInt(qty, 10)}
		got := fmt.Sprint(roundTrip(t, conn, r, args...))
		if qty == 0 && want[0] == 1 {
			// README: a peek is answered allowed on a bucket another
			// limit left emptier than this one can be.
			want[0], want[3] = 0, -1
		}
		if w := fmt.Sprint(want[:]); got != w {
			t.Fatalf("step %d at %d ms: %q: got %s, redis-cell %s", i, ms, args, got, w)
		}
	}
}
