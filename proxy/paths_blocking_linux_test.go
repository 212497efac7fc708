package proxy_test

import (
	"math/rand"
	"os"
	"strconv"
	"strings"
)

// pathsBlocking (PATHS_BLOCKING=1) adds, from a source of its own so that
// the default seeds' pipelines stay as they were, blocking commands with
// short timeouts (BLPOP, BRPOP, BLMOVE, BRPOPLPUSH, BLMPOP, BZPOPMIN,
// BZPOPMAX, BZMPOP, XREAD BLOCK), several pipelined, on keys that now
// hold data, now do not (they wait, then time out), of the wrong type or
// of several slots, with timeouts malformed now and then; mixed with the
// writes that feed them, subscriptions (answered in RESP2 with a refusal,
// in RESP3 with the command's reply), CLIENT REPLY, HELLO switches and
// MULTI. A command that waits makes its reply's place among the client's
// end a matter of timing (README: one not yet sent when the client ends
// its side runs without waiting), so the pipeline ends with RESET and
// QUIT instead of its end, and the client's side stays open until the
// server closes.
var pathsBlocking = os.Getenv("PATHS_BLOCKING") == "1"

// blocking adds to p what PATHS_BLOCKING draws for seed.
func blocking(p *pipeline, seed int) {
	rng := rand.New(rand.NewSource(int64(seed)*7727 + 29))
	tag := func() string { return "{T" + strconv.Itoa(rng.Intn(len(p.slots))) + "}" }
	timeout := func() string {
		if rng.Intn(12) == 0 {
			return []string{"-1", "x", "0.01.5", ""}[rng.Intn(4)]
		}
		return []string{"0.01", "0.005", ".01", "1e-2", "0.02"}[rng.Intn(5)]
	}
	// A list: its own, another that a command of p fills or a string
	// (WRONGTYPE).
	list := func() string { return tag() + []string{"bl", "bl", "bm", "l", "s"}[rng.Intn(5)] }
	id := 0 // stream IDs of the pipeline, rising, alike in both runs
	end := p.end()
	var cmds [][]string
	var inline []bool
	add := func(in bool, c ...string) {
		cmds = append(cmds, c)
		inline = append(inline, in)
	}
	multi := false
	for i := range p.cmds[:end] {
		// Nothing before a BLPOP or BLMOVE of p: its RPUSH, just before,
		// is what answers it at once (one with timeout 0 would wait for
		// good).
		if !strings.HasPrefix(p.cmds[i][0], "BL") {
			for rng.Intn(3) == 0 {
				in := rng.Intn(6) == 0
				switch rng.Intn(22) {
				case 0, 1:
					add(in, "RPUSH", list(), "p"+strconv.Itoa(rng.Intn(10)))
				case 2:
					add(in, "ZADD", tag()+"bz", strconv.Itoa(rng.Intn(5)), "z"+strconv.Itoa(rng.Intn(10)))
				case 3:
					id++
					add(in, "XADD", tag()+"bx", strconv.Itoa(id)+"-1", "f", "v"+strconv.Itoa(rng.Intn(10)))
				case 4, 5:
					add(in, "BLPOP", list(), timeout())
				case 6:
					add(in, "BRPOP", list(), list(), timeout())
				case 7:
					add(in, "BLMOVE", list(), list(), "LEFT", "RIGHT", timeout())
				case 8:
					add(in, "BRPOPLPUSH", list(), list(), timeout())
				case 9:
					add(in, "BLMPOP", timeout(), "2", list(), list(), "RIGHT", "COUNT", strconv.Itoa(1+rng.Intn(3)))
				case 10:
					add(in, "BZPOPMIN", tag()+"bz", timeout())
				case 11:
					add(in, "BZPOPMAX", tag()+"bz", list(), timeout())
				case 12:
					add(in, "BZMPOP", timeout(), "1", tag()+"bz", "MIN")
				case 13:
					add(in, "XREAD", "BLOCK", strconv.Itoa(rng.Intn(20)+1), "STREAMS", tag()+"bx", []string{"$", "0", "0-0", strconv.Itoa(id) + "-0"}[rng.Intn(4)])
				case 14:
					add(in, "XREAD", "COUNT", "1", "BLOCK", "10", "STREAMS", tag()+"bx", tag()+"bx", "0", "$")
				case 15:
					if !multi {
						add(in, "CLIENT", "REPLY", []string{"ON", "OFF", "SKIP"}[rng.Intn(3)])
					}
				case 16:
					if !multi {
						add(in, "HELLO", strconv.Itoa(2+rng.Intn(2)))
					}
				case 17:
					// sluice refuses (un)subscribing in MULTI (documented).
					if !multi {
						add(in, "SSUBSCRIBE", tag()+"sch")
					}
				case 18:
					if !multi {
						add(in, "SUBSCRIBE", tag()+"ch")
					}
				case 19:
					if !multi {
						add(in, "SUNSUBSCRIBE", tag()+"sch")
					}
				case 20:
					if !multi {
						add(in, "UNSUBSCRIBE", tag()+"ch")
					}
				default:
					add(in, "PING")
				}
			}
		}
		add(p.inline[i], p.cmds[i]...)
		switch p.cmds[i][0] {
		case "MULTI":
			multi = true
		case "EXEC", "DISCARD", "RESET":
			multi = false
		}
	}
	add(false, "RESET")
	add(true, "QUIT")
	p.cmds, p.inline = cmds, inline
}
