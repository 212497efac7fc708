package proxy_test

import (
	"strconv"
	"strings"
	"testing"

	"github.com/sluice-rl/sluice/proxy"
	"github.com/sluice-rl/sluice/router"
	"github.com/sluice-rl/sluice/router/clustertest"
)

// Redis 7.0 reads CLIENT TRACKING's options before it looks at ON or OFF,
// and OFF with sound options is +OK; it answers UNPAUSE +OK and CACHING,
// of a client without tracking, an error of its own. sluice, which never
// pauses, refused them all by name. The answers below are redis-server
// 7.0.15's.
func TestClientTrackingOffUnpauseCachingAsRedis(t *testing.T) {
	us, err := proxy.ParseUsers("user default on nopass ~* &* +@all\nuser op on nopass ~* &* +@all -@admin", "")
	if err != nil {
		t.Fatal(err)
	}
	eachIOConfig(t, proxy.Config{Decider: router.NewMemory(0), Users: us}, func(t *testing.T, cfg proxy.Config) {
		addr := serveConfig(t, cfg)
		conn, other := dialRaw(t, addr), dialRaw(t, addr)
		id := strings.TrimSuffix(strings.TrimPrefix(conn.do("CLIENT", "ID"), ":"), "\r\n")
		otherID := strings.TrimSuffix(strings.TrimPrefix(other.do("CLIENT", "ID"), ":"), "\r\n")
		const syntax, noSuch = "-ERR syntax error\r\n", "-ERR The client ID you want redirect to does not exist\r\n"
		for _, tc := range []struct {
			cmd  []string
			want string
		}{
			{[]string{"CLIENT", "TRACKING", "OFF", "BCAST"}, "+OK\r\n"},
			{[]string{"CLIENT", "TRACKING", "off", "PREFIX", "a"}, "+OK\r\n"},
			{[]string{"CLIENT", "TRACKING", "OFF", "bcast", "PREFIX", "a", "PREFIX", "b", "OPTIN", "OPTOUT", "NOLOOP"}, "+OK\r\n"},
			{[]string{"CLIENT", "TRACKING", "OFF", "REDIRECT", otherID}, "+OK\r\n"},
			{[]string{"CLIENT", "TRACKING", "OFF", "REDIRECT", id}, "+OK\r\n"},
			{[]string{"CLIENT", "TRACKING", "OFF", "REDIRECT", "99999"}, noSuch},
			{[]string{"CLIENT", "TRACKING", "OFF", "REDIRECT", "0"}, noSuch},
			{[]string{"CLIENT", "TRACKING", "OFF", "REDIRECT", "+" + id}, "-ERR value is not an integer or out of range\r\n"},
			{[]string{"CLIENT", "TRACKING", "OFF", "REDIRECT", id, "REDIRECT", "x"}, "-ERR A client can only redirect to a single other client\r\n"},
			{[]string{"CLIENT", "TRACKING", "OFF", "REDIRECT"}, syntax},
			{[]string{"CLIENT", "TRACKING", "OFF", "BCAST", "PREFIX"}, syntax},
			{[]string{"CLIENT", "TRACKING", "OFF", "foo"}, syntax},
			{[]string{"CLIENT", "TRACKING", "foo"}, syntax},
			{[]string{"CLIENT", "TRACKING", "foo", "REDIRECT", "99999"}, noSuch},
			{[]string{"CLIENT", "TRACKING", "ON", "bar"}, syntax},
			{[]string{"CLIENT", "UNPAUSE"}, "+OK\r\n"},
			{[]string{"CLIENT", "CACHING", "yes"}, "-ERR CLIENT CACHING can be called only when the client is in tracking mode with OPTIN or OPTOUT mode enabled\r\n"},
			{[]string{"CLIENT", "CACHING", "foo"}, "-ERR CLIENT CACHING can be called only when the client is in tracking mode with OPTIN or OPTOUT mode enabled\r\n"},
			{[]string{"CLIENT", "GETREDIR"}, ":-1\r\n"},
			{[]string{"AUTH", "op", "x"}, "+OK\r\n"},
		} {
			if got := conn.do(tc.cmd...); got != tc.want {
				t.Errorf("%q: %q, want %q", tc.cmd, got, tc.want)
			}
		}
		// What sluice does not take, once Redis's own checks pass.
		for _, opt := range [][]string{{"BCAST"}, {"REDIRECT", otherID}} {
			if got := conn.do(append([]string{"CLIENT", "TRACKING", "ON"}, opt...)...); !strings.HasPrefix(got, "-ERR sluice does not support CLIENT TRACKING ON with "+opt[0]) {
				t.Errorf("CLIENT TRACKING ON %q: %q, want it refused", opt, got)
			}
		}
		// As Redis, UNPAUSE is an administrator's (@admin).
		if got := conn.do("CLIENT", "UNPAUSE"); !strings.HasPrefix(got, "-NOPERM ") || !strings.Contains(got, "'client|unpause'") {
			t.Errorf("CLIENT UNPAUSE of a user without @admin: %q, want NOPERM", got)
		}
	})
}

// Redis sets a client's lastinteraction at each write to it, so CLIENT
// LIST's idle= of a subscriber sent a message, or of a blocked client
// answered, is 0 (seen on redis-server 7.0.15). sluice counted only from
// the last command the client sent. Both paths are served at once, so
// that the second they must wait for idle= to show is waited once.
func TestClientListIdleResetByWritesToTheClient(t *testing.T) {
	c := clustertest.New(t, clustertest.Config{Replicas: -1})
	r := newForwarding(t, c)
	type served struct {
		loops             int
		other, sub, block *rawConn
		subID, blockID    string
		key               string
	}
	idle := func(s *served, id string) int {
		t.Helper()
		line := s.other.do("CLIENT", "LIST", "ID", id)
		_, v, ok := strings.Cut(line, " idle=")
		n, err := strconv.Atoi(strings.Fields(v + " ")[0])
		if !ok || err != nil {
			t.Fatalf("loops %d: CLIENT LIST ID %s: %q", s.loops, id, line)
		}
		return n
	}
	var all []*served
	for _, loops := range []int{0, -1} {
		addr := serveConfig(t, proxy.Config{Decider: r, Forwarder: r, Loops: loops})
		s := &served{loops: loops, other: dialRaw(t, addr), sub: dialRaw(t, addr), block: dialRaw(t, addr),
			key: "{idlew}l" + strconv.Itoa(-loops)}
		s.subID = strings.TrimSuffix(strings.TrimPrefix(s.sub.do("CLIENT", "ID"), ":"), "\r\n")
		s.blockID = strings.TrimSuffix(strings.TrimPrefix(s.block.do("CLIENT", "ID"), ":"), "\r\n")
		s.sub.do("SUBSCRIBE", "idlew"+s.key)
		s.block.send([]string{"BLPOP", s.key, "0"})
		all = append(all, s)
	}
	for _, s := range all {
		waitUntil(t, "the clients are idle a second", func() bool { return idle(s, s.subID) >= 1 && idle(s, s.blockID) >= 1 })
	}
	for _, s := range all {
		if got := s.other.do("PUBLISH", "idlew"+s.key, "m"); got != ":1\r\n" {
			t.Fatalf("loops %d: PUBLISH: %q", s.loops, got)
		}
		s.sub.read()
		s.other.do("RPUSH", s.key, "x")
		s.block.read()
		// Polled: the message may reach the client before its write is
		// recorded. Without the reset idle= only grows.
		waitUntil(t, "the subscriber sent a message is not idle", func() bool { return idle(s, s.subID) == 0 })
		waitUntil(t, "the blocked client answered is not idle", func() bool { return idle(s, s.blockID) == 0 })
	}
}
