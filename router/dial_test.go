package router

import (
	"bufio"
	"net"
	"testing"
	"time"

	"github.com/sluice-rl/sluice/lua"
	"github.com/sluice-rl/sluice/router/reply"
)

// A loop's bucket connection takes several round trips (AUTH, SCRIPT
// LOAD, and the TCP handshake on a real network): to a node that answers
// each command in rtt, well within the backend timeout, it is made,
// though it takes longer than one call may (the calls that wait for it
// are bounded by the loop, not by the dial).
func TestBucketDialHasItsOwnBound(t *testing.T) {
	const rtt = 30 * time.Millisecond
	addr := serveEach(t, func(conn net.Conn) {
		defer conn.Close()
		br := bufio.NewReader(conn)
		for {
			r, err := reply.Read(br, nil) // a command is an array, as a reply
			if err != nil {
				return
			}
			time.Sleep(rtt)
			if len(r) > 20 && string(r[:20]) == "*2\r\n$4\r\nAUTH\r\n$2\r\npw" {
				conn.Write([]byte("+OK\r\n"))
			} else if len(r) > 0 {
				// AUTH (user) or SCRIPT LOAD: a sha for the load.
				if string(r[:4]) == "*3\r\n" && len(r) > 30 && string(r[4:14]) == "$4\r\nAUTH\r\n" {
					conn.Write([]byte("+OK\r\n"))
				} else {
					conn.Write([]byte("$40\r\n0123456789012345678901234567890123456789\r\n"))
				}
			}
		}
	})
	c := &Cluster{cfg: ClusterConfig{Timeout: 50 * time.Millisecond, Username: "sluice", Password: "pw"}, throttle: lua.NewThrottle()}
	p := c.NewBucketPipe(addr)
	start := time.Now()
	conn, err := p.Dial()
	if err != nil {
		t.Fatalf("bucket dial to a node answering each command in %v (backend timeout %v) failed after %v: %v",
			rtt, c.cfg.Timeout, time.Since(start).Round(time.Millisecond), err)
	}
	conn.Close()
}
