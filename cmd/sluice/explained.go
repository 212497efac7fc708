package main

import (
	"flag"
	"fmt"
	"strings"
	"time"
)

// explained is a flag's value whose error says what is wrong with a bad
// one. The flag package says only "parse error" for a number or a
// duration ("--backend-timeout 50" lacks its unit), on the command line,
// in the environment and in the file alike.
type explained struct{ flag.Value }

func (e *explained) Set(s string) error {
	if g, ok := e.Value.(flag.Getter); ok {
		if _, isInt := g.Get().(int); isInt && !decimal(s) {
			// The flag package reads 010 as octal 8, 0x10 as 16 and 1_000
			// as 1000; Redis's numbers (maxclients, timeout) are decimal
			// and refuse those, a sign + and a leading 0 too.
			return fmt.Errorf("%q is not a whole number: decimal digits, no leading 0, a minus only", s)
		}
	}
	err := e.Value.Set(s)
	if err == nil || err.Error() != "parse error" {
		return err
	}
	g, ok := e.Value.(flag.Getter)
	if !ok {
		return err
	}
	switch g.Get().(type) {
	case time.Duration:
		if _, perr := time.ParseDuration(s); perr != nil {
			return fmt.Errorf("%s: a duration is a number and its unit, like 500ms, 10s or 1m", strings.TrimPrefix(perr.Error(), "time: "))
		}
	case int:
		return fmt.Errorf("%q is not a whole number", s)
	case float64:
		return fmt.Errorf("%q is not a number", s)
	case bool:
		return fmt.Errorf("%q is not a boolean", s)
	}
	return err
}

// decimal reports whether s is written as Redis's string2ll reads a
// number: 0, or a digit 1 to 9 and more digits, after a minus or not.
func decimal(s string) bool {
	d := strings.TrimPrefix(s, "-")
	if d == "0" {
		return s == "0"
	}
	if d == "" || d[0] == '0' {
		return false
	}
	return strings.Trim(d, "0123456789") == ""
}

// String is the value's, or nothing for the zero explained the flag
// package makes to tell a default worth printing.
func (e *explained) String() string {
	if e == nil || e.Value == nil {
		return ""
	}
	return e.Value.String()
}

// IsBoolFlag keeps a boolean flag one that takes no value.
func (e *explained) IsBoolFlag() bool {
	b, ok := e.Value.(interface{ IsBoolFlag() bool })
	return ok && b.IsBoolFlag()
}
