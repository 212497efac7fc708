package main

import (
	"errors"
	"fmt"
	"time"

	"github.com/sluice-rl/sluice/proxy"
	"math"
	"strconv"
	"strings"
)

// byteSize is a flag of bytes in Redis's memory syntax (memtoull): a plain
// number of bytes, or one with a unit, case-insensitive: b, k (1000),
// kb (1024), m, mb, g, gb. So a value can be copied from redis.conf.
type byteSize int64

var sizeUnits = []struct {
	suffix string
	mul    int64
}{ // two-letter units first, so that "kb" is not read as "k"
	{"kb", 1 << 10}, {"mb", 1 << 20}, {"gb", 1 << 30},
	{"k", 1e3}, {"m", 1e6}, {"g", 1e9}, {"b", 1},
}

var errSize = errors.New("want bytes, or a number with b, k, kb, m, mb, g or gb (as in redis.conf)")

func (s *byteSize) Set(v string) error {
	digits, mul := strings.ToLower(v), int64(1)
	for _, u := range sizeUnits {
		if d, ok := strings.CutSuffix(digits, u.suffix); ok {
			digits, mul = d, u.mul
			break
		}
	}
	if digits == "" || strings.Trim(digits, "0123456789") != "" {
		return errSize
	}
	n, err := strconv.ParseInt(digits, 10, 64)
	if err != nil || n > math.MaxInt64/mul {
		return errSize
	}
	*s = byteSize(n * mul)
	return nil
}

// String is the value in the largest binary unit that divides it.
func (s *byteSize) String() string {
	n := int64(*s)
	for i := 2; i >= 0 && n != 0; i-- {
		if u := sizeUnits[i]; n%u.mul == 0 {
			return strconv.FormatInt(n/u.mul, 10) + u.suffix
		}
	}
	return strconv.FormatInt(n, 10)
}

// outputLimit is --client-output-buffer-limit, in redis.conf's syntax for
// the normal class: "normal <hard> <soft> <soft seconds>".
type outputLimit proxy.OutputLimit

func (l *outputLimit) Set(v string) error {
	f := strings.Fields(v)
	if len(f) != 4 || strings.ToLower(f[0]) != "normal" {
		return errors.New(`want "normal <hard> <soft> <soft seconds>" (the pubsub class is fixed at 32mb; sluice has no replica class)`)
	}
	var hard, soft byteSize
	if err := hard.Set(f[1]); err != nil {
		return err
	}
	if err := soft.Set(f[2]); err != nil {
		return err
	}
	secs, err := strconv.ParseInt(f[3], 10, 32)
	if err != nil || secs < 0 {
		// Not "0 or more" alone: a number too big for 32 bits is that.
		return fmt.Errorf("the soft limit's seconds must be a whole number from 0 to %d, not %q", math.MaxInt32, f[3])
	}
	*l = outputLimit{Hard: int64(hard), Soft: int64(soft), SoftFor: time.Duration(secs) * time.Second}
	return nil
}

func (l *outputLimit) String() string {
	return fmt.Sprintf("normal %d %d %d", l.Hard, l.Soft, int64(l.SoftFor/time.Second))
}
