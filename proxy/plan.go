package proxy

import (
	cmdspec "github.com/sluice-rl/sluice/router/command"
)

// plan is what forward asks of a command of the cluster's table at every
// call, read once per spec: a GET paid several lookups by its name (a
// tenth of a loop's work on a pipeline of them) for answers that never
// change.
type plan struct {
	fanOut      fanOut
	isFanOut    bool
	subscribing bool
	write       bool  // Redis's "write" flag
	readOnly    bool  // Redis's "readonly" flag
	blocking    bool  // Redis's "blocking" flag
	refused     error // why sluice does not forward it, or nil
	keyless     bool  // sent to any node when no key is found
	stat        *cmdStat
}

// maxPlans bounds the plans kept: one per spec of the table read, which
// is read again at most at each connection to the cluster.
const maxPlans = 4096

// planOf is spec's plan.
func (s *Server) planOf(spec *cmdspec.Spec) *plan {
	return s.plans.of(spec, maxPlans, s.newPlan)
}

func (s *Server) newPlan(spec *cmdspec.Spec) *plan {
	fo, isFanOut := fanOuts[spec.Name]
	return &plan{
		fanOut:      fo,
		isFanOut:    isFanOut,
		subscribing: subscribing[spec.Name],
		write:       spec.Has("write"),
		readOnly:    spec.Has("readonly"),
		blocking:    spec.Has("blocking"),
		refused:     refused(spec),
		keyless:     keyless(spec),
		stat:        s.cmdStats.of(spec.Name),
	}
}
