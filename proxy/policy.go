package proxy

import (
	"errors"
	"fmt"
	"sync/atomic"

	"github.com/sluice-rl/sluice/router/glob"

	"github.com/sluice-rl/sluice/router"
	"github.com/sluice-rl/sluice/router/bucket"
)

// Policy is a limit defined once, by name, instead of in every call:
// THROTTLE key POLICY name, or a plain THROTTLE key whose key matches a
// KeyRule naming it.
type Policy struct {
	// Name is what THROTTLE ... POLICY and the metrics call it: letters,
	// digits, '_', '-' and '.', at most 64 of them.
	Name             string
	Capacity, Refill int64
	// Period is in THROTTLE's syntax: 60 (seconds), 500ms, 1.5s, 1h, 1d.
	Period string
	// Shadow decides and counts, but always allows: a limit being rolled
	// out shows what it would deny before it denies anything.
	Shadow bool
}

// KeyRule maps the keys that match Pattern (a Redis glob) to the
// policy named Policy.
type KeyRule struct {
	Pattern, Policy string
}

// Policies is a checked table of policies and key rules. It never changes
// once made: a reload makes a new one and swaps it whole (SetPolicies), so
// a decision uses one table from its parse to its reply.
type Policies struct {
	byName map[string]*policy
	rules  []rule // in the order given: the first that matches wins
}

// policy is a Policy reduced to what a decision needs.
type policy struct {
	name   string
	limit  bucket.Limit
	iv     bucket.Interval
	shadow bool
	// counts are the server's counters for this name, which outlive a
	// reload; nil in a table no server has taken yet.
	counts *policyCounts
}

type rule struct {
	pattern string
	policy  *policy
}

// policyCounts are one policy's decisions, by source and result (0
// allowed, 1 limited, as the bucket decided), and the limited ones a
// shadow policy allowed.
type policyCounts struct {
	decisions [router.NumSources][2]atomic.Int64
	shadowed  atomic.Int64
	// wasShadow: the name has been a shadow policy, so its shadowed
	// series is exported, at 0 too, until a restart, as its other
	// counters are: a reload that enforces or removes it must not make
	// the series vanish.
	wasShadow atomic.Bool
}

// maxPolicyName bounds a name that becomes a metric label and an INFO
// field.
const maxPolicyName = 64

// inlinePolicy is the metrics' policy label of a limit given with the
// call; no policy may take it.
const inlinePolicy = "inline"

// NewPolicies checks policies and rules, and makes them a table. Rules
// are tried in the order given. An error names the policy or the pattern
// at fault.
func NewPolicies(policies []Policy, rules []KeyRule) (*Policies, error) {
	p := &Policies{byName: make(map[string]*policy, len(policies))}
	for _, d := range policies {
		if err := checkPolicyName(d.Name); err != nil {
			return nil, err
		}
		if p.byName[d.Name] != nil {
			return nil, fmt.Errorf("policy %q is defined twice", d.Name)
		}
		if d.Capacity < 1 {
			return nil, fmt.Errorf("policy %q: %w", d.Name, errCapacity)
		}
		if d.Refill < 1 {
			return nil, fmt.Errorf("policy %q: %w", d.Name, errRefill)
		}
		period, err := parsePeriod([]byte(d.Period))
		if err != nil {
			return nil, fmt.Errorf("policy %q: %w", d.Name, err)
		}
		l := bucket.Limit{Capacity: d.Capacity, Refill: d.Refill, Period: period}
		iv, err := l.Interval()
		if err != nil {
			return nil, fmt.Errorf("policy %q: %w", d.Name, errRange)
		}
		p.byName[d.Name] = &policy{name: d.Name, limit: l, iv: iv, shadow: d.Shadow}
	}
	seen := make(map[string]bool, len(rules))
	for _, r := range rules {
		switch {
		case r.Pattern == "":
			return nil, errors.New("a key pattern is empty")
		case seen[r.Pattern]:
			return nil, fmt.Errorf("key pattern %q is listed twice", r.Pattern)
		}
		seen[r.Pattern] = true
		pol := p.byName[r.Policy]
		if pol == nil {
			return nil, fmt.Errorf("key pattern %q names policy %q, which is not defined", r.Pattern, r.Policy)
		}
		p.rules = append(p.rules, rule{pattern: r.Pattern, policy: pol})
	}
	return p, nil
}

func checkPolicyName(name string) error {
	if name == "" || len(name) > maxPolicyName {
		return fmt.Errorf("policy name %q must be 1 to %d characters", name, maxPolicyName)
	}
	if name == inlinePolicy {
		// Its series would be the inline limits' own: the same labels
		// twice, which fails every scrape.
		return fmt.Errorf("policy name %q is reserved: the metrics call limits given inline so", name)
	}
	for _, c := range []byte(name) {
		if !isLetter(c) && (c < '0' || c > '9') && c != '_' && c != '-' && c != '.' {
			return fmt.Errorf("policy name %q may hold only letters, digits, '_', '-' and '.'", name)
		}
	}
	return nil
}

// Len reports how many policies and key rules p has.
func (p *Policies) Len() (policies, rules int) {
	if p == nil {
		return 0, 0
	}
	return len(p.byName), len(p.rules)
}

// match is the policy of the first rule key matches, or nil.
func (p *Policies) match(key string) *policy {
	for _, r := range p.rules {
		if glob.Match(key, r.pattern) {
			return r.policy
		}
	}
	return nil
}

var (
	errNoPolicies    = errors.New("no policies are configured: give the limit, THROTTLE key capacity refill period [cost]")
	errThrottleNArgs = errors.New("wrong number of arguments for 'throttle' command")
)

// byPolicy reports whether THROTTLE args take their limit from a policy:
// THROTTLE key POLICY name [cost], or THROTTLE key [cost]. Anything longer
// is the inline form, whose capacity is never the word POLICY.
func byPolicy(args [][]byte) bool {
	return len(args) <= 3 || equalFold(args[2], "policy")
}

// request parses the policy forms of THROTTLE against p (nil: none are
// configured), and reports the policy it used.
func (p *Policies) request(args [][]byte) (router.Request, *policy, error) {
	named := len(args) >= 3 && equalFold(args[2], "policy")
	costAt := 2
	if named {
		costAt = 4
	}
	if len(args) < costAt || len(args) > costAt+1 {
		return router.Request{}, nil, errThrottleNArgs
	}
	if len(args[1]) > maxKeyLen {
		return router.Request{}, nil, errKeyLen
	}
	if p == nil {
		return router.Request{}, nil, errNoPolicies
	}
	r := router.KeyRequest(router.Take, args[1])
	key := r.Key
	var pol *policy
	if named {
		if pol = p.byName[string(args[3])]; pol == nil {
			return router.Request{}, nil, fmt.Errorf("no policy named '%s'", truncate(args[3]))
		}
	} else if pol = p.match(key); pol == nil {
		return router.Request{}, nil, fmt.Errorf("no policy matches key '%s': give its limit (THROTTLE key capacity refill period) or map the key to a policy", truncate(args[1]))
	}
	cost := int64(1)
	if len(args) > costAt {
		var ok bool
		if cost, ok = parseInt(args[costAt]); !ok || cost < 0 {
			return router.Request{}, nil, errCost
		}
	}
	r.Interval, r.Cost = pol.iv, cost
	return r, pol, nil
}

// bind is p with each policy given the counters of its name from counts,
// for a server to use; p itself is left as it was.
func (p *Policies) bind(counts func(name string) *policyCounts) *Policies {
	if p == nil {
		return nil
	}
	b := &Policies{byName: make(map[string]*policy, len(p.byName)), rules: make([]rule, len(p.rules))}
	for name, pol := range p.byName {
		c := *pol
		c.counts = counts(name)
		if c.shadow {
			c.counts.wasShadow.Store(true)
		}
		b.byName[name] = &c
	}
	for i, r := range p.rules {
		b.rules[i] = rule{pattern: r.pattern, policy: b.byName[r.policy.name]}
	}
	return b
}

// SetPolicies makes p the policies THROTTLE uses from its next command;
// nil removes them. Commands already read keep the policy they were
// parsed with. It returns the ones p replaced, so that a reload can tell
// an operator what it took away.
func (s *Server) SetPolicies(p *Policies) (old *Policies) {
	return s.policies.Swap(p.bind(s.metrics.policyCounts))
}
