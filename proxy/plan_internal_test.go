package proxy

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/sluice-rl/sluice/router"
	"github.com/sluice-rl/sluice/router/clustertest"
	cmdspec "github.com/sluice-rl/sluice/router/command"
)

// clusterTable is the command table of a real cluster, as the router
// reads it.
func clusterTable(t *testing.T) map[string]*cmdspec.Spec {
	t.Helper()
	c := clustertest.New(t, clustertest.Config{Primaries: 1, Replicas: -1})
	r := router.NewCluster(router.ClusterConfig{Seeds: c.Addrs(), Timeout: time.Second, HotThreshold: -1})
	t.Cleanup(r.Close)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := r.WaitConnected(ctx); err != nil {
		t.Fatal(err)
	}
	specs := r.Commands()
	if len(specs) < 200 {
		t.Fatalf("the cluster's table has %d commands", len(specs))
	}
	return specs
}

// eachSpec calls f with every command of specs and every subcommand, and
// the arguments that name it.
func eachSpec(specs map[string]*cmdspec.Spec, f func(spec *cmdspec.Spec, args []string)) {
	for name, spec := range specs {
		f(spec, []string{name})
		for sub, s := range spec.Subcommands {
			f(s, []string{name, sub})
		}
	}
}

// samePlan reports how p differs from what forward looked up by the
// spec's name before plans, or "".
func samePlan(s *Server, spec *cmdspec.Spec, p *plan) string {
	fo, isFanOut := fanOuts[spec.Name]
	var why []string
	check := func(what string, ok bool) {
		if !ok {
			why = append(why, what)
		}
	}
	check("fan-out", p.isFanOut == isFanOut && p.fanOut == fo)
	check("subscribing", p.subscribing == subscribing[spec.Name])
	check("write", p.write == spec.Has("write"))
	check("readonly", p.readOnly == spec.Has("readonly"))
	check("blocking", p.blocking == spec.Has("blocking"))
	check("keyless", p.keyless == keyless(spec))
	err := refused(spec)
	check("refused", (p.refused == nil) == (err == nil) && (err == nil || p.refused.Error() == err.Error()))
	check("stat", p.stat == s.cmdStats.of(spec.Name))
	return strings.Join(why, ", ")
}

// Every command and subcommand of a real cluster's table has the plan of
// what forward looked up by its name at each call, whatever the letter
// case it is sent in; a table read again gets plans of its own specs (a
// flag changed is seen), counted in the same lines; past maxPlans the
// plans are made again, still right and counted alike.
func TestPlanOfEveryCommand(t *testing.T) {
	specs := clusterTable(t)
	s := New(Config{Decider: router.NewMemory(0)})
	n := 0
	eachSpec(specs, func(spec *cmdspec.Spec, args []string) {
		n++
		p := s.planOf(spec)
		if why := samePlan(s, spec, p); why != "" {
			t.Errorf("%s: the plan differs in %s", spec.Name, why)
		}
		for _, cased := range []func(string) string{strings.ToUpper, strings.ToLower, mixedCase} {
			line := make([][]byte, len(args))
			for i, a := range args {
				line[i] = []byte(cased(a))
			}
			if got, _ := cmdspec.Lookup(specs, line); got != nil && s.planOf(got) != p {
				t.Errorf("%q: another plan than %s's", line, spec.Name)
			}
		}
	})
	if n < 300 {
		t.Fatalf("%d specs", n)
	}

	// The table read again, GET no longer read-only: its own plan.
	again := map[string]*cmdspec.Spec{}
	for name, spec := range specs {
		cp := *spec
		again[name] = &cp
	}
	again["get"].Flags = []string{"write"}
	old, p := s.planOf(specs["get"]), s.planOf(again["get"])
	if p == old || p.readOnly || !p.write || p.stat != old.stat {
		t.Errorf("GET of the table read again: a new plan %v, read-only %v, write %v, the same counts %v",
			p != old, p.readOnly, p.write, p.stat == old.stat)
	}

	// Tables read again until the plans start again, twice over.
	for range 2*maxPlans/len(specs) + 1 {
		table := map[string]*cmdspec.Spec{}
		for name, spec := range specs {
			cp := *spec
			table[name] = &cp
		}
		eachSpec(table, func(spec *cmdspec.Spec, _ []string) {
			if why := samePlan(s, spec, s.planOf(spec)); why != "" {
				t.Fatalf("%s: the plan differs in %s", spec.Name, why)
			}
		})
		if len(s.plans.all()) > maxPlans {
			t.Fatalf("%d plans kept, at most %d", len(s.plans.all()), maxPlans)
		}
	}
}

// mixedCase is s with every other letter upper case.
func mixedCase(s string) string {
	b := []byte(s)
	for i := 0; i < len(b); i += 2 {
		b[i] = strings.ToUpper(string(b[i]))[0]
	}
	return string(b)
}
