package lua

import (
	"fmt"
	"testing"
)

// generalBucket is a bucket of a many reply read as ReadMany reads one
// that decided leaves to it.
func generalBucket(b []byte) (Outcome, []byte, bool) {
	var v [5]rawValue
	for e := range v {
		var ok bool
		if v[e], b, ok = rawElem(b); !ok {
			return Outcome{}, nil, false
		}
	}
	o, ok := rawOutcome(v)
	return o, b, ok
}

// What decided takes, it reads as the general reading does, to the byte:
// the same outcome and the same rest; what it leaves includes every
// bucket that is not a decision.
func FuzzDecided(f *testing.F) {
	for _, s := range []string{
		":0\r\n:2\r\n:0\r\n:100\r\n:1\r\n", ":1\r\n:0\r\n:950\r\n:1000\r\n:0\r\n:0\r\n",
		":0\r\n:-0\r\n:-1\r\n:999999999999999999\r\n:1\r\n", ":0\r\n:1\r\n:1\r\n:1000000000000000000\r\n:1\r\n",
		":0\r\n:9223372036854775807\r\n:-9223372036854775808\r\n:1\r\n:1\r\n",
		":2\r\n$6\r\nmarker\r\n:5\r\n:0\r\n:0\r\n", ":3\r\n$9\r\nWRONGTYPE\r\n:0\r\n:0\r\n:0\r\n",
		":0\r\n:1\r\n:1\r\n:1\r\n:1\n", ":0\r\n:+1\r\n:1\r\n:1\r\n:1\r\n", ":0\r\n:01\r\n:1\r\n:1\r\n:1\r\n", ":0\r\n:\r\n:1\r\n:1\r\n:1\r\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		o, rest, ok := decided(b)
		if !ok {
			return
		}
		wo, wrest, wok := generalBucket(b)
		if !wok || o != wo || fmt.Sprintf("%q", rest) != fmt.Sprintf("%q", wrest) {
			t.Fatalf("%q: decided %+v, %q; the general reading %+v, %q, %v", b, o, rest, wo, wrest, wok)
		}
		if o.Err != nil {
			t.Fatalf("%q: decided %+v", b, o)
		}
	})
}

// A reply of decisions and of buckets that are not (a split, an error)
// reads as each bucket alone does.
func TestReadManyMixesDecisionsAndOthers(t *testing.T) {
	r := []byte("*15\r\n:0\r\n:2\r\n:-1\r\n:100\r\n:1\r\n:2\r\n$6\r\nmarker\r\n:5\r\n:0\r\n:0\r\n:1\r\n:0\r\n:950\r\n:1000\r\n:0\r\n")
	out := make([]Outcome, 3)
	if err := ReadMany(r, out); err != nil {
		t.Fatal(err)
	}
	if out[0].Limited || out[0].Remaining != 2 || out[0].Taken != 1 || out[1].Err == nil || !out[2].Limited || out[2].RetryAfter != 950 {
		t.Fatalf("read %+v", out)
	}
}
