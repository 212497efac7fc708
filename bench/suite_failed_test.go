package main

import "testing"

func TestSuiteRunWithFailedCallsGivesNoFigure(t *testing.T) {
	for _, tc := range []struct {
		allowed, limited, errors int64
		fails                    bool
	}{
		{allowed: 900, limited: 100, errors: 0},
		{allowed: 900, limited: 100, errors: 1},
		{allowed: 900, limited: 100, errors: 2, fails: true},
		{errors: 5000, fails: true},
	} {
		r := result{Target: "sluice", Allowed: tc.allowed, Limited: tc.limited, Errors: tc.errors}
		if err := r.failed(); (err != nil) != tc.fails {
			t.Errorf("%+v: %v, want failed %v", tc, err, tc.fails)
		}
	}
}
