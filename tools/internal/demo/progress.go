package demo

import (
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/schollz/progressbar/v3"
)

// progress shows how far a phase is: a bar on a terminal, a line every two
// seconds otherwise (CI logs, pipes).
type progress struct {
	mu    sync.Mutex // set is called from several goroutines
	bar   *progressbar.ProgressBar
	out   io.Writer
	label string
	total int64
	last  time.Time
}

func newProgress(out io.Writer, terminal bool, label string, total int64) *progress {
	p := &progress{out: out, label: label, total: total}
	if terminal {
		p.bar = progressbar.NewOptions64(total,
			progressbar.OptionSetWriter(out), progressbar.OptionSetDescription(fmt.Sprintf("%-10s", label)),
			progressbar.OptionShowCount(), progressbar.OptionShowIts(), progressbar.OptionSetItsString("events"),
			progressbar.OptionSetWidth(30), progressbar.OptionThrottle(100*time.Millisecond),
			progressbar.OptionClearOnFinish())
	}
	return p
}

func (p *progress) set(n int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.bar != nil {
		_ = p.bar.Set64(n)
		return
	}
	if time.Since(p.last) >= 2*time.Second || n == p.total {
		p.last = time.Now()
		fmt.Fprintf(p.out, "  %-10s %d/%d\n", p.label, n, p.total)
	}
}

func (p *progress) done() {
	if p.bar != nil {
		_ = p.bar.Finish()
	}
}
