package proxy_test

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sluice-rl/sluice/proxy"
	"github.com/sluice-rl/sluice/router/clustertest"
)

// sluice_commands_total is a counter: a scrape never reads less than the
// one before. A command taken again later (here an INFO that asks the
// primaries for their keyspace, behind a GET on a WATCHing client's
// connection) was counted, then counted back until taken again, which a
// scrape in between read as the counter going down: Prometheus takes
// that for a restart, and rate() jumps by the whole count.
func TestReviewCommandsTotalNeverDecreases(t *testing.T) {
	c := clustertest.New(t, clustertest.Config{Replicas: -1})
	r := newForwarding(t, c)
	eachIOConfig(t, proxy.Config{Decider: r, Forwarder: r, Backend: "cluster"}, func(t *testing.T, cfg proxy.Config) {
		srv, addr := serveServer(t, cfg)
		conn := dialRaw(t, addr)
		conn.do("WATCH", "rv:w")
		stop, done := make(chan struct{}), make(chan string)
		go func() {
			prev := -1.0
			for {
				select {
				case <-stop:
					done <- ""
					return
				default:
				}
				v := commandsTotal(scrape(t, srv))
				if v < prev {
					done <- "sluice_commands_total went from " + strconv.FormatFloat(prev, 'f', -1, 64) + " to " + strconv.FormatFloat(v, 'f', -1, 64)
					return
				}
				prev = v
			}
		}()
		var pipeline [][]string
		for range 10 {
			pipeline = append(pipeline, []string{"GET", "rv:w"}, []string{"INFO", "keyspace"})
		}
		var bad string
		// Without the fix it fails in the first rounds, mostly; the
		// bound keeps the test short on a loaded machine.
		end := time.Now().Add(500 * time.Millisecond)
	rounds:
		for i := 0; i < 50 && time.Now().Before(end); i++ {
			conn.send(pipeline...)
			for range pipeline {
				conn.read()
			}
			select {
			case bad = <-done:
				break rounds
			default:
			}
		}
		if bad == "" {
			close(stop)
			bad = <-done
		}
		if bad != "" {
			t.Error(bad)
		}
	})
}

func commandsTotal(text string) float64 {
	for _, line := range strings.Split(text, "\n") {
		if v, ok := strings.CutPrefix(line, "sluice_commands_total "); ok {
			n, _ := strconv.ParseFloat(v, 64)
			return n
		}
	}
	return -1
}
