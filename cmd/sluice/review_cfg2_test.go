package main

import (
	"io"
	"path/filepath"
	"strings"
	"testing"
)

// A one-element list was taken for any setting (timeout: [5] as 5),
// where the README gives a list to cluster and hot-keys alone.
func TestConfigListOnlyForClusterAndHotKeys(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sluice.yaml")
	for _, text := range []string{"read-from-replicas: [true]\n", "\ntimeout: [5]\n", "listen: [\"127.0.0.1:0\"]\n"} {
		writeConfig(t, path, text)
		key := strings.TrimSpace(strings.SplitN(text, ":", 2)[0])
		line := "line 1:"
		if text[0] == '\n' {
			line = "line 2:"
		}
		_, err := parseFlags([]string{"--config", path}, noEnv, io.Discard)
		if err == nil || !strings.Contains(err.Error(), line) || !strings.Contains(err.Error(), key+": a list is taken by cluster and hot-keys alone") {
			t.Errorf("%q: %v, want an error naming %s %s as taking no list", text, err, line, key)
		}
	}
	writeConfig(t, path, "hot-keys: [a]\ncluster: [\"127.0.0.1:1\"]\n")
	if o, err := parseFlags([]string{"--config", path}, noEnv, io.Discard); err != nil || o.hotKeys != "a" || o.cluster != "127.0.0.1:1" {
		t.Errorf("hot-keys and cluster as lists: %q %q %v", o.hotKeys, o.cluster, err)
	}
}
