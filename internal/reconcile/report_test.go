package reconcile

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
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
		tl := newTally()
		var fs []Finding
		for _, a := range c.actions {
			fs = append(fs, Finding{MerchantID: "m", Kind: KindRedisHigh, Delta: -2, Action: a})
		}
		tl.addPage(pageOutcome{findings: fs}, false)
		rep := tl.report(time.Now(), time.Now(), false, c.err)
		if rep.Status != c.status || rep.Exit() != c.exit {
			t.Errorf("%v %v: status %s exit %d; want %s %d", c.actions, c.err, rep.Status, rep.Exit(), c.status, c.exit)
		}
		if len(fs) > 0 && (rep.Drifted != 1 || rep.AbsDrift != int64(2*len(fs))) {
			t.Errorf("%v: drifted %d abs %d", c.actions, rep.Drifted, rep.AbsDrift)
		}
	}
}

func TestReportRendering(t *testing.T) {
	v := int64(80)
	start := time.Date(2026, 11, 29, 7, 0, 0, 0, time.UTC)
	rep := &Report{RunID: 42, StartedAt: start, FinishedAt: start.Add(1500 * time.Millisecond), Status: StatusRepaired,
		Checked: 3, Clean: 2, Drifted: 1, Repaired: 1, AbsDrift: 10, BusyMerchants: []string{"m-9"},
		Findings: []Finding{{MerchantID: "m-1", Kind: KindRedisHigh, RedisValue: &v, Expected: 70, Delta: 10, Action: ActionRepaired}}}
	var text bytes.Buffer
	if err := rep.Write(&text, OutputText); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"reconcile run 42: repaired in 1.5s", "checked=3 clean=2 busy=0 drifted=1 repaired=1",
		"m-1", "redis_high", "+10", "busy (not checked", "m-9"} {
		if !strings.Contains(text.String(), want) {
			t.Errorf("text lacks %q:\n%s", want, text.String())
		}
	}
	var js bytes.Buffer
	if err := rep.Write(&js, OutputJSON); err != nil {
		t.Fatal(err)
	}
	var back map[string]any
	if err := json.Unmarshal(js.Bytes(), &back); err != nil {
		t.Fatal(err)
	}
	fs := back["findings"].([]any)
	if back["run_id"] != "42" || back["status"] != "repaired" || len(fs) != 1 || fs[0].(map[string]any)["redis_value"] != 80.0 {
		t.Fatalf("json = %s", js.String())
	}
	empty := &Report{Status: StatusClean}
	js.Reset()
	if err := empty.WriteJSON(&js); err != nil || !strings.Contains(js.String(), `"findings":[]`) {
		t.Fatalf("empty json = %s %v", js.String(), err)
	}
}
