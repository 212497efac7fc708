package main

import (
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"
)

func writeConfig(t *testing.T, path, text string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
}

// The environment wins over the command line, which wins over the file,
// which wins over the defaults.
func TestConfigPrecedence(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sluice.yaml")
	writeConfig(t, path, `
backend-timeout: 10ms
forward-timeout: 3s
max-blocking: 7
hot-keys: [tenant:big, "login:*"]
read-from-replicas: true
protected-mode: no
policies:
  free: {capacity: 100, refill: 10, period: 1s}
`)
	env := map[string]string{"SLUICE_BACKEND_TIMEOUT": "30ms", "SLUICE_MAX_BLOCKING": "9"}
	o, err := parseFlags([]string{"--config", path, "--backend-timeout", "20ms", "--forward-timeout", "4s", "--max-blocking", "8"},
		envOf(env), os.Stderr)
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name      string
		got, want any
	}{
		{"backend-timeout: env over flag over file", o.backendTimeout, 30 * time.Millisecond},
		{"max-blocking: env over flag over file", o.maxBlocking, 9},
		{"forward-timeout: flag over file", o.forwardTimeout, 4 * time.Second},
		{"hot-keys: file, a list", o.hotKeys, "tenant:big,login:*"},
		{"read-from-replicas: file", o.replicas, true},
		{"protected-mode: file", o.protectedMode, "no"},
		{"hot-cooldown: default", o.hotCooldown, 10 * time.Second},
	} {
		if tt.got != tt.want {
			t.Errorf("%s: got %v, want %v", tt.name, tt.got, tt.want)
		}
	}
	if n, _ := o.policies.Len(); n != 1 {
		t.Errorf("got %d policies, want 1", n)
	}
	// Set to nothing is set: plain RESP off, from the environment over a
	// flag, and from the command line over the file.
	tlsOnly := filepath.Join(t.TempDir(), "tls.yaml")
	writeConfig(t, tlsOnly, "listen: 127.0.0.1:6380\ntls-listen: 127.0.0.1:6390\ntls-cert-file: c\ntls-key-file: k\ntls-auth-clients: no\n")
	for _, tt := range []struct {
		args []string
		env  map[string]string
	}{
		{[]string{"--config", tlsOnly, "--listen", "127.0.0.1:6381"}, map[string]string{"SLUICE_LISTEN": ""}},
		{[]string{"--config", tlsOnly, "--listen", ""}, nil},
	} {
		if o, err := parseFlags(tt.args, envOf(tt.env), io.Discard); err != nil || o.listen != "" {
			t.Errorf("%v with %v: listen %q, %v; want none", tt.args, tt.env, o.listen, err)
		}
	}
	for _, name := range []string{"SLUICE_MAX_BLOCKING", "SLUICE_REQUIREPASS", "SLUICE_ACLFILE"} {
		// A number cannot be empty; a password or an ACL file set to
		// nothing would turn authentication off.
		if _, err := parseFlags([]string{"--requirepass", "s3cret"}, envOf(map[string]string{name: ""}), io.Discard); err == nil || !strings.Contains(err.Error(), name) {
			t.Errorf("%s set to nothing: %v, want an error naming it", name, err)
		}
	}
	// Redis's glob: a comma in a class or escaped is part of a pattern.
	if o, err := parseFlags([]string{"--hot-keys", `user[0-9], t[,;]*,a\,b,c`}, noEnv, io.Discard); err != nil || !slices.Equal(hotPatterns(o.hotKeys), []string{"user[0-9]", "t[,;]*", `a\,b`, "c"}) {
		t.Errorf("--hot-keys with classes and escapes: %q, %v", hotPatterns(o.hotKeys), err)
	}
	// Empty sections are none.
	empty := filepath.Join(t.TempDir(), "empty.yaml")
	writeConfig(t, empty, "policies:\nkeys:\n")
	if o, err := parseFlags([]string{"--config", empty}, noEnv, os.Stderr); err != nil || o.policies == nil {
		t.Errorf("empty sections: %v, %v", o.policies, err)
	}
	// SLUICE_CONFIG names the file over --config.
	other := filepath.Join(t.TempDir(), "other.yaml")
	writeConfig(t, other, "backend-timeout: 15ms\n")
	o, err = parseFlags([]string{"--config", path}, envOf(map[string]string{"SLUICE_CONFIG": other}), os.Stderr)
	if n, _ := o.policies.Len(); err != nil || o.backendTimeout != 15*time.Millisecond || n != 0 {
		t.Errorf("SLUICE_CONFIG over --config: backend-timeout %v, %v; want 15ms from it, no policies", o.backendTimeout, err)
	}
}

// A file that does not check is refused at start, and says where.
func TestBadConfig(t *testing.T) {
	dir := t.TempDir()
	for _, tt := range []struct{ text, want string }{
		{"nope: 1\n", `line 1: unknown key "nope"`},
		{"backend-timeout: fast\n", `backend-timeout: invalid duration "fast": a duration is a number and its unit`},
		{"backend-timeout: 50\n", `backend-timeout: missing unit in duration "50"`},
		// A bad value names its line, as an unknown key does.
		{"log-level: info\nmax-blocking: many\n", `line 2: max-blocking: "many" is not a whole number`},
		{"backend-timeout: 0s\n", "must be positive"},
		{"hot-keys: {a: b}\n", "hot-keys: want a value or a list of values"},
		{"config: other.yaml\n", "cannot name another"},
		{"policies: [free]\n", "policies: want a mapping"},
		{"policies:\n  free: {capacity: many, refill: 1, period: 1s}\n", `line 2: policy "free": capacity:`},
		{"policies:\n  free: {capacity: 1, refill: 1, period: 1s, burst: 2}\n", `policy "free": burst: unknown key`},
		{"policies:\n  free: {capacity: 1, refill: 1, period: 1w}\n", `policy "free": period must be`},
		{"policies:\n  free: {capacity: 1, refill: 1, period: 1s}\nkeys:\n  \"api:*\": paid\n", `names policy "paid", which is not defined`},
		{"policies: {}\npolicies: {}\n", `"policies" is set twice`},
		// A key given twice in one policy is as ambiguous as one given
		// twice at the top: refused, not the last one silently taken.
		{"policies:\n  free: {capacity: 100, refill: 1, period: 1s, capacity: 5}\n", `line 2: policy "free": "capacity" is set twice`},
		{"policies:\n  free: {capacity: 1\n", "yaml:"},
		{"- a\n- b\n", "want a mapping"},
	} {
		path := filepath.Join(dir, "sluice.yaml")
		writeConfig(t, path, tt.text)
		var out strings.Builder
		if code := run([]string{"--config", path}, noEnv, &out); code != 2 || !strings.Contains(out.String(), tt.want) {
			t.Errorf("%q: exit %d, %q; want 2 and %q", tt.text, code, out.String(), tt.want)
		}
	}
}

// SIGHUP to the binary: a good file's policies replace the old ones, and a
// setting it changed is named as needing a restart; a bad file is one
// error line, and the old policies stay.
func TestReloadOnSIGHUP(t *testing.T) {
	requireRedisCLI(t)
	path := filepath.Join(t.TempDir(), "sluice.yaml")
	writeConfig(t, path, `
policies:
  free: {capacity: 3, refill: 1, period: 1h}
  paid: {capacity: 1000, refill: 100, period: 1s}
keys:
  "api:free:*": free
  "api:*": paid
`)
	acl := filepath.Join(t.TempDir(), "users.acl")
	writeConfig(t, acl, "user default on nopass ~* +@all\n")
	p := start(t, binary(t), []string{"SLUICE_LISTEN=127.0.0.1:0", "SLUICE_ACLFILE=" + acl}, "--config", path)
	throttleCap := func(args ...string) string {
		t.Helper()
		got := redisCLI(t, p.addr, append([]string{"THROTTLE"}, args...)...)
		if len(got) != 5 {
			t.Fatalf("THROTTLE %v: %v", args, got)
		}
		return got[1]
	}
	if got := throttleCap("api:free:1"); got != "3" {
		t.Fatalf("api:free:1 by its rule: capacity %s, want 3", got)
	}
	if got := throttleCap("k", "POLICY", "paid"); got != "1000" {
		t.Fatalf("POLICY paid: capacity %s, want 1000", got)
	}
	hup := func() {
		t.Helper()
		if err := p.cmd.Process.Signal(syscall.SIGHUP); err != nil {
			t.Fatal(err)
		}
	}

	writeConfig(t, path, `
backend-timeout: 20ms
policies:
  free: {capacity: 5, refill: 1, period: 1h}
  gold: {capacity: 7, refill: 1, period: 1h}
keys:
  "api:free:*": free
`)
	hup()
	line := p.nextLine(t)
	if line["msg"] != "config reloaded" || line["policies"] != 2.0 || line["key_rules"] != 1.0 ||
		strings.Join(toStrings(line["restart_needed"]), ",") != "backend-timeout" {
		t.Fatalf("after a good file: %v; want config reloaded, 2 policies, 1 rule, backend-timeout to restart", line)
	}
	if got := throttleCap("api:free:2"); got != "5" {
		t.Fatalf("api:free:2 after the reload: capacity %s, want 5", got)
	}
	if got := throttleCap("k", "POLICY", "gold"); got != "7" {
		t.Fatalf("POLICY gold after the reload: capacity %s, want 7", got)
	}
	if got := strings.Join(redisCLI(t, p.addr, "THROTTLE", "api:other"), " "); !strings.Contains(got, "ERR no policy matches key 'api:other'") {
		t.Fatalf("a rule the reload dropped: %q", got)
	}

	writeConfig(t, path, `
policies:
  free: {capacity: 9, refill: 1, period: 1h}
keys:
  "api:free:*": platinum
`)
	hup()
	if line := p.nextLine(t); line["msg"] != "config not reloaded: keeping the one in force" || !strings.Contains(line["error"].(string), `"platinum"`) {
		t.Fatalf("after a bad file: %v", line)
	}
	if got := throttleCap("api:free:3"); got != "5" {
		t.Fatalf("api:free:3 after a refused reload: capacity %s, want 5 (the old policy)", got)
	}
	// One line for the refusal: the next one is the next reload's.
	writeConfig(t, path, "policies:\n  free: {capacity: 11, refill: 1, period: 1h}\nkeys:\n  \"*\": free\n")
	hup()
	if line := p.nextLine(t); line["msg"] != "config reloaded" || line["restart_needed"] != nil {
		t.Fatalf("after a good file again: %v; want config reloaded, nothing to restart", line)
	}
	if got := throttleCap("anything"); got != "11" {
		t.Fatalf("a key the catch-all rule maps: capacity %s, want 11", got)
	}
	// The ACL file is read at start: changed in place (a password
	// revoked, a user added), it is named to be restarted for.
	writeConfig(t, acl, "user default on nopass ~* +@all\nuser eve on >e ~* +@all\n")
	hup()
	if line := p.nextLine(t); line["msg"] != "config reloaded" || strings.Join(toStrings(line["restart_needed"]), ",") != "aclfile" {
		t.Fatalf("after the ACL file changed: %v; want aclfile to restart", line)
	}
	stop(t, p)
}

func toStrings(v any) []string {
	items, _ := v.([]any)
	out := make([]string, len(items))
	for i, item := range items {
		out[i], _ = item.(string)
	}
	return out
}

// A YAML null is no value, however it is written: "announce: ~" is
// "announce:", not the address "~", and "cluster: null" not a seed node
// named null.
func TestConfigNullIsEmpty(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sluice.yaml")
	writeConfig(t, path, "announce: ~\ncluster: null\nhot-keys: [a, ~]\nrequirepass: Null\n")
	o, err := parseFlags([]string{"--config", path}, noEnv, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if o.announce != "" || o.cluster != "" || o.hotKeys != "a," || o.requirepass != "" {
		t.Errorf("announce %q, cluster %q, hot-keys %q, requirepass %q; want all empty but hot-keys a,", o.announce, o.cluster, o.hotKeys, o.requirepass)
	}
	writeConfig(t, path, "requirepass: \"null\"\n")
	if o, err := parseFlags([]string{"--config", path}, noEnv, io.Discard); err != nil || o.requirepass != "null" {
		t.Errorf("a quoted \"null\": requirepass %q, %v; want the string", o.requirepass, err)
	}
}

// A boolean setting in the file takes yes and no, as Redis users write
// them, as well as true and false, in any case.
func TestConfigBooleans(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sluice.yaml")
	for _, tt := range []struct {
		text          string
		admin, replic bool
	}{
		{"allow-admin: yes\nread-from-replicas: YES\ncluster-tls: no\n", true, true},
		{"allow-admin: No\nread-from-replicas: True\ncluster-tls: FALSE\n", false, true},
		{"allow-admin: \"yes\"\nread-from-replicas: false\n", true, false},
	} {
		writeConfig(t, path, tt.text)
		o, err := parseFlags([]string{"--config", path}, envOf(nil), io.Discard)
		if err != nil || o.admin != tt.admin || o.replicas != tt.replic || o.tls.cluster {
			t.Errorf("%q: allow-admin %v, read-from-replicas %v, cluster-tls %v, %v; want %v, %v, false",
				tt.text, o.admin, o.replicas, o.tls.cluster, err, tt.admin, tt.replic)
		}
	}
	// A policy's shadow too.
	for _, v := range []string{"yes", "Yes", "true", "TRUE"} {
		var doc yaml.Node
		if err := yaml.Unmarshal([]byte("free: {capacity: 1, refill: 1, period: 1s, shadow: "+v+"}\n"), &doc); err != nil {
			t.Fatal(err)
		}
		if ps, err := readPolicies(doc.Content[0]); err != nil || len(ps) != 1 || !ps[0].Shadow {
			t.Errorf("shadow: %s: %+v, %v; want a shadow policy", v, ps, err)
		}
	}
	// And the environment's.
	o, err := parseFlags(nil, envOf(map[string]string{"SLUICE_ALLOW_ADMIN": "Yes", "SLUICE_READ_FROM_REPLICAS": "no"}), io.Discard)
	if err != nil || !o.admin || o.replicas {
		t.Errorf("SLUICE_ALLOW_ADMIN=Yes SLUICE_READ_FROM_REPLICAS=no: allow-admin %v, read-from-replicas %v, %v; want true, false", o.admin, o.replicas, err)
	}
	if _, err := parseFlags(nil, envOf(map[string]string{"SLUICE_ALLOW_ADMIN": "maybe"}), io.Discard); err == nil || !strings.Contains(err.Error(), "SLUICE_ALLOW_ADMIN") {
		t.Errorf("SLUICE_ALLOW_ADMIN=maybe: %v, want refused, naming it", err)
	}
	// Anything else is still refused, naming the line: also what Go's
	// flag parser alone would take (1, t, F), which a policy's shadow
	// refuses.
	for _, v := range []string{"maybe", "1", "0", "t", "F"} {
		writeConfig(t, path, "log-level: info\nallow-admin: "+v+"\n")
		if _, err := parseFlags([]string{"--config", path}, envOf(nil), io.Discard); err == nil || !strings.Contains(err.Error(), "line 2: allow-admin: want yes, no, true or false") {
			t.Errorf("allow-admin: %s: %v, want refused on line 2", v, err)
		}
		if _, err := parseFlags(nil, envOf(map[string]string{"SLUICE_READ_FROM_REPLICAS": v}), io.Discard); err == nil || !strings.Contains(err.Error(), "SLUICE_READ_FROM_REPLICAS: want yes, no, true or false") {
			t.Errorf("SLUICE_READ_FROM_REPLICAS=%s: %v, want refused, naming it", v, err)
		}
	}
}

// A policy's capacity and refill are integers, as THROTTLE takes them: a
// fraction is refused, not cut to the integer below it (yaml.v3 decodes
// 2.9 into an int64 as 2).
func TestPolicyLimitsAreIntegers(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sluice.yaml")
	for _, tt := range []struct{ text, want string }{
		{"policies:\n  free: {capacity: 2.9, refill: 1, period: 1s}\n", `line 2: policy "free": capacity:`},
		{"policies:\n  free: {capacity: 10, refill: 1.5, period: 1s}\n", `line 2: policy "free": refill:`},
		{"policies:\n  free: {capacity: 1e3, refill: 1, period: 1s}\n", `line 2: policy "free": capacity:`},
	} {
		writeConfig(t, path, tt.text)
		if _, err := parseFlags([]string{"--config", path}, noEnv, io.Discard); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%q: %v; want an error with %q", tt.text, err, tt.want)
		}
	}
	// YAML's other forms of integers are refused as THROTTLE refuses them.
	writeConfig(t, path, "policies:\n  free: {capacity: 1_000, refill: 0x10, period: 1s}\n")
	if _, err := parseFlags([]string{"--config", path}, noEnv, io.Discard); err == nil || !strings.Contains(err.Error(), `capacity: want an integer, not "1_000"`) {
		t.Errorf("YAML integers: %v, want 1_000 refused", err)
	}
}

// A value of the file that does not parse is refused even where the
// command line or the environment overrides it, as the README says: kept
// quiet, it would stop sluice the day the override is removed. The
// override still wins when the file's value parses.
func TestConfigValueCheckedWhenOverridden(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sluice.yaml")
	writeConfig(t, path, "log-level: info\nbackend-timeout: fast\n")
	for _, tt := range []struct {
		args []string
		env  map[string]string
	}{
		{[]string{"--config", path, "--backend-timeout", "30ms"}, nil},
		{[]string{"--config", path}, map[string]string{"SLUICE_BACKEND_TIMEOUT": "30ms"}},
	} {
		if _, err := parseFlags(tt.args, envOf(tt.env), io.Discard); err == nil || !strings.Contains(err.Error(), `line 2: backend-timeout: invalid duration "fast"`) {
			t.Errorf("%v with %v: %v; want the file's line 2 named", tt.args, tt.env, err)
		}
	}
	writeConfig(t, path, "backend-timeout: 10ms\nlisten: 127.0.0.1:6381\nallow-admin: yes\n")
	o, err := parseFlags([]string{"--config", path, "--backend-timeout", "30ms", "--listen", "127.0.0.1:6382", "--allow-admin=false"}, noEnv, io.Discard)
	if err != nil || o.backendTimeout != 30*time.Millisecond || o.listen != "127.0.0.1:6382" || o.admin {
		t.Errorf("the command line over the file: backend-timeout %v, listen %q, allow-admin %v, %v; want 30ms, 127.0.0.1:6382, false", o.backendTimeout, o.listen, o.admin, err)
	}
}
