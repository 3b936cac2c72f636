package dlq

import (
	"fmt"
	"io"
	"time"

	"github.com/schollz/progressbar/v3"
)

// ProgressObserver shows a replay's progress: a bar on a terminal, a plain
// line at most every Interval elsewhere (logs, CI).
type ProgressObserver struct {
	w        io.Writer
	terminal bool
	Interval time.Duration // plain lines: at most one per Interval (1s)

	bar             *progressbar.ProgressBar
	total, examined int64
	sent, refused   int
	lastLine        time.Time
}

// NewProgressObserver returns an observer that writes to w; terminal picks the bar.
func NewProgressObserver(w io.Writer, terminal bool) *ProgressObserver {
	return &ProgressObserver{w: w, terminal: terminal, Interval: time.Second}
}

// Begin implements Observer.
func (p *ProgressObserver) Begin(total int64) {
	p.total = total
	if p.terminal {
		p.bar = progressbar.NewOptions64(total,
			progressbar.OptionSetWriter(p.w),
			progressbar.OptionSetDescription("replay"),
			progressbar.OptionShowCount(),
			progressbar.OptionSetPredictTime(true),
			progressbar.OptionThrottle(100*time.Millisecond),
			progressbar.OptionSetRenderBlankState(true),
		)
		return
	}
	fmt.Fprintf(p.w, "replay: %d DLQ offset(s) to examine\n", total)
	p.lastLine = time.Now()
}

// Step implements Observer.
func (p *ProgressObserver) Step(s Step) {
	p.examined++
	if s.Action == ActionRefuse || s.Action == ActionUnreadable {
		p.refused++
	}
	if p.bar != nil {
		_ = p.bar.Add(1)
	}
}

// Acked implements Observer.
func (p *ProgressObserver) Acked(sent int) {
	p.sent = sent
	if p.bar != nil {
		p.bar.Describe(fmt.Sprintf("replay: sent %d, refused %d", p.sent, p.refused))
		return
	}
	if time.Since(p.lastLine) >= p.Interval {
		p.line()
	}
}

// Finish ends the bar or writes the last line.
func (p *ProgressObserver) Finish() {
	if p.bar != nil {
		_ = p.bar.Exit()
		fmt.Fprintln(p.w)
		return
	}
	p.line()
}

func (p *ProgressObserver) line() {
	fmt.Fprintf(p.w, "replay: examined %d/%d, sent %d, refused %d\n", p.examined, p.total, p.sent, p.refused)
	p.lastLine = time.Now()
}

// PlanPrinter prints every message a dry run would send: as text, one line
// each (WritePlanned), or, with JSON, collected in Planned for one document.
type PlanPrinter struct {
	W       io.Writer
	JSON    bool
	Planned []PlannedView
	Err     error // the first write error
}

// Begin implements Observer.
func (p *PlanPrinter) Begin(int64) {}

// Acked implements Observer.
func (p *PlanPrinter) Acked(int) {}

// Step implements Observer.
func (p *PlanPrinter) Step(s Step) {
	switch {
	case s.Action != ActionSend:
	case p.JSON:
		p.Planned = append(p.Planned, s.View())
	case p.Err == nil:
		p.Err = WritePlanned(p.W, s)
	}
}
