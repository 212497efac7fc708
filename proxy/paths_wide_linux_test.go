package proxy_test

import (
	"io"
	"math/rand"
	"net"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/sluice-rl/sluice/router/slot"
)

// pathsWide (PATHS_WIDE=1) widens the pipelines of TestPathsAnswerAlike
// and TestPathsAnswerAsRedis where the default generator is blind, drawn
// from a source of their own so that the default seeds' pipelines stay as
// they were: up to 8 slots, multi-key commands (MGET, MSET, DEL, EXISTS,
// UNLINK, TOUCH) over many of them, keys repeated; now and then a block
// of 1,000 to 10,000 commands (past the loops' 1024 in flight and, with
// big ECHOs, their 256 KiB unsent: backpressure); and pipelines written
// in up to 64 pieces at random byte offsets (mid-command, mid-bulk), a
// little apart so that the server reads them apart. Replies are read
// while the pipeline is written, as a client that pipelines reads them:
// sluice stops reading a client whose replies wait unsent.
var pathsWide = os.Getenv("PATHS_WIDE") == "1"

// widen adds to p what PATHS_WIDE draws for seed.
func widen(p *pipeline, seed int) {
	rng := rand.New(rand.NewSource(int64(seed)*7919 + 17))
	for len(p.slots) < 8 && rng.Intn(3) != 0 {
		p.slots = append(p.slots, rng.Intn(slot.Count))
	}
	tag := func() string { return "{T" + strconv.Itoa(rng.Intn(len(p.slots))) + "}" }
	val := func() string { return "v" + strconv.Itoa(rng.Intn(100)) }
	keys := func(suffix string, n int) []string {
		var a []string
		for range n {
			a = append(a, tag()+suffix[rng.Intn(len(suffix)):][:1])
		}
		return a
	}
	wide := func() []string {
		n := 2 + rng.Intn(7)
		switch rng.Intn(6) {
		case 0:
			return append([]string{"MGET"}, keys("ssnl", n)...)
		case 1:
			c := []string{"MSET"}
			for _, k := range keys("s", n) {
				c = append(c, k, val())
			}
			return c
		case 2:
			return append([]string{"DEL"}, keys("ssnl", n)...)
		case 3:
			return append([]string{"EXISTS"}, keys("ssnl", n)...)
		case 4:
			return append([]string{"UNLINK"}, keys("sn", n)...)
		default:
			return append([]string{"TOUCH"}, keys("snl", n)...)
		}
	}
	// The end of p (a QUIT, a cut-short command or a protocol error)
	// stays its end.
	end := p.end()
	var cmds [][]string
	var inline []bool
	add := func(in bool, c []string) {
		cmds = append(cmds, c)
		inline = append(inline, in)
	}
	big := rng.Intn(8) == 0
	for i := range p.cmds {
		// Nothing between a BLPOP and the RPUSH that answers it at once: a
		// DEL of the list there would have it wait, and the pipeline's end
		// meet it first or not as the timing has it (seed 605).
		if i < end && p.cmds[i][0] != "BLPOP" {
			for rng.Intn(3) == 0 {
				add(rng.Intn(6) == 0, wide())
			}
			if big && rng.Intn(end-i) == 0 {
				big = false
				for range 1000 + rng.Intn(9001) {
					switch rng.Intn(8) {
					case 0:
						add(false, []string{"ECHO", strings.Repeat("b", rng.Intn(4000))})
					case 1:
						add(false, wide())
					case 2:
						add(true, []string{"INCR", tag() + "n"})
					case 3:
						add(false, []string{"GET", tag() + "s"})
					case 4:
						add(false, []string{"SET", tag() + "s", val()})
					case 5:
						add(false, []string{"RPUSH", tag() + "l", val()})
					default:
						add(false, []string{"PING"})
					}
				}
			}
		}
		add(p.inline[i], p.cmds[i])
	}
	p.cmds, p.inline = cmds, inline
	p.splits = nil
	if rng.Intn(2) == 0 {
		size := len(p.bytes(slotTags0, "r", seed))
		for range 1 + rng.Intn(64) {
			p.splits = append(p.splits, rng.Intn(size))
		}
		sortInts(p.splits)
	}
}

// send writes the pipeline's bytes b to c in its pieces; under
// PATHS_WIDE, a little apart.
func (p *pipeline) send(c net.Conn, b []byte) error {
	at := 0
	for _, s := range append(slices.Clip(p.splits), len(b)) {
		if s = min(s, len(b)); s <= at {
			continue
		}
		if pathsWide && at > 0 {
			time.Sleep(200 * time.Microsecond)
		}
		if _, err := c.Write(b[at:s]); err != nil {
			return err
		}
		at = s
	}
	return nil
}

// sendAndRead sends b to c (then ends the client's side if closeWrite)
// while reading every reply until the server closes. A write cut short
// by the server's close (after a QUIT) is no error: the replies tell.
func (p *pipeline) sendAndRead(c net.Conn, b []byte, closeWrite bool) ([]byte, error) {
	sent := make(chan error, 1)
	go func() {
		err := p.send(c, b)
		if err == nil && closeWrite {
			err = c.(*net.TCPConn).CloseWrite()
		}
		sent <- err
	}()
	out, err := io.ReadAll(c)
	<-sent // a write the server's close cut short shows in the replies
	return out, err
}

// pathsPublish (PATHS_PUBLISH=1, with PATHS_PUBSUB=1) adds SPUBLISH and
// SUNSUBSCRIBE of the pipelines' shard channels, and a HELLO 3 first to
// half of them, so that RESP3 clients get their own messages as pushes
// among their replies. A shard channel's message comes from its slot's
// primary on another connection than SPUBLISH's reply: where it lands
// among the replies is timing (Redis writes it before SPUBLISH's reply),
// so the streams are compared without their messages, and the messages
// apart, as a multiset. (It found a RESET or QUIT behind the client's
// own SPUBLISH losing the message: TestPassthroughPublishBeforeReset...,
// ...BeforeQuitIsDelivered.) Not yet alike in TestPathsAnswerAlike: at
// the client's end, a message of an SPUBLISH answered last may come
// after the loop has closed the client (seed 6 now and then); a
// goroutine's client gets it.
var pathsPublish = os.Getenv("PATHS_PUBLISH") == "1"

// publish adds to p what PATHS_PUBLISH draws for seed.
func publish(p *pipeline, seed int) {
	rng := rand.New(rand.NewSource(int64(seed)*104729 + 3))
	tag := func() string { return "{T" + strconv.Itoa(rng.Intn(len(p.slots))) + "}" }
	end := p.end()
	var cmds [][]string
	var inline []bool
	add := func(in bool, c ...string) {
		cmds = append(cmds, c)
		inline = append(inline, in)
	}
	if rng.Intn(2) == 0 {
		add(false, "HELLO", "3")
	}
	multi, reset := false, false
	for i := range p.cmds {
		// Nothing before a BLPOP or BLMOVE: an SUNSUBSCRIBE between it and
		// the RPUSH before it (refused, subscribed in RESP2) has it wait,
		// for good with PATHS_KEYSPACE's timeout 0 (seeds 16 and 26 of
		// all six switches, Redis alike).
		if i < end && !strings.HasPrefix(p.cmds[i][0], "BL") {
			for rng.Intn(3) == 0 {
				n := rng.Intn(6)
				if multi && n < 2 {
					// sluice refuses a subscription in a transaction
					// (documented); SPUBLISH goes in.
					n = 2
				}
				if reset && n >= 2 {
					// Not yet alike: a RESET closes the subscriber's node
					// connections, which the node notices a little later,
					// so an SPUBLISH sent soon after one may still count
					// the channel's old subscription (1, where Redis says
					// 0, or 2 once subscribed again; its message is
					// dropped). No SPUBLISH after a RESET, then.
					if multi {
						continue
					}
					n = rng.Intn(2)
				}
				switch n {
				case 0:
					add(false, "SSUBSCRIBE", tag()+"sch")
				case 1:
					add(false, "SUNSUBSCRIBE", tag()+"sch")
				default:
					add(rng.Intn(5) == 0, "SPUBLISH", tag()+"sch", "m"+strconv.Itoa(rng.Intn(100)))
				}
			}
		}
		add(p.inline[i], p.cmds[i]...)
		switch p.cmds[i][0] {
		case "MULTI":
			multi = true
		case "EXEC", "DISCARD":
			multi = false
		case "RESET":
			multi, reset = false, true
		}
	}
	p.cmds, p.inline = cmds, inline
}

// messagePush is a message of a channel, pattern or shard channel, a
// RESP3 push or (after a HELLO 2 the message came behind) a RESP2 array:
// Redis 7.0 may write one inside EXEC's array (its own PUBLISH in the
// transaction), so they are taken out as bytes, not as replies.
var messagePush = regexp.MustCompile(`[>*]3\r\n\$7\r\nmessage\r\n\$\d+\r\n[^\r]*\r\n\$\d+\r\n[^\r]*\r\n|` +
	`[>*]3\r\n\$8\r\nsmessage\r\n\$\d+\r\n[^\r]*\r\n\$\d+\r\n[^\r]*\r\n|` +
	`[>*]4\r\n\$8\r\npmessage\r\n\$\d+\r\n[^\r]*\r\n\$\d+\r\n[^\r]*\r\n\$\d+\r\n[^\r]*\r\n`)

// apartMessages is stream without its message pushes, and those
// messages, sorted.
func apartMessages(stream []byte) ([]byte, []string) {
	var msgs []string
	for _, m := range messagePush.FindAll(stream, -1) {
		msgs = append(msgs, string(m[1:])) // in either protocol
	}
	slices.Sort(msgs)
	return messagePush.ReplaceAll(stream, nil), msgs
}
