package reconcile

import (
	"errors"
	"testing"
	"time"
)

func TestStatusAndExit(t *testing.T) {
	cases := []struct {
		actions []Action
		err     error
		status  Status
		exit    int
	}{
		{nil, nil, StatusClean, 0},
		{[]Action{ActionRepaired, ActionRepaired}, nil, StatusRepaired, 2},
		{[]Action{ActionRepaired, ActionDryRun}, nil, StatusDrift, 1},
		{[]Action{ActionOverCeiling}, nil, StatusDrift, 1},
		{[]Action{ActionAborted}, nil, StatusDrift, 1},
		{[]Action{ActionReported}, nil, StatusDrift, 1},
		{[]Action{ActionRepaired}, errors.New("boom"), StatusFailed, 3},
		{nil, errors.New("boom"), StatusFailed, 3},
	}
	for _, c := range cases {
		tl := &tally{critical: map[string]bool{}}
		var fs []Finding
		for _, a := range c.actions {
			fs = append(fs, Finding{MerchantID: "m", Kind: KindRedisHigh, Delta: -2, Action: a})
		}
		tl.add(Report{Findings: fs})
		rep := tl.report(time.Now(), time.Now(), false, c.err)
		if rep.Status != c.status || rep.Exit() != c.exit {
			t.Errorf("%v %v: status %s exit %d; want %s %d", c.actions, c.err, rep.Status, rep.Exit(), c.status, c.exit)
		}
		if len(fs) > 0 && (rep.Drifted != 1 || rep.AbsDrift != int64(2*len(fs))) {
			t.Errorf("%v: drifted %d abs %d", c.actions, rep.Drifted, rep.AbsDrift)
		}
	}
}
