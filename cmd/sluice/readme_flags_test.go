package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// readmeSetting is one row of README.md's table of settings.
type readmeSetting struct {
	line                     int
	flag, env, key, defValue string
}

// readmeSettings reads the table under "## Configuration" of README.md:
// the flag (without its --), variable and key without their backquotes,
// the default as written, which readmeDefault reads.
func readmeSettings(t *testing.T) []readmeSetting {
	t.Helper()
	text, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	var rows []readmeSetting
	inTable := false
	for i, line := range strings.Split(string(text), "\n") {
		if strings.HasPrefix(line, "| flag | environment | file key | default |") {
			inTable = true
			continue
		}
		if !inTable || strings.HasPrefix(line, "|---") {
			continue
		}
		if !strings.HasPrefix(line, "|") {
			break
		}
		// The description, last, may hold anything; the first four cells
		// hold no "|".
		cells := strings.SplitN(line, "|", 6)
		if len(cells) < 6 {
			t.Fatalf("README.md:%d: want 5 cells: %s", i+1, line)
		}
		cell := func(n int) string { return strings.Trim(strings.TrimSpace(cells[n]), "`") }
		rows = append(rows, readmeSetting{
			line:     i + 1,
			flag:     strings.TrimPrefix(cell(1), "--"),
			env:      cell(2),
			key:      cell(3),
			defValue: strings.TrimSpace(cells[4]),
		})
	}
	if len(rows) == 0 {
		t.Fatal("README.md: no table of settings (its header changed?)")
	}
	return rows
}

// readmeDefault is a default as the README writes it, as its flag would be
// given it. The README writes a default for a reader: `50ms`, off for a
// boolean, (none) or (off) for nothing, and a first value in backquotes
// followed by what it means (`0` (never), `200µs`; `0` under a CPU quota).
func readmeDefault(cell string, isBool bool) string {
	switch {
	case cell == "off" && isBool:
		return "false"
	case strings.HasPrefix(cell, "("):
		return ""
	case strings.HasPrefix(cell, "`"):
		v, _, _ := strings.Cut(cell[1:], "`")
		return v
	}
	return cell
}

// TestREADMESettingsTable checks the README's table of settings against the
// flags sluice defines, both ways, and each row's default against its
// flag's. A default is given to the flag as the README writes it (its
// flag parses 512mb, 10s, off), so a form the flag prints otherwise
// (512mb, not 536870912) is no drift.
func TestREADMESettingsTable(t *testing.T) {
	fs := newFlagSet(&options{})
	rows := readmeSettings(t)
	documented := map[string]bool{}
	for _, r := range rows {
		if documented[r.flag] {
			t.Errorf("README.md:%d: --%s has a second row", r.line, r.flag)
		}
		documented[r.flag] = true
		f := fs.Lookup(r.flag)
		if f == nil {
			t.Errorf("README.md:%d: --%s is no flag of sluice", r.line, r.flag)
			continue
		}
		b, isBool := f.Value.(interface{ IsBoolFlag() bool })
		want := readmeDefault(r.defValue, isBool && b.IsBoolFlag())
		if err := f.Value.Set(want); err != nil {
			t.Errorf("README.md:%d: --%s's default %s does not parse: %v", r.line, r.flag, r.defValue, err)
		} else if got := f.Value.String(); got != f.DefValue {
			t.Errorf("README.md:%d: --%s's default is %s (%q), the code's %q", r.line, r.flag, r.defValue, got, f.DefValue)
		}
	}
	fs.VisitAll(func(f *flag.Flag) {
		if !documented[f.Name] {
			t.Errorf("--%s is missing from README.md's table of settings", f.Name)
		}
	})
}

// TestREADMESettingsNames sets each row's setting by its environment
// variable and by its file key, and sees the same outcome as from its flag
// on the command line: sluice's own parsing decides which names it reads,
// not a copy of its rule here.
func TestREADMESettingsNames(t *testing.T) {
	base, err := parseFlags(nil, noEnv, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	// A value of --config: an empty file.
	emptyFile := filepath.Join(dir, "empty.yaml")
	if err := os.WriteFile(emptyFile, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	values := slices.Concat(probeValues, []string{emptyFile})
	fs := newFlagSet(&options{})
	for _, r := range readmeSettings(t) {
		if fs.Lookup(r.flag) == nil {
			continue // TestREADMESettingsTable says so
		}
		v := probeValue(t, r.flag, base, values)
		want := outcome(r.flag, []string{"--" + r.flag + "=" + v}, noEnv)
		env := func(name string) (string, bool) { return v, name == r.env }
		if got := outcome(r.flag, nil, env); got != want {
			t.Errorf("README.md:%d: %s=%s: %s, where --%s=%s: %s", r.line, r.env, v, got, r.flag, v, want)
		}
		// A key of (none) is one the file must refuse: the flag's name,
		// which every other setting's key is, is tried.
		key := r.key
		if key == "(none)" {
			key = r.flag
		}
		path := filepath.Join(dir, r.flag+".yaml")
		if err := os.WriteFile(path, fmt.Appendf(nil, "%s: %q\n", key, v), 0o600); err != nil {
			t.Fatal(err)
		}
		got := outcome(r.flag, []string{"--config", path}, noEnv)
		if r.key == "(none)" && got == want {
			t.Errorf("README.md:%d: --%s has no file key in the table, but the file's %s: %s sets it", r.line, r.flag, key, v)
		} else if r.key != "(none)" && got != want {
			t.Errorf("README.md:%d: file key %s: %s: %s, where --%s=%s: %s", r.line, key, v, got, r.flag, v, want)
		}
	}
}

// probeValues are values of each kind of setting: a number, a duration, a
// boolean, a size, an address, an output limit, and some of the words the
// string settings take (a file, for --config, is the test's).
var probeValues = []string{"7", "1ms", "true", "2mb", "127.0.0.1:29001", "normal 1mb 1mb 1", "debug", "json", "open", "0.5", "no"}

// probeValue is the first of values that changes --flag's setting.
// That of a setting that needs another (--tls-key-file, --tls-cert-file)
// is refused, but its setting is kept: parseFlags fills options.settings
// before it checks how they go together.
func probeValue(t *testing.T, flag string, base options, values []string) string {
	t.Helper()
	for _, v := range values {
		// No settings: the value was refused as it was read.
		if o, _ := parseFlags([]string{"--" + flag + "=" + v}, noEnv, io.Discard); o.settings != nil && o.settings[flag] != base.settings[flag] {
			return v
		}
	}
	t.Fatalf("--%s takes none of %q", flag, values)
	return ""
}

// outcome is what parseFlags makes of args and env: flag's setting as it
// took effect, and its error if any.
func outcome(flag string, args []string, env func(string) (string, bool)) string {
	o, err := parseFlags(args, env, io.Discard)
	return fmt.Sprintf("set to %q, error %v", o.settings[flag], err)
}
