package main

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/quotaflow/billing/internal/reconcile"
)

func TestReportRendering(t *testing.T) {
	v := int64(80)
	start := time.Date(2026, 11, 29, 7, 0, 0, 0, time.UTC)
	rep := &reconcile.Report{RunID: 42, StartedAt: start, FinishedAt: start.Add(1500 * time.Millisecond), Status: reconcile.StatusRepaired,
		Checked: 3, Clean: 2, Drifted: 1, Repaired: 1, AbsDrift: 10, BusyMerchants: []string{"m-9"},
		Findings: []reconcile.Finding{{MerchantID: "m-1", Kind: reconcile.KindRedisHigh, RedisValue: &v, Expected: 70, Delta: 10, Action: reconcile.ActionRepaired}}}
	var text bytes.Buffer
	if err := writeReport(&text, rep, outputText); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"reconcile run 42: repaired in 1.5s", "checked=3 clean=2 busy=0 drifted=1 repaired=1",
		"m-1", "redis_high", "+10", "busy (not checked", "m-9"} {
		if !strings.Contains(text.String(), want) {
			t.Errorf("text lacks %q:\n%s", want, text.String())
		}
	}
	var js bytes.Buffer
	if err := writeReport(&js, rep, outputJSON); err != nil {
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
	empty := &reconcile.Report{Status: reconcile.StatusClean}
	js.Reset()
	if err := writeJSON(&js, empty); err != nil || !strings.Contains(js.String(), `"findings":[]`) {
		t.Fatalf("empty json = %s %v", js.String(), err)
	}
}
