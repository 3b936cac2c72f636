package load

import (
	"bytes"
	"encoding/xml"
	"strings"
	"testing"
)

// A sweep plots one marked point per run, in well-formed SVG; a latency plot
// needs a paced run; --vary takes numbers only.
func TestPlots(t *testing.T) {
	v, err := ParseVary("WORKER_BATCH_SIZE=256,1024,2048")
	if err != nil {
		t.Fatal(err)
	}
	var runs []Result
	for _, eps := range []float64{21000, 33000, 38000} {
		runs = append(runs, Result{Events: 1000, EventsPerSec: eps})
	}
	var svg bytes.Buffer
	if err := PlotSweep(&svg, v, runs); err != nil {
		t.Fatal(err)
	}
	if err := xml.Unmarshal(svg.Bytes(), new(struct{})); err != nil {
		t.Fatalf("not XML: %v\n%s", err, svg.String())
	}
	if n := strings.Count(svg.String(), "<circle"); n != 3 || !strings.Contains(svg.String(), ">40k<") {
		t.Fatalf("%d points, want 3, and a 40k tick:\n%s", n, svg.String())
	}
	if err := PlotLatency(&svg, Result{}); err == nil {
		t.Fatal("a latency plot of an unpaced run")
	}
	paced := Result{Paced: &Paced{Rate: 1000, Latency: summarize([]int64{3000, 5000, 9000, 40000})}}
	svg.Reset()
	if err := PlotLatency(&svg, paced); err != nil || !strings.Contains(svg.String(), "max 40.0 ms") {
		t.Fatalf("%v\n%s", err, svg.String())
	}
	// A sweep of paced runs: CPU per event against p99, named by value.
	if v, err = ParseVary("WORKER_LATENCY_BUDGET=0,25ms,100ms"); err != nil {
		t.Fatal(err)
	}
	runs = nil
	for i, p99 := range []float64{20, 45, 120} {
		runs = append(runs, Result{Events: 1000, SystemUSPerEvent: 300 / float64(i+1), Paced: &Paced{Rate: 2000, Latency: Latency{P99MS: p99}}})
	}
	svg.Reset()
	if err := PlotSweep(&svg, v, runs); err != nil {
		t.Fatal(err)
	}
	if err := xml.Unmarshal(svg.Bytes(), new(struct{})); err != nil || strings.Count(svg.String(), "<circle") != 3 || !strings.Contains(svg.String(), ">25ms<") {
		t.Fatalf("budget sweep: %v\n%s", err, svg.String())
	}
	for _, bad := range []string{"WORKER_BATCH_SIZE", "ledger-rows=", "WORKER_LANES=two"} {
		if _, err := ParseVary(bad); err == nil {
			t.Errorf("--vary %q accepted", bad)
		}
	}
}
