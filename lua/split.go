package lua

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/rueidis"
)

//go:embed split.lua
var splitSrc string

// Split is what a parent bucket's split marker says: the key is hot and
// decided by sub-buckets, one per hash tag, until the marker lapses.
type Split struct {
	Tags []string
	// Gen names the split; it is part of every sub-bucket's key.
	Gen string
	// Base is the fullest a sub-bucket may be, as stored ("0": full); a
	// missing one starts there.
	Base string
	// TTL is how long the split holds from the answer, on the shard's clock.
	TTL time.Duration
}

// SubKey is the Redis key of sub-bucket i of the split of the bucket
// named key (the caller's key): "sluice{tag}gen:key". Its {tag} places
// it whatever braces key has; no caller's bucket key starts that way.
func (s *Split) SubKey(i int, key string) string {
	return "sluice{" + s.Tags[i] + "}" + s.Gen + ":" + key
}

// StandInKey is the Redis key where sub-bucket i of the split of key is
// decided while its own shard is down: "sluice{tag}gen.i:key" with the
// tag of sibling j, so on j's shard. Its name differs from every
// sub-bucket's (a '.' where theirs have ':').
func (s *Split) StandInKey(i, j int, key string) string {
	return "sluice{" + s.Tags[j] + "}" + s.Gen + "." + strconv.Itoa(i) + ":" + key
}

// SplitError is a bucket step's answer when its bucket is split: the call
// took nothing and belongs on a sub-bucket.
type SplitError struct {
	Split Split
}

func (e *SplitError) Error() string {
	return fmt.Sprintf("lua: bucket is split into %d sub-buckets", len(e.Split.Tags))
}

// Splitter runs split.lua, which writes or renews a split marker.
type Splitter struct {
	script *rueidis.Lua
}

// NewSplitter returns the wrapper of split.lua.
func NewSplitter() *Splitter {
	return &Splitter{script: rueidis.NewLuaScript(splitSrc)}
}

// Split marks the bucket at key as split into sub-buckets with tags for
// ttl, or renews its split: Renew with all of tags for a new split.
func (s *Splitter) Split(ctx context.Context, c rueidis.Client, key string, tags []string, ttl, ttf time.Duration) (Split, error) {
	return s.Renew(ctx, c, key, Renewal{Tags: tags, TTL: ttl, TTF: ttf})
}

// Renewal is what a caller asks of split.lua.
type Renewal struct {
	// Tags are the hash tags the caller can use, in order. A live split
	// whose tags are the first of them is renewed; any other is closed
	// instead (see split.lua).
	Tags []string
	// N is how many of Tags a new split takes; 0 means all of them. A
	// live split keeps its own number, whatever N: the instance that made
	// it decided. N < 0 makes no split and renews none: it only takes up
	// the split Gen (an instance that follows a split it did not make),
	// and answers a live one as it is.
	N int
	// Gen, when not "", is the split the caller has been deciding the key
	// by. If it lapsed while the parent's shard could not renew it and
	// nothing took from the bucket since, it is taken up again, as it
	// was: the key stays in one set of sub-buckets across the outage. A
	// live split of another name takes nothing of TTF and Spread, which
	// were read of Gen's sub-buckets.
	Gen string
	// TTL is how long the split holds from now.
	TTL time.Duration
	// TTF < 0 keeps the states the marker has; otherwise it is the
	// sub-buckets' mean time until full, read from them now, and becomes
	// the state the split lapses into.
	TTF time.Duration
	// Spread, with TTF >= 0, is how much sooner than TTF the fullest
	// sub-bucket is full, read with it: the base (the fullest a
	// sub-bucket may be from now on, where a missing one starts) is
	// TTF - Spread. 0 takes the mean as the base.
	Spread time.Duration
}

// ErrNotSplit answers a Renewal with N < 0 when the bucket has no split
// to go on with: the caller's lapsed for good, or was replaced.
var ErrNotSplit = errors.New("lua: the bucket is not split")

// Renew marks the bucket at key as split, renews its split or takes it up
// again, as r asks, and returns the marker as written.
func (s *Splitter) Renew(ctx context.Context, c rueidis.Client, key string, r Renewal) (Split, error) {
	ttf := "-1"
	if r.TTF >= 0 {
		ttf = strconv.FormatInt(r.TTF.Microseconds(), 10)
	}
	args := []string{strings.Join(r.Tags, ","), strconv.FormatInt(r.TTL.Milliseconds(), 10), ttf, strconv.Itoa(r.N), r.Gen}
	if r.TTF >= 0 && r.Spread > 0 {
		args = append(args, strconv.FormatInt(max(r.TTF-r.Spread, 0).Microseconds(), 10))
	}
	res := s.script.Exec(ctx, c, []string{key}, args)
	if err := res.Error(); err != nil {
		return Split{}, err
	}
	if n, err := res.AsInt64(); err == nil && n == 0 {
		return Split{}, ErrNotSplit
	}
	split, ok := asSplit(res)
	if !ok {
		return Split{}, fmt.Errorf("lua: split answered %v, want a marker", res)
	}
	return split, nil
}

// End ends the split of the bucket at key: it lapses when it was to, into
// a bucket ttf from full at that instant, the sub-buckets' mean state now,
// and no renewal extends it; full, the fullest sub-bucket's time until
// full, is the base until then. The sub-buckets keep deciding until then
// (instances that follow the marker may use them that long), so the
// bucket must not start fuller. gen names the split whose sub-buckets
// gave ttf and full ("": whichever is live). ended is false when there
// was no live split of that name.
func (s *Splitter) End(ctx context.Context, c rueidis.Client, key, gen string, ttf, full time.Duration) (ended bool, err error) {
	us := func(d time.Duration) string { return strconv.FormatInt(max(d.Microseconds(), 0), 10) }
	n, err := s.script.Exec(ctx, c, []string{key}, []string{"", "0", us(ttf), "0", gen, us(min(full, ttf))}).AsInt64()
	return n == 1, err
}

// Marker reads a stored value as a split marker (live or lapsed):
// ~<base>:<until>:<lapse>:<gen>:<tags>[!], base and lapse TATs (see
// isTAT), until 1 to 13 digits, gen and each of 1 to MaxTags tags
// [0-9a-z]+: the markers the scripts accept, no other. TTL is not in it.
func Marker(v string) (Split, bool) {
	f := strings.SplitN(v, ":", 5)
	if len(f) != 5 || !strings.HasPrefix(v, "~") {
		return Split{}, false
	}
	f[0] = f[0][1:]
	if !isTAT(f[0]) || !isTAT(f[2]) || len(f[1]) > 13 || !isWord(f[1], "0123456789") {
		return Split{}, false
	}
	const alnum = "0123456789abcdefghijklmnopqrstuvwxyz"
	tags := strings.SplitN(strings.TrimSuffix(f[4], "!"), ",", MaxTags+1)
	if len(tags) > MaxTags {
		return Split{}, false
	}
	for _, tag := range tags {
		if !isWord(tag, alnum) {
			return Split{}, false
		}
	}
	if !isWord(f[3], alnum) {
		return Split{}, false
	}
	return Split{Tags: tags, Gen: f[3], Base: f[0]}, true
}

// MaxTags is the most sub-buckets a split marker names, as the scripts
// check it: a split never has more (router.MaxSplit is this), and a
// forged marker naming thousands would make one key as many.
const MaxTags = 16

// maxTAT is int64's maximum: a TAT is a count of ns that Redis stores
// int-encoded, and sluice writes none past it.
const maxTAT = "9223372036854775807"

// isTAT reports whether v is a stored TAT as the scripts accept one: "0"
// (full) or 19 digits no more than int64's maximum.
func isTAT(v string) bool {
	return v == "0" || len(v) == len(maxTAT) && isWord(v, "0123456789") && v <= maxTAT
}

// isWord reports whether s is non-empty and made of chars only.
func isWord(s, chars string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if strings.IndexByte(chars, s[i]) < 0 {
			return false
		}
	}
	return true
}

// asSplit reads the answer {2, marker, ms} of either script.
func asSplit(r rueidis.RedisResult) (Split, bool) {
	marker, ms, ok := markerAnswer(r)
	if !ok {
		return Split{}, false
	}
	split, ok := Marker(marker)
	split.TTL = time.Duration(ms) * time.Millisecond
	return split, ok
}

// markerAnswer reads the answer {2, marker, ms} of either script, the
// marker as it is, readable or not.
func markerAnswer(r rueidis.RedisResult) (marker string, ms int64, ok bool) {
	v, err := r.ToArray()
	if err != nil || len(v) != 3 {
		return "", 0, false
	}
	kind, err1 := v[0].AsInt64()
	marker, err2 := v[1].ToString()
	ms, err3 := v[2].AsInt64()
	if err1 != nil || err2 != nil || err3 != nil || kind != 2 {
		return "", 0, false
	}
	return marker, ms, true
}

// SplitOf is the split in err's chain, or nil; nil costs no allocation.
func SplitOf(err error) *SplitError {
	if err == nil {
		return nil
	}
	var se *SplitError
	if errors.As(err, &se) {
		return se
	}
	return nil
}
