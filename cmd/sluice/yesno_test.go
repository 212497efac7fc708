package main

import (
	"io"
	"strings"
	"testing"
)

// A boolean flag takes yes and no on the command line as the file and the
// environment take them, besides Go's spellings; anything else is refused
// by name.
func TestBoolFlagsTakeYesAndNo(t *testing.T) {
	for _, tt := range []struct {
		args []string
		env  map[string]string
		want bool
	}{
		{[]string{"--allow-admin"}, nil, true},
		{[]string{"--allow-admin=yes"}, nil, true},
		{[]string{"--allow-admin=YES"}, nil, true},
		{[]string{"--allow-admin=no"}, nil, false},
		{[]string{"--allow-admin=true"}, nil, true},
		{[]string{"--allow-admin=1"}, nil, true},
		{[]string{"--allow-admin=false"}, nil, false},
		{nil, map[string]string{"SLUICE_ALLOW_ADMIN": "yes"}, true},
		{nil, nil, false},
	} {
		o, err := parseFlags(tt.args, envOf(tt.env), io.Discard)
		if err != nil || o.admin != tt.want {
			t.Errorf("%q %v: admin %v, %v; want %v", tt.args, tt.env, o.admin, err, tt.want)
		}
	}
	if _, err := parseFlags([]string{"--allow-admin=maybe"}, noEnv, io.Discard); err == nil || !strings.Contains(err.Error(), `want yes, no, true or false, not "maybe"`) {
		t.Errorf("--allow-admin=maybe: %v", err)
	}
}
