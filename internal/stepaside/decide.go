// Package stepaside takes a worker whose Snowflake generator refuses out of
// the way: after the generator has refused for longer than a bound, the
// worker's consumers leave their groups (the other members take the
// partitions) and its relay lets go, until the generator issues again.
// Decide is the decision, pure; Monitor probes the generator and gates the
// parts by it.
package stepaside

import "time"

// State is what the decision remembers between probes.
type State struct {
	Since time.Time // start of the current run of refusals; zero while the generator issues
	Aside bool      // the worker has stepped aside
}

// Action is what a probe's outcome asks of the worker.
type Action int

const (
	Stay      Action = iota // nothing changes
	StepAside               // leave the groups and the relay now
	Rejoin                  // the generator issues again: take part again
)

func (a Action) String() string {
	switch a {
	case StepAside:
		return "step aside"
	case Rejoin:
		return "rejoin"
	default:
		return "stay"
	}
}

// Decide folds one probe into s: at now the generator refused or issued.
// A worker steps aside once refusals have lasted longer than after, and
// rejoins at the first probe that issues; a single success ends a run of
// refusals, so only an unbroken refusal counts.
func Decide(s State, now time.Time, refused bool, after time.Duration) (State, Action) {
	if !refused {
		if s.Aside {
			return State{}, Rejoin
		}
		return State{}, Stay
	}
	if s.Since.IsZero() {
		s.Since = now
	}
	if !s.Aside && now.Sub(s.Since) > after {
		s.Aside = true
		return s, StepAside
	}
	return s, Stay
}
