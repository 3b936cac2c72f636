package reconcile

import (
	"sync"
	"time"
)

// tally gathers the pages' outcomes of one run; pages run concurrently.
type tally struct {
	mu       sync.Mutex
	findings []Finding
	audited  int64 // merchants whose ledger was audited
	checked  int64
	clean    int64
	repaired int64
	busy     []string // first-pass busy, until the retry takes them
	final    []string // busy after the retry
	unknown  []string
	critical map[string]bool
}

func newTally() *tally { return &tally{critical: make(map[string]bool)} }

// addLedger records a page's ledger findings and returns the page's merchants
// that have a critical finding.
func (t *tally) addLedger(merchants int, found []Finding) map[string]bool {
	held := make(map[string]bool)
	for _, f := range found {
		if f.Kind.Critical() {
			held[f.MerchantID] = true
		}
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	t.audited += int64(merchants)
	t.findings = append(t.findings, found...)
	for m := range held {
		t.critical[m] = true
	}
	return held
}

// addPage records a page's quota check. retry says it is the busy retry,
// whose busy merchants are final.
func (t *tally) addPage(o pageOutcome, retry bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.findings = append(t.findings, o.findings...)
	t.checked += o.checked
	t.clean += o.clean
	t.repaired += o.repaired
	t.unknown = append(t.unknown, o.unknown...)
	if retry {
		t.final = append(t.final, o.busy...)
	} else {
		t.busy = append(t.busy, o.busy...)
	}
}

func (t *tally) takeBusy() []string {
	t.mu.Lock()
	defer t.mu.Unlock()
	b := t.busy
	t.busy = nil
	return b
}

func (t *tally) criticalSet() map[string]bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make(map[string]bool, len(t.critical))
	for m := range t.critical {
		out[m] = true
	}
	return out
}

// report builds the run's report. err is the run's failure, if any.
func (t *tally) report(start, end time.Time, dryRun bool, err error) *Report {
	t.mu.Lock()
	defer t.mu.Unlock()
	busy := append(append([]string(nil), t.final...), t.busy...) // t.busy is non-empty only if the run stopped early
	rep := &Report{StartedAt: start.UTC(), FinishedAt: end.UTC(), DryRun: dryRun,
		Checked: t.checked, Clean: t.clean, Busy: int64(len(busy)), Repaired: t.repaired,
		LedgerAudited: t.audited, BusyMerchants: busy, Unknown: t.unknown, Findings: t.findings}
	drifted := make(map[string]bool)
	for _, f := range t.findings {
		drifted[f.MerchantID] = true
		if f.Kind.redisDrift() {
			rep.AbsDrift += abs(f.Delta)
		}
	}
	rep.Drifted = int64(len(drifted))
	rep.Status = statusOf(t.findings)
	if err != nil {
		rep.fail(err)
	}
	return rep
}
