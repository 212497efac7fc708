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
