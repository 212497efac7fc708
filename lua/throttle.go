// Package lua holds sluice's Redis scripts and one Go wrapper per script
// that owns its KEYS/ARGV contract.
package lua

import (
	"context"
	"crypto/sha1"
	_ "embed"
	"encoding/hex"
	"fmt"
	"strconv"

	"github.com/redis/rueidis"
)

//go:embed throttle.lua
var throttleSrc string

// Throttle runs throttle.lua, one token-bucket step per call.
//
// It sends EVALSHA and falls back to EVAL for the calls a shard answers
// NOSCRIPT (a promoted replica or a restarted node has an empty script
// cache). It does not use rueidis.Lua.ExecMulti, which issues SCRIPT LOAD to
// every node on every call.
type Throttle struct {
	sha1 string
}

// NewThrottle returns the wrapper of throttle.lua.
func NewThrottle() *Throttle {
	sum := sha1.Sum([]byte(throttleSrc))
	return &Throttle{sha1: hex.EncodeToString(sum[:])}
}

// Result is a step's answer, times in µs rounded up: the fields of
// router/bucket.Result, which converts from it, so that both sides of the
// arithmetic read the same numbers without this package importing router.
type Result struct {
	Limited    bool
	Remaining  int64
	RetryAfter int64
	ResetAfter int64
}

// Call is one step: take Cost tokens from the bucket stored at Key.
type Call struct {
	Key string
	// Capacity, U and V are the limit as the script takes it: Capacity
	// tokens, one refilled every U/V µs, the fraction reduced (C*U <= 2^51,
	// V <= 2^40; router/bucket.Interval holds them so).
	Capacity, U, V int64
	Cost           int64
	// Base, when not "", is the stored TAT a missing bucket starts from
	// ("0": full): a split marker's base, for a sub-bucket. "+<µs>" is a
	// TAT that far from now on the shard's clock: a sub-bucket's state
	// carried from where it was decided before, free of any clock skew
	// between sluice and the shard.
	Base string
	// N is how many calls of Cost the step decides at once, in order (0
	// means 1): many concurrent calls on one hot bucket cost one script.
	N int64
	// Now, when non-zero, replaces the shard's clock (µs since the epoch);
	// only tests set it, to replay known-answer vectors.
	Now int64
}

func (c *Call) args() []string {
	args := []string{
		strconv.FormatInt(c.Capacity, 10),
		strconv.FormatInt(c.U, 10),
		strconv.FormatInt(c.V, 10),
		strconv.FormatInt(c.Cost, 10),
	}
	argc := c.argc()
	if argc >= 5 {
		args = append(args, c.base())
	}
	if argc >= 6 {
		args = append(args, strconv.FormatInt(max(c.N, 1), 10))
	}
	if argc == 7 {
		args = append(args, strconv.FormatInt(c.Now, 10))
	}
	return args
}

// argc is how many ARGV the declared call sends: the optional ones up to
// the last one it needs.
func (c *Call) argc() int {
	switch {
	case c.Now != 0:
		return 7
	case c.N > 1:
		return 6
	case c.Base != "":
		return 5
	}
	return 4
}

// base is the ARGV of Base in a declared call, where "" would not hold the
// place of the ARGV after it.
func (c *Call) base() string {
	if c.Base == "" {
		return "0"
	}
	return c.Base
}

// Do runs calls, pipelined, and stores each outcome in res and errs
// (both len(calls)). Calls of one key run in order. A call on a bucket
// that is split gets a *SplitError.
func (t *Throttle) Do(ctx context.Context, c rueidis.Client, calls []Call, res []Result, errs []error) {
	t.DoBatch(ctx, c, calls, res, nil, errs)
}

// DoBatch is Do for calls that decide N calls each: taken[i] (when taken
// is not nil) is how many of call i's N took their cost, the first ones;
// res[i] is the last one's outcome.
//
// Calls of one key keep their order. Through a cluster client, one
// DoMulti carries at most one call of a key, the next waiting for it:
// rueidis sends a pipeline's redirected commands again by kind, those
// answered MOVED before those answered ASK, so two calls of one bucket at
// a node that ends its slot's move between them (ASK, then MOVED) would
// swap. A node's own client follows no redirect (its caller sends those
// calls again): the calls from its first repeated key on (a hot key's
// groups of several costs) go in one pipeline once those before have
// run. Those before may answer NOSCRIPT (a node whose script cache
// another connection fills meanwhile) and go again as EVAL after calls of
// other keys; once they have, the script is loaded.
func (t *Throttle) DoBatch(ctx context.Context, c rueidis.Client, calls []Call, res []Result, taken []int64, errs []error) {
	cluster := c.Mode() == rueidis.ClientModeCluster
	for first := true; len(calls) > 0; first = false {
		n := len(calls)
		if cluster || first {
			n = distinct(calls, func(c Call) string { return c.Key })
		}
		var tk []int64
		if taken != nil {
			tk, taken = taken[:n], taken[n:]
		}
		t.doBatch(ctx, c, calls[:n], res[:n], tk, errs[:n])
		calls, res, errs = calls[n:], res[n:], errs[n:]
	}
}

// distinct is the length of the longest prefix of xs without two of one
// key. Quadratic: a batch has at most a pipeline's calls (64), and most
// have one.
func distinct[T any](xs []T, key func(T) string) int {
	for j := 1; j < len(xs); j++ {
		for i := range j {
			if key(xs[i]) == key(xs[j]) {
				return j
			}
		}
	}
	return len(xs)
}

func (t *Throttle) doBatch(ctx context.Context, c rueidis.Client, calls []Call, res []Result, taken []int64, errs []error) {
	cmds := make(rueidis.Commands, len(calls))
	for i := range calls {
		cmds[i] = c.B().Evalsha().Sha1(t.sha1).Numkeys(1).Key(calls[i].Key).Arg(calls[i].args()...).Build()
	}
	var retry []int
	for i, r := range c.DoMulti(ctx, cmds...) {
		if e, ok := rueidis.IsRedisErr(r.Error()); ok && e.IsNoScript() {
			retry = append(retry, i)
			continue
		}
		res[i], errs[i] = result(r, taken, i)
	}
	if len(retry) == 0 {
		return
	}
	cmds = cmds[:0]
	for _, i := range retry {
		cmds = append(cmds, c.B().Eval().Script(throttleSrc).Numkeys(1).Key(calls[i].Key).Arg(calls[i].args()...).Build())
	}
	for j, r := range c.DoMulti(ctx, cmds...) {
		res[retry[j]], errs[retry[j]] = result(r, taken, retry[j])
	}
}

// result reads the answer to call i, and how many it took into taken[i].
func result(r rueidis.RedisResult, taken []int64, i int) (Result, error) {
	v, err := r.AsIntSlice()
	if err != nil {
		if marker, ms, ok := markerAnswer(r); ok {
			return Result{}, splitError(marker, ms)
		}
		return Result{}, err
	}
	if len(v) != 4 && len(v) != 5 {
		return Result{}, fmt.Errorf("lua: throttle answered %d values, want 4 or 5", len(v))
	}
	if taken != nil {
		switch {
		case len(v) == 5:
			taken[i] = v[4]
		case v[0] == 0:
			taken[i] = 1
		default:
			taken[i] = 0
		}
	}
	return Result{Limited: v[0] != 0, Remaining: v[1], RetryAfter: v[2], ResetAfter: v[3]}, nil
}
