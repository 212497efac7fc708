package main

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/sluice-rl/sluice/proxy"
	"github.com/sluice-rl/sluice/router/glob"
)

// config is what a --config file holds: the named policies and the key
// rules that select them, and values for any flag, by the flag's name.
type config struct {
	policies *proxy.Policies
	flags    map[string]string
	lines    map[string]int // of each flag's key, for an error
}

// readConfig reads and checks the YAML file at path; fs names the flags it
// may set. An error names the line and the key at fault.
func readConfig(path string, fs *flag.FlagSet) (config, error) {
	text, err := os.ReadFile(path)
	if err != nil {
		return config{}, err
	}
	dec := yaml.NewDecoder(bytes.NewReader(text))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil && err != io.EOF {
		return config{}, err
	}
	// A decoder reads the first document alone: the settings, policies or
	// key rules of one after a "---" would be dropped without a word.
	var more yaml.Node
	if err := dec.Decode(&more); err != nil && err != io.EOF {
		return config{}, err
	} else if err == nil && len(more.Content) > 0 && more.Content[0].ShortTag() != "!!null" {
		return config{}, fmt.Errorf("line %d: a second YAML document: the file must be one", more.Content[0].Line)
	}
	if err := noAliases(&doc); err != nil {
		return config{}, err
	}
	cfg := config{flags: map[string]string{}, lines: map[string]int{}}
	if len(doc.Content) == 0 || doc.Content[0].ShortTag() == "!!null" {
		// An empty file, or an empty document ("---" and comments): as
		// empty as a trailing one, which is taken above.
		return cfg, nil
	}
	top := doc.Content[0]
	if top.Kind != yaml.MappingNode {
		return config{}, fmt.Errorf("line %d: want a mapping of keys to values", top.Line)
	}
	var policies []proxy.Policy
	var rules []proxy.KeyRule
	seen := map[string]bool{}
	for i := 0; i+1 < len(top.Content); i += 2 {
		k, v := top.Content[i], top.Content[i+1]
		if seen[k.Value] {
			return config{}, fmt.Errorf("line %d: %q is set twice", k.Line, k.Value)
		}
		seen[k.Value] = true
		if v.Tag == "!!null" && (k.Value == "policies" || k.Value == "keys") {
			continue // a section left empty: none
		}
		switch name := k.Value; {
		case name == "policies":
			if policies, err = readPolicies(v); err != nil {
				return config{}, err
			}
		case name == "keys":
			// A mapping, read as a Node because its order is the rules'
			// order: the first pattern that matches a key wins.
			if err := wantKind(v, yaml.MappingNode, "keys", "a mapping of key patterns to policy names"); err != nil {
				return config{}, err
			}
			for j := 0; j+1 < len(v.Content); j += 2 {
				pat, pol := v.Content[j], v.Content[j+1]
				if err := wantKind(pol, yaml.ScalarNode, "keys: "+pat.Value, "a policy name"); err != nil {
					return config{}, err
				}
				rules = append(rules, proxy.KeyRule{Pattern: pat.Value, Policy: pol.Value})
			}
		case name == "config":
			return config{}, fmt.Errorf("line %d: a config file cannot name another", k.Line)
		case fs.Lookup(name) == nil:
			return config{}, fmt.Errorf("line %d: unknown key %q: not a policy section nor a flag of sluice", k.Line, name)
		default:
			if v.Kind == yaml.SequenceNode && name != "cluster" && name != "hot-keys" && name != "listen" {
				// Joined by commas, one item would pass for the value.
				return config{}, fmt.Errorf("line %d: %s: a list is taken by cluster, hot-keys and listen alone", k.Line, name)
			}
			if name == "hot-keys" && v.Kind == yaml.SequenceNode {
				// One item is one pattern: its commas are escaped before
				// the items are joined by commas (hotPatterns cuts them).
				for _, item := range v.Content {
					if item.Kind == yaml.ScalarNode && item.ShortTag() != "!!null" {
						item.Value = strings.Join(glob.Split(item.Value, ','), `\,`)
					}
				}
			}
			value, err := flagValue(v)
			if err != nil {
				return config{}, fmt.Errorf("line %d: %s: %w", k.Line, name, err)
			}
			if b, ok := fs.Lookup(name).Value.(interface{ IsBoolFlag() bool }); ok && b.IsBoolFlag() {
				if value, err = fileBool(value); err != nil {
					return config{}, fmt.Errorf("line %d: %s: %w", k.Line, name, err)
				}
			}
			cfg.flags[name], cfg.lines[name] = value, k.Line
		}
	}
	if cfg.policies, err = proxy.NewPolicies(policies, rules); err != nil {
		return config{}, err
	}
	return cfg, nil
}

// readPolicies reads policies: name: {capacity, refill, period, shadow}.
func readPolicies(n *yaml.Node) ([]proxy.Policy, error) {
	if err := wantKind(n, yaml.MappingNode, "policies", "a mapping of names to policies"); err != nil {
		return nil, err
	}
	var out []proxy.Policy
	for i := 0; i+1 < len(n.Content); i += 2 {
		name, body := n.Content[i], n.Content[i+1]
		p := proxy.Policy{Name: name.Value}
		where := "policy " + name.Value
		if err := wantKind(body, yaml.MappingNode, where, "{capacity: N, refill: N, period: 1s}"); err != nil {
			return nil, err
		}
		seen := map[string]bool{}
		for j := 0; j+1 < len(body.Content); j += 2 {
			k, v := body.Content[j], body.Content[j+1]
			if seen[k.Value] {
				// yaml.Node keeps both; the later would silently win.
				return nil, fmt.Errorf("line %d: policy %q: %q is set twice", k.Line, name.Value, k.Value)
			}
			seen[k.Value] = true
			if err := wantKind(v, yaml.ScalarNode, where+": "+k.Value, "a value"); err != nil {
				return nil, err
			}
			var err error
			switch k.Value {
			case "capacity":
				err = decodeInt(v, &p.Capacity)
			case "refill":
				err = decodeInt(v, &p.Refill)
			case "period":
				p.Period = v.Value // THROTTLE's syntax, which proxy checks
			case "shadow":
				var b string
				if b, err = fileBool(v.Value); err == nil {
					p.Shadow = b == "true"
				}
			default:
				err = errors.New("unknown key: want capacity, refill, period or shadow")
			}
			if err != nil {
				return nil, fmt.Errorf("line %d: policy %q: %s: %w", k.Line, name.Value, k.Value, err)
			}
		}
		out = append(out, p)
	}
	return out, nil
}

// fileBool is a boolean setting of the file or the environment as its flag
// reads it: yes and no, as Redis users write them, and true and false, in
// any case. The flag's own parser would also take 1, t, F and the like,
// which a policy's shadow refuses and the README does not list.
func fileBool(v string) (string, error) {
	switch strings.ToLower(v) {
	case "yes", "true":
		return "true", nil
	case "no", "false":
		return "false", nil
	}
	return "", fmt.Errorf("want yes, no, true or false, not %q", v)
}

// yesNo is a boolean flag that takes on the command line what the file
// and the environment take (fileBool): --allow-admin=yes as well as
// --allow-admin, =true and Go's other spellings (1, t, F).
type yesNo bool

func (b *yesNo) IsBoolFlag() bool { return true }
func (b *yesNo) String() string   { return strconv.FormatBool(bool(*b)) }

func (b *yesNo) Set(v string) error {
	if s, err := fileBool(v); err == nil {
		v = s
	}
	x, err := strconv.ParseBool(v)
	if err != nil {
		return fmt.Errorf("want yes, no, true or false, not %q", v)
	}
	*b = yesNo(x)
	return nil
}

// decodeInt reads an integer as THROTTLE takes it: decimal digits, with
// a minus or not, 20 bytes at most. yaml.v3 would cut a fraction (2.9) or an exponent (1e3)
// to an int64 without a word, read 010 as YAML 1.1's octal 8 (and tag 019
// a float), and take 0x10 and 1_000, which THROTTLE refuses.
func decodeInt(v *yaml.Node, out *int64) error {
	tag := v.ShortTag()
	d := strings.TrimPrefix(v.Value, "-")
	if tag != "!!int" && tag != "!!float" || d == "" || len(v.Value) > 20 || strings.Trim(d, "0123456789") != "" {
		return fmt.Errorf("want an integer, not %q", v.Value)
	}
	n, err := strconv.ParseInt(v.Value, 10, 64)
	if err != nil {
		return errors.New("value out of range")
	}
	*out = n
	return nil
}

// noAliases refuses an alias or a merge key anywhere in n: read as nodes,
// an alias would be taken for its anchor's name (a key pattern *a as
// "a") or refused as a value of the wrong kind, which misleads.
func noAliases(n *yaml.Node) error {
	if n.Kind == yaml.AliasNode || n.ShortTag() == "!!merge" {
		return fmt.Errorf("line %d: YAML anchors, aliases and merge keys are not supported", n.Line)
	}
	for _, c := range n.Content {
		if err := noAliases(c); err != nil {
			return err
		}
	}
	return nil
}

func wantKind(n *yaml.Node, kind yaml.Kind, where, want string) error {
	if n.Kind != kind {
		return fmt.Errorf("line %d: %s: want %s", n.Line, where, want)
	}
	return nil
}

// flagValue is a flag's value as its command line would give it: a
// scalar, or a sequence of them joined by commas (--cluster, --hot-keys,
// --listen).
// A null (~, null, nothing) is empty, not the word that spells it.
func flagValue(n *yaml.Node) (string, error) {
	switch n.Kind {
	case yaml.ScalarNode:
		if n.ShortTag() == "!!null" {
			return "", nil
		}
		return n.Value, nil
	case yaml.SequenceNode:
		items := make([]string, len(n.Content))
		for i, item := range n.Content {
			if item.Kind != yaml.ScalarNode {
				return "", errors.New("want a value or a list of values")
			}
			items[i], _ = flagValue(item)
		}
		return strings.Join(items, ","), nil
	}
	return "", errors.New("want a value or a list of values")
}
