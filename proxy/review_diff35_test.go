package proxy_test

import (
	"fmt"
	"regexp"
	"strings"
	"testing"

	"github.com/sluice-rl/sluice/router/clustertest"
)

// CLIENT UNBLOCK unblocks its client at once, as Redis does: CLIENT LIST
// and INFO's blocked_clients, asked right after it, no longer count the
// client blocked, though the node has yet to see its command's wait end.
// (Redis flags it u until its next event loop pass; sluice has no u.)
func TestReviewUnblockedIsNotListedBlocked(t *testing.T) {
	c := clustertest.New(t, clustertest.Config{Replicas: -1})
	r := newForwarding(t, c)
	node := primaryOf(t, c, "{d35}k")
	blockedClients := regexp.MustCompile(`blocked_clients:\d+`)
	flagsOf := func(t *testing.T, line string) string {
		_, flags, _ := strings.Cut(clientLine(t, line), " flags=")
		flags, _, _ = strings.Cut(flags, " ")
		return flags
	}
	sameStepsAsNode(t, r, node.Addr, func(t *testing.T, addr string) []string {
		var got []string
		admin := dialRaw(t, addr)
		v := dialRaw(t, addr)
		id := strings.TrimSuffix(strings.TrimPrefix(v.do("CLIENT", "ID"), ":"), "\r\n")
		for _, how := range [][]string{nil, {"ERROR"}} {
			v.send([]string{"BLPOP", "{d35}k", "0"})
			waitUntil(t, "the client blocks", func() bool { return flagsOf(t, admin.do("CLIENT", "LIST", "ID", id)) == "b" })
			admin.send(append([]string{"CLIENT", "UNBLOCK", id}, how...), []string{"CLIENT", "LIST", "ID", id}, []string{"INFO", "clients"})
			got = append(got, "UNBLOCK "+strings.Join(how, " ")+" -> "+admin.read(),
				fmt.Sprintf("flagged b: %v", strings.Contains(flagsOf(t, admin.read()), "b")),
				blockedClients.FindString(admin.read()),
				"its reply "+v.read())
		}
		return got
	})
}
