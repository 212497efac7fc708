package proxy_test

import (
	"math/rand"
	"os"
	"strconv"
)

// pathsKeyspace (PATHS_KEYSPACE=1) adds, from a source of its own so that
// the default seeds' pipelines stay as they were, WATCH and UNWATCH mixed
// with commands whose replies a lone Redis shares: KEYS of a pattern that
// matches one key of the run (a fan-out, which after WATCH must keep its
// place among the commands on the watch's connection), EXISTS, DEL and
// RENAME over several keys, TYPE, LMOVE, an RPUSH then a BLPOP or BLMOVE
// it satisfies, HELLO switches and CLIENT REPLY. DBSIZE, SCAN and
// RANDOMKEY are left out: the cluster holds other runs' keys; so is KEYS
// in MULTI, which sluice refuses. (It found a WATCHing client's HELLO
// letting a command on another primary's keys overtake one before it:
// TestWatchingClientsHelloKeepsCommandsOnOtherPrimariesInOrder.)
var pathsKeyspace = os.Getenv("PATHS_KEYSPACE") == "1"

// keyspace adds to p what PATHS_KEYSPACE draws for seed.
func keyspace(p *pipeline, seed int) {
	rng := rand.New(rand.NewSource(int64(seed)*6271 + 11))
	tag := func() string { return "{T" + strconv.Itoa(rng.Intn(len(p.slots))) + "}" }
	name := func() string { return []string{"s", "n", "l"}[rng.Intn(3)] }
	end := p.end()
	var cmds [][]string
	var inline []bool
	add := func(in bool, c ...string) {
		cmds = append(cmds, c)
		inline = append(inline, in)
	}
	// A blocking pop of 0 takes the element its RPUSH, just before, put
	// there; with other generators on, a command may come between them (a
	// RESP2 subscription refuses the RPUSH, another pop takes the element)
	// and 0 would then wait for good, on both paths alike.
	forever := "0"
	if pathsBlocking || pathsPubSub || pathsWide || pathsPublish {
		forever = "0.05"
	}
	multi := false
	for i := range p.cmds {
		if i < end {
			for rng.Intn(3) == 0 {
				in := rng.Intn(5) == 0
				switch n := rng.Intn(14); {
				case n == 0 && !multi:
					add(in, "WATCH", tag()+name())
				case n == 1:
					add(in, "UNWATCH")
				case n == 2 && !multi:
					// Not in MULTI: a fan-out there is sluice's own case.
					add(in, "KEYS", tag()+name())
				case n == 3 && !multi:
					add(in, "KEYS", tag()+"["+name()+"]")
				case n == 4:
					add(in, "EXISTS", tag()+name(), tag()+name(), tag()+name())
				case n == 5:
					add(in, "DEL", tag()+name(), tag()+name())
				case n == 6:
					add(in, "TYPE", tag()+name())
				case n == 7 && !multi:
					k := tag() + "l"
					add(false, "RPUSH", k, "b")
					add(in, "BLPOP", tag()+"l", k, forever)
				case n == 8:
					add(in, "HELLO", strconv.Itoa(2+rng.Intn(2)))
				case n == 9:
					add(in, "CLIENT", "REPLY", []string{"ON", "OFF", "SKIP"}[rng.Intn(3)])
				case n == 10:
					add(in, "RENAME", tag()+name(), tag()+name())
				case n == 11:
					add(in, "LMOVE", tag()+"l", tag()+"l", "LEFT", "RIGHT")
				case n == 12 && !multi:
					k := tag() + "l"
					add(false, "RPUSH", k, "m")
					add(in, "BLMOVE", k, tag()+"l", "RIGHT", "LEFT", forever)
				default:
					add(in, "SET", tag()+"s", "k"+strconv.Itoa(rng.Intn(10)))
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
	p.cmds, p.inline = cmds, inline
}
