package load

import (
	"context"
	"errors"
	"fmt"
	"html"
	"io"
	"math"
	"strconv"
	"strings"
	"time"
)

// Vary is one setting a sweep changes between runs: a worker variable
// (WORKER_BATCH_SIZE=256,512,..., WORKER_LATENCY_BUDGET=10ms,50ms,...) or
// the pre-filled ledger rows (ledger-rows=0,1000000,...).
type Vary struct {
	Key    string
	Values []string
}

// ParseVary reads KEY=v1,v2,...: numbers, or durations (50ms); ledger-rows
// takes integers.
func ParseVary(s string) (Vary, error) {
	k, vs, ok := strings.Cut(s, "=")
	if !ok || k == "" || vs == "" {
		return Vary{}, fmt.Errorf("load: --vary %q: want KEY=v1,v2,...", s)
	}
	v := Vary{Key: k, Values: strings.Split(vs, ",")}
	for _, x := range v.Values {
		if _, ok := number(x); !ok {
			return Vary{}, fmt.Errorf("load: --vary %q: %q is neither a number nor a duration (the plot's x axis)", s, x)
		}
	}
	return v, nil
}

// number reads a --vary value: a number, or a duration in milliseconds.
func number(x string) (float64, bool) {
	if f, err := strconv.ParseFloat(x, 64); err == nil {
		return f, true
	}
	if d, err := time.ParseDuration(x); err == nil {
		return float64(d) / float64(time.Millisecond), true
	}
	return 0, false
}

// Sweep runs o once per value of v, in order, calling each with its result.
func Sweep(ctx context.Context, o Options, v Vary, each func(Result)) ([]Result, error) {
	var out []Result
	for _, x := range v.Values {
		run := o
		if v.Key == "ledger-rows" {
			run.LedgerRows, _ = strconv.Atoi(x)
		} else {
			run.WorkerEnv = append(append([]string(nil), o.WorkerEnv...), v.Key+"="+x)
		}
		res, err := Run(ctx, run)
		if err != nil {
			return out, fmt.Errorf("load: %s=%s: %w", v.Key, x, err)
		}
		each(res)
		out = append(out, res)
	}
	return out, nil
}

// PlotSweep draws events/s against the varied setting; of paced runs, the
// CPU per event of the workers, mariadbd and redis-server against their
// produce->ledger p99, each point named by its value (what a setting such as
// WORKER_LATENCY_BUDGET trades).
func PlotSweep(w io.Writer, v Vary, results []Result) error {
	if len(results) == 0 {
		return errors.New("load: nothing to plot")
	}
	r := results[0]
	if r.Paced != nil {
		var pts [][2]float64
		var labels []string
		for i, r := range results {
			pts = append(pts, [2]float64{r.Paced.Latency.P99MS, r.SystemUSPerEvent})
			labels = append(labels, v.Values[i])
		}
		title := fmt.Sprintf("CPU per event against p99 at %.0f events/s, by %s: %d events, %d worker(s), %d CPUs",
			r.Paced.Rate, v.Key, r.Events, r.Setup.Workers, r.Host.CPUs)
		return plot(w, title, "produce->ledger p99, ms", "µs of CPU per event (workers, mariadbd, redis)", pts, labels...)
	}
	var pts [][2]float64
	for i, r := range results {
		x, _ := number(v.Values[i])
		pts = append(pts, [2]float64{x, r.EventsPerSec})
	}
	title := fmt.Sprintf("events/s against %s: %d events, %d worker(s), %d CPUs", v.Key, r.Events, r.Setup.Workers, r.Host.CPUs)
	return plot(w, title, v.Key, "events/s", pts)
}

// PlotLatency draws the distribution of a paced run's produce->ledger
// latency: the share of events that had their ledger row within x ms.
func PlotLatency(w io.Writer, r Result) error {
	if r.Paced == nil || len(r.Paced.Latency.PercentileMS) == 0 {
		return errors.New("load: --plot without --vary draws a paced run's latency: set --rate")
	}
	l := r.Paced.Latency
	var pts [][2]float64
	for k, ms := range l.PercentileMS {
		pts = append(pts, [2]float64{ms, float64(k)})
	}
	title := fmt.Sprintf("produce->ledger at %.0f events/s: p50 %.1f ms, p99 %.1f ms, max %.1f ms (%d events)",
		r.Paced.Rate, l.P50MS, l.P99MS, l.MaxMS, l.Count)
	return plot(w, title, "latency, ms", "% of events", pts)
}

// plot writes a line chart of pts (in order) as SVG, axes from 0; labels,
// if given, name the points.
func plot(w io.Writer, title, xLabel, yLabel string, pts [][2]float64, labels ...string) error {
	const width, height, left, bottom, top, right = 720.0, 400.0, 70.0, 50.0, 40.0, 20.0
	var maxX, maxY float64
	for _, p := range pts {
		maxX, maxY = math.Max(maxX, p[0]), math.Max(maxY, p[1])
	}
	xStep, yStep := tick(maxX), tick(maxY)
	maxX, maxY = math.Ceil(maxX/xStep)*xStep, math.Ceil(maxY/yStep)*yStep
	sx := func(x float64) float64 { return left + x/maxX*(width-left-right) }
	sy := func(y float64) float64 { return height - bottom - y/maxY*(height-bottom-top) }
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%.0f" height="%.0f" font-family="sans-serif" font-size="12">`+"\n", width, height)
	fmt.Fprintf(&b, `<rect width="100%%" height="100%%" fill="white"/><text x="%.0f" y="20" font-size="13">%s</text>`+"\n", left, html.EscapeString(title))
	for x := 0.0; x <= maxX+xStep/2; x += xStep {
		fmt.Fprintf(&b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#ddd"/><text x="%.1f" y="%.1f" text-anchor="middle">%s</text>`+"\n",
			sx(x), sy(0), sx(x), sy(maxY), sx(x), sy(0)+16, num(x))
	}
	for y := 0.0; y <= maxY+yStep/2; y += yStep {
		fmt.Fprintf(&b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#ddd"/><text x="%.1f" y="%.1f" text-anchor="end">%s</text>`+"\n",
			sx(0), sy(y), sx(maxX), sy(y), sx(0)-6, sy(y)+4, num(y))
	}
	fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" text-anchor="middle">%s</text>`+"\n", sx(maxX/2), height-10, html.EscapeString(xLabel))
	fmt.Fprintf(&b, `<text transform="translate(16 %.1f) rotate(-90)" text-anchor="middle">%s</text>`+"\n", sy(maxY/2), html.EscapeString(yLabel))
	var line []string
	for _, p := range pts {
		line = append(line, fmt.Sprintf("%.1f,%.1f", sx(p[0]), sy(p[1])))
	}
	fmt.Fprintf(&b, `<polyline fill="none" stroke="#1f77b4" stroke-width="2" points="%s"/>`+"\n", strings.Join(line, " "))
	if len(pts) <= 20 { // a sweep: mark each run
		for _, p := range pts {
			fmt.Fprintf(&b, `<circle cx="%.1f" cy="%.1f" r="4" fill="#1f77b4"/>`+"\n", sx(p[0]), sy(p[1]))
		}
		for i, l := range labels {
			fmt.Fprintf(&b, `<text x="%.1f" y="%.1f">%s</text>`+"\n", sx(pts[i][0])+7, sy(pts[i][1])-7, html.EscapeString(l))
		}
	}
	b.WriteString("</svg>\n")
	_, err := io.WriteString(w, b.String())
	return err
}

// tick is a round step that cuts 0..max into about five parts.
func tick(max float64) float64 {
	if max <= 0 {
		return 1
	}
	step := math.Pow(10, math.Floor(math.Log10(max/5)))
	for _, m := range []float64{1, 2, 5, 10} {
		if max/(step*m) <= 6 {
			return step * m
		}
	}
	return step * 10
}

// num prints an axis value: 1500000 as 1.5M, 20000 as 20k.
func num(v float64) string {
	v = math.Round(v*1e6) / 1e6 // the steps' float sums
	switch {
	case v >= 1e6:
		return strconv.FormatFloat(v/1e6, 'f', -1, 64) + "M"
	case v >= 1e4:
		return strconv.FormatFloat(v/1e3, 'f', -1, 64) + "k"
	}
	return strconv.FormatFloat(v, 'f', -1, 64)
}
