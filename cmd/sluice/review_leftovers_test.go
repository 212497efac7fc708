package main

import (
	"io"
	"path/filepath"
	"testing"
)

// An integer flag is read as Redis reads maxclients or timeout (CONFIG SET
// and redis.conf alike): in decimal, and 010, 0x10, 1_000, +10 and -0
// refused. The flag package read 010 as octal 8 and 0x10 as 16, on the
// command line, in the environment and in the file.
func TestIntegerFlagsAreDecimal(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sluice.yaml")
	for _, v := range []string{"010", "0x10", "0o10", "0b10", "1_000", "+10", "-0", "00", "1e3"} {
		writeConfig(t, path, "maxclients: "+v+"\n")
		for _, how := range []struct {
			args []string
			env  map[string]string
		}{
			{[]string{"--maxclients", v}, nil},
			{nil, map[string]string{"SLUICE_MAXCLIENTS": v}},
			{[]string{"--config", path}, nil},
		} {
			if o, err := parseFlags(how.args, envOf(how.env), io.Discard); err == nil {
				t.Errorf("maxclients %q (%v, %v): read as %d, want it refused", v, how.args, how.env, o.maxClients)
			}
		}
	}
	o, err := parseFlags([]string{"--maxclients", "10", "--io-loops", "-1", "--timeout", "0", "--max-blocking", "1000"}, noEnv, io.Discard)
	if err != nil || o.maxClients != 10 || o.loops != -1 || o.idleTimeout != 0 || o.maxBlocking != 1000 {
		t.Errorf("decimal flags: %d %d %d %d, %v", o.maxClients, o.loops, o.idleTimeout, o.maxBlocking, err)
	}
}
