package lua_test

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"net"
	"testing"
	"time"

	"github.com/sluice-rl/sluice/lua"
	"github.com/sluice-rl/sluice/router/clustertest"
	"github.com/sluice-rl/sluice/router/reply"
)

// A many call written as raw RESP (AppendMany) and read from the node's
// raw reply (ReadMany) decides exactly as DoMany through rueidis: the same
// calls on twin buckets get the same outcomes, errors and splits included.
func TestRawManyMatchesDoMany(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	s := newShards(t, ctx, clustertest.Config{Replicas: -1})
	th := lua.NewThrottle()
	conn, err := net.Dial("tcp", s.c.Nodes[0].Addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	br := bufio.NewReader(conn)
	raw := func(calls []lua.Call) ([]lua.Outcome, error) {
		conn.SetDeadline(time.Now().Add(10 * time.Second))
		if _, err := conn.Write(th.AppendMany(nil, calls)); err != nil {
			t.Fatal(err)
		}
		r, err := reply.Read(br, nil)
		if err != nil {
			t.Fatal(err)
		}
		out := make([]lua.Outcome, len(calls))
		return out, lua.ReadMany(r, out)
	}
	now := s.shardNow(t, ctx, time.Hour)
	keys := s.keysOn(0, 8, "raw:")
	twin := func(prefix string) []lua.Call {
		var calls []lua.Call
		for i, k := range keys {
			// Pairs of the same numbers: the second of each is sent as "=".
			h := i / 2
			calls = append(calls, lua.Call{Key: prefix + k, Capacity: int64(3 + h), U: 1000, V: int64(1 + h), Cost: int64(1 + h%3), N: int64(1 + h%2), Now: now + int64(h)})
		}
		return calls
	}
	// A key that is no bucket: its one bucket's error, not the call's.
	if err := s.cl.Do(ctx, s.cl.B().Set().Key("{"+keys[0]+"}:x").Value("x").Build()).Error(); err != nil {
		t.Fatal(err)
	}
	for round := range 4 {
		a, b := twin("a{"), twin("b{")
		for i := range a {
			a[i].Key += "}"
			b[i].Key += "}"
		}
		if round == 3 {
			a[0].Key, b[0].Key = "{"+keys[0]+"}:x", "{"+keys[0]+"}:x"
		}
		want := make([]lua.Outcome, len(a))
		th.DoMany(ctx, s.nodes[0], a, want)
		got, err := raw(b)
		if err != nil {
			t.Fatalf("round %d: ReadMany: %v", round, err)
		}
		for i := range want {
			if (want[i].Err == nil) != (got[i].Err == nil) || want[i].Result != got[i].Result || want[i].Taken != got[i].Taken {
				t.Fatalf("round %d, bucket %d: raw %+v, DoMany %+v", round, i, got[i], want[i])
			}
		}
		if round == 3 {
			var le *lua.Error
			if !errors.As(got[0].Err, &le) || !le.IsWrongType() {
				t.Errorf("a key that is no bucket: %v, want WRONGTYPE", got[0].Err)
			}
		}
	}
	// A node without the script answers the whole call NOSCRIPT.
	if err := s.nodes[0].Do(ctx, s.nodes[0].B().ScriptFlush().Build()).Error(); err != nil {
		t.Fatal(err)
	}
	_, err = raw(twin("c"))
	var le *lua.Error
	if !errors.As(err, &le) || !le.IsNoScript() {
		t.Errorf("after SCRIPT FLUSH: %v, want NOSCRIPT", err)
	}
}

// ReadMany refuses what is not a many reply of the right length, never
// panics, and reads both protocols' integers and strings. Only an error
// reply of the whole call comes back as an *Error (what callers take for
// NOSCRIPT, MOVED...), and what it takes is a reply.
func FuzzReadMany(f *testing.F) {
	f.Add([]byte("*5\r\n:0\r\n:2\r\n:0\r\n:100\r\n:1\r\n"), 1)
	f.Add([]byte("*5\r\n:3\r\n$9\r\nWRONGTYPE\r\n:0\r\n:0\r\n:0\r\n"), 1)
	f.Add([]byte("-NOSCRIPT No matching script\r\n"), 2)
	f.Add([]byte("*10\r\n:1\r\n:0\r\n:5\r\n:9\r\n:0\r\n:2\r\n$3\r\nabc\r\n:5\r\n:0\r\n:0\r\n"), 2)
	f.Fuzz(func(t *testing.T, r []byte, n int) {
		if n < 0 || n > 64 {
			return
		}
		out := make([]lua.Outcome, n)
		err := lua.ReadMany(r, out)
		var le *lua.Error
		if errors.As(err, &le) != (len(r) > 0 && r[0] == '-') {
			t.Fatalf("ReadMany(%q): %#v", r, err)
		}
		if err == nil {
			if _, rerr := reply.Read(bufio.NewReader(bytes.NewReader(r)), nil); rerr != nil {
				t.Fatalf("ReadMany(%q) took what is no reply: %v", r, rerr)
			}
		}
	})
}
