package reconcile

import (
	"errors"
	"testing"
	"time"
)

func TestStatus(t *testing.T) {
	type f struct {
		kind   Kind
		action Action
	}
	cases := []struct {
		findings []f
		err      error
		status   Status
		drifted  int64
	}{
		{nil, nil, StatusClean, 0},
		{[]f{{KindRedisHigh, ActionRepaired}, {KindRedisLow, ActionRepaired}}, nil, StatusRepaired, 1},
		{[]f{{KindRedisHigh, ActionRepaired}, {KindRedisLow, ActionDryRun}}, nil, StatusDrift, 1},
		{[]f{{KindRedisHigh, ActionOverCeiling}}, nil, StatusDrift, 1},
		{[]f{{KindRedisHigh, ActionAborted}}, nil, StatusDrift, 1},
		{[]f{{KindLedgerMismatch, ActionReported}}, nil, StatusDrift, 1},
		// A missing hash is routine: reported, never drift, whatever was done about it.
		{[]f{{KindMissingKey, ActionRepaired}}, nil, StatusClean, 0},
		{[]f{{KindMissingKey, ActionDryRun}}, nil, StatusClean, 0},
		{[]f{{KindMissingKey, ActionAborted}}, nil, StatusClean, 0},
		{[]f{{KindMissingKey, ActionRepaired}, {KindOrphanPending, ActionRepaired}}, nil, StatusRepaired, 1},
		{[]f{{KindMissingKey, ActionReported}, {KindNegativeBalance, ActionReported}}, nil, StatusDrift, 1},
		{[]f{{KindRedisHigh, ActionRepaired}}, errors.New("boom"), StatusFailed, 1},
		{nil, errors.New("boom"), StatusFailed, 0},
	}
	for _, c := range cases {
		tl := &tally{critical: map[string]bool{}}
		var fs []Finding
		for _, x := range c.findings {
			fs = append(fs, Finding{MerchantID: "m", Kind: x.kind, Delta: -2, Action: x.action})
		}
		tl.add(Report{Findings: fs})
		rep := tl.report(time.Now(), time.Now(), false, c.err)
		if rep.Status != c.status || rep.Drifted != c.drifted {
			t.Errorf("%v %v: status %s drifted %d; want %s %d", c.findings, c.err, rep.Status, rep.Drifted, c.status, c.drifted)
		}
	}
}
