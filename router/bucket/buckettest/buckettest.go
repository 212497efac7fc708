// Package buckettest holds the known-answer vectors that every
// implementation of the sluice bucket (Go and Lua) must reproduce.
package buckettest

import (
	_ "embed"
	"encoding/json"

	"github.com/sluice-rl/sluice/router/bucket"
)

//go:embed vectors.json
var vectorsJSON []byte

// Start is the clock reading, in µs since the epoch, that step times are
// added to: late 2024, so vectors exercise realistic magnitudes.
const Start = 1_733_000_000_000_000

// Case is one bucket driven through a sequence of steps.
type Case struct {
	Name     string
	Capacity int64
	Refill   int64
	PeriodUS int64 `json:"period_us"`
	Steps    []Step
}

// Limit is the case's bucket shape.
func (c Case) Limit() bucket.Limit {
	return bucket.Limit{Capacity: c.Capacity, Refill: c.Refill, Period: c.PeriodUS}
}

// Step takes Cost tokens T µs after Start and expects Want.
type Step struct {
	T    int64
	Cost int64
	Want [4]int64 // limited, remaining, retry_after_us, reset_after_us
	// Capacity, Refill and PeriodUS, when Capacity is set, are this
	// step's limit instead of the case's: a bucket is shared by every
	// limit that names its key.
	Capacity int64
	Refill   int64
	PeriodUS int64 `json:"period_us"`
}

// LimitAt is the limit step s is taken under.
func (c Case) LimitAt(s Step) bucket.Limit {
	if s.Capacity != 0 {
		return bucket.Limit{Capacity: s.Capacity, Refill: s.Refill, Period: s.PeriodUS}
	}
	return c.Limit()
}

// Got puts a result in the shape of Step.Want.
func Got(r bucket.Result) [4]int64 {
	var limited int64
	if r.Limited {
		limited = 1
	}
	return [4]int64{limited, r.Remaining, r.RetryAfter, r.ResetAfter}
}

// Cases decodes the vectors. They are part of the binary's tests, not of
// user input, so a malformed file is a programming error.
func Cases() []Case {
	var v struct{ Cases []Case }
	if err := json.Unmarshal(vectorsJSON, &v); err != nil {
		panic("buckettest: vectors.json: " + err.Error())
	}
	return v.Cases
}

// ExpireAt is when the Lua script lets a bucket stored by bucket.Take go,
// in ms since the epoch: the instant it is full again, rounded up, never
// earlier. (The script computes it from the exact deficit; rounding a
// rounded-up ns value up to ms gives the same ms.) Only the script sets
// an expiry, so only its tests need this.
func ExpireAt(store int64) int64 {
	return (store + 1e6 - 1) / 1e6
}
