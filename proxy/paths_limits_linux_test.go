package proxy_test

import (
	"math/rand"
	"os"
	"strconv"
	"strings"
)

// pathsLimits (PATHS_LIMITS=1) adds, from a source of its own so that the
// default seeds' pipelines stay as they were, the limit commands in their
// other forms: THROTTLE, CL.THROTTLE and GCRA with other limits of the
// same emission interval (an hour a token: replies that a few ms between
// the runs do not change), periods written otherwise ("60m", "1H",
// "3600000ms", GCRA's "0x1.c2p11" and "3.6e3"), peeks, and malformed
// forms of each (arity, non-numeric, negative, zero, huge, periods
// "1.5", "1h" where whole seconds are due, hex floats, "inf"). And a key
// declared hot (hotPattern), split into sub-buckets by the router's
// background work whenever it gets to it, so that whether a call meets
// one bucket or the sub-buckets is the timing's: its limit is large
// enough that no call of a pipeline is denied, only that limit is asked
// of it, and hotAlike allows its replies what a split changes. (Runs of
// 40,000 seeds, 1 to 2 seeds each, on either path: a peek of the hot key
// answered full after 5 tokens were taken (seed 39190), or 2 taken on a
// hot key never taken from (seed 10184); with -race, seeds 112, 1015 and
// 2841 of 3,000; with PATHS_WIDE, PATHS_KEYSPACE and PATHS_RESET too, 4
// of 1,500. The peeks were fixed on 2026-12-06, after which 3,000 seeds
// with -race passed. With the four switches, 5,000 seeds on a loaded
// 2-core machine reported 5 failures (it reports no more, so the seeds
// after went unchecked): seed 1287's pipeline cost its hot key more than
// its 3,000 (now kept to half of it, hotSpent); seeds 1370 and 1395, a
// non-hot key 3 tokens emptier on the loops path beside i/o timeouts of
// the load (1287, 1366), passed 3 runs alone each. Not resolved.)
var pathsLimits = os.Getenv("PATHS_LIMITS") == "1"

// hotPattern declares the pipelines' key {T<i>}hot hot.
const hotPattern = "*:hot"

// limits adds to p what PATHS_LIMITS draws for seed.
func limits(p *pipeline, seed int) {
	rng := rand.New(rand.NewSource(int64(seed)*104729 + 23))
	tag := func() string { return "{T" + strconv.Itoa(rng.Intn(len(p.slots))) + "}" }
	// On the hot key, only the limit of hot(): another would meet a split
	// made for that one, or not, as the timing has it. So no "0", "+2"
	// or 9223372036854775807 there, which some argument takes.
	onHot := false
	num := func() string {
		if onHot {
			return []string{"x", "-1", "1.5", "99999999999999999999", "", " 1", "1e3", "0x10"}[rng.Intn(8)]
		}
		return []string{"x", "-1", "0", "1.5", "99999999999999999999", "9223372036854775807", "", " 1", "1e3", "0x10", "+2"}[rng.Intn(11)]
	}
	period := func() string {
		return []string{"1.5x", "h", "0", "-1", "1e12", "0x1p-3", "1e3s", "inf", "nan", "x", "1.5.5", "0.0001ms", "1.0000001s", "99999999999d", ""}[rng.Intn(15)]
	}
	// gcraPeriod is never a valid period: a short one (Redis takes "1.5",
	// "0x1p-3" and "1e-7", this last as 1 µs) refills within the
	// pipeline, as fast as the timing has it.
	gcraPeriod := func() string {
		return []string{"1h", "0", "-1", "1e12", "0x1p40", "inf", "-inf", "nan", "x", "", "1,5", "1e308", "-0x1p-3", "0x"}[rng.Intn(14)]
	}
	cost := func() string { return strconv.Itoa(rng.Intn(3)) }
	valid := func(k string) []string {
		switch rng.Intn(12) {
		case 0:
			return []string{"THROTTLE", k, "5", "1", "1h", cost()}
		case 1:
			return []string{"THROTTLE", k, "3", "2", "2h"}
		case 2:
			return []string{"THROTTLE", k, "3", "1", []string{"60m", "1H", "3600000ms", "3600", "3600.0s", "0.5d"}[rng.Intn(6)], "0"}
		case 3:
			return []string{"CL.THROTTLE", k, "4", "2", "7200", cost()}
		case 4:
			return []string{"CL.THROTTLE", k, "2", "1", "3600", "0"}
		case 5:
			return []string{"GCRA", k, "2", "1", []string{"0x1.c2p11", "3.6e3", "3600.0", "0x1.C2P+11"}[rng.Intn(4)]}
		case 6:
			return []string{"GCRA", k, "4", "2", "7200", "tokens", strconv.Itoa(1 + rng.Intn(2))}
		case 7:
			return []string{"THROTTLE", k, "3", "1", "1h", "5"} // more than the bucket holds
		case 8:
			return []string{"GCRA", k, "2", "1", "3600", "TOKENS", "4"}
		case 9:
			return []string{"CL.THROTTLE", k, "2", "1", "3600", "9"}
		default:
			return []string{"THROTTLE", k, "3", "1", "1h", "0"}
		}
	}
	bad := func(k string) []string {
		switch rng.Intn(20) {
		case 0:
			return []string{"THROTTLE"}
		case 1:
			return []string{"THROTTLE", k, "3", "1"}
		case 2:
			return []string{"THROTTLE", k, num(), "1", "1h"}
		case 3:
			return []string{"THROTTLE", k, "3", num(), "1h"}
		case 4:
			return []string{"THROTTLE", k, "3", "1", period()}
		case 5:
			return []string{"THROTTLE", k, "3", "1", "1h", num()}
		case 6:
			return []string{"THROTTLE", k, "3", "1", "1h", "1", "extra"}
		case 7:
			return []string{"THROTTLE", k, "1000000000000000", "1", "1d"}
		case 8:
			return []string{"CL.THROTTLE", k, "2", "1"}
		case 9:
			return []string{"CL.THROTTLE", k, num(), "1", "3600"}
		case 10:
			return []string{"CL.THROTTLE", k, "2", "1", []string{"1h", "1.5", "-1", "0", "x", "99999999999999999999"}[rng.Intn(6)]}
		case 11:
			return []string{"CL.THROTTLE", k, "2", "1", "3600", num()}
		case 12:
			return []string{"CL.THROTTLE", k, "2", "1", "3600", "1", "2"}
		case 13:
			return []string{"GCRA", k, "2", "1"}
		case 14:
			return []string{"GCRA", k, num(), "1", "3600"}
		case 15:
			// Not num(): a huge count per period is an interval of 1 µs.
			return []string{"GCRA", k, "2", []string{"x", "-1", "0", "1.5", "99999999999999999999", "", "1e3"}[rng.Intn(7)], "3600"}
		case 16:
			return []string{"GCRA", k, "2", "1", gcraPeriod()}
		case 17:
			return []string{"GCRA", k, "2", "1", "3600", "TOKENS"}
		case 18:
			return []string{"GCRA", k, "2", "1", "3600", []string{"TOKENS", "FOO", "tokens"}[rng.Intn(3)], num()}
		default:
			return []string{"THROTTLE", k, "POLICY", "nope"}
		}
	}
	// hotSpent is what the takes of the pipeline cost each hot key, kept
	// to half its 3000 so that none of its calls is denied: near empty, a
	// split key admits its limit within a token per sub-bucket, whichever
	// the timing gives (PATHS_WIDE's long pipelines went past 3000).
	hotSpent := map[string]int{}
	hot := func(k string) []string {
		peek := []string{"THROTTLE", k, "3000", "1", "1h", "0"}
		var c []string
		switch rng.Intn(5) {
		case 0:
			c = []string{"THROTTLE", k, "3000", "1", "1h", cost()}
		case 1:
			c = []string{"CL.THROTTLE", k, "2999", "1", "3600", cost()}
		case 2:
			c = []string{"GCRA", k, "2999", "1", "3600", "TOKENS", strconv.Itoa(1 + rng.Intn(2))}
		case 3:
			return peek
		default:
			onHot = true
			defer func() { onHot = false }()
			return bad(k)
		}
		n, _ := strconv.Atoi(c[len(c)-1])
		if hotSpent[k]+n > 1500 {
			return peek
		}
		hotSpent[k] += n
		return c
	}
	end := p.end()
	var cmds [][]string
	var inline []bool
	add := func(in bool, c ...string) {
		cmds = append(cmds, c)
		inline = append(inline, in)
	}
	for i := range p.cmds {
		if i < end && p.cmds[i][0] != "BLPOP" {
			for rng.Intn(2) == 0 {
				// Inline only where no argument is empty or spaced.
				in := rng.Intn(6) == 0
				var c []string
				switch rng.Intn(3) {
				case 0:
					c = valid(tag() + "b" + strconv.Itoa(rng.Intn(2)))
				case 1:
					c = bad(tag() + "b" + strconv.Itoa(rng.Intn(2)))
				default:
					c = hot(tag() + "hot")
				}
				for _, a := range c {
					if a == "" || strings.ContainsAny(a, " ") {
						in = false
					}
				}
				add(in, c...)
			}
		}
		add(p.inline[i], p.cmds[i]...)
	}
	p.cmds, p.inline = cmds, inline
}

// hotAlike allows two replies of the hot key (capacity 3000) what its
// split leaves to the timing: which sub-buckets a call met, those not met
// estimated, and whether the split was there yet. Each still says allowed
// or denied alike, and in the same unit.
func hotAlike(x, y []byte) bool {
	mx, my := bucketReply.FindSubmatch(x), bucketReply.FindSubmatch(y)
	if mx == nil || my == nil || string(mx[2]) != "3000" || string(my[2]) != "3000" || string(mx[1]) != string(my[1]) {
		return false
	}
	var u, v [6]int64
	for i := 3; i <= 5; i++ {
		u[i], _ = strconv.ParseInt(string(mx[i]), 10, 64)
		v[i], _ = strconv.ParseInt(string(my[i]), 10, 64)
	}
	if d := u[3] - v[3]; d > 30 || d < -30 || u[4] != v[4] && (u[4] < 0 || v[4] < 0) {
		return false
	}
	return (u[5] == 0) == (v[5] == 0) && u[5] < 10*v[5]+10 && v[5] < 10*u[5]+10
}
