package reconcile

import (
	"errors"
	"slices"
	"time"
)

// Status is the outcome of a run (reconcile_runs.status).
type Status string

// Statuses, with their exit codes.
const (
	StatusClean    Status = "clean"    // exit 0: no finding
	StatusDrift    Status = "drift"    // exit 1: a finding is left (dry run, over ceiling, critical, aborted)
	StatusRepaired Status = "repaired" // exit 2: every finding was repaired
	StatusFailed   Status = "failed"   // exit 3: the run could not finish
)

// Report is the result of one run.
type Report struct {
	RunID         int64     `json:"run_id,string"` // 0 when the audit rows could not be written
	StartedAt     time.Time `json:"started_at"`
	FinishedAt    time.Time `json:"finished_at"`
	DryRun        bool      `json:"dry_run"`
	Status        Status    `json:"status"`
	Checked       int64     `json:"merchants_checked"` // quota hash read under the lock
	Clean         int64     `json:"clean"`
	Busy          int64     `json:"busy_skipped"`
	Drifted       int64     `json:"drifted"`  // merchants with at least one finding
	Repaired      int64     `json:"repaired"` // merchants whose repair was applied
	AbsDrift      int64     `json:"abs_drift"`
	LedgerAudited int64     `json:"ledger_audited"`
	BusyMerchants []string  `json:"busy_merchants,omitempty"`
	Unknown       []string  `json:"unknown_merchants,omitempty"` // named with --merchant, absent from merchant_balance
	Findings      []Finding `json:"findings"`
	Error         string    `json:"error,omitempty"`

	err error
}

func statusOf(findings []Finding) Status {
	if len(findings) == 0 {
		return StatusClean
	}
	for _, f := range findings {
		if f.Action != ActionRepaired {
			return StatusDrift
		}
	}
	return StatusRepaired
}

func (r *Report) fail(err error) {
	r.err = errors.Join(r.err, err)
	r.Error = r.err.Error()
	r.Status = StatusFailed
}

// Err is why the run failed, or nil.
func (r *Report) Err() error { return r.err }

// Exit is the process exit code: 0 clean, 1 drift found, 2 repaired, 3 failed.
func (r *Report) Exit() int {
	if i := slices.Index([]Status{StatusClean, StatusDrift, StatusRepaired}, r.Status); i >= 0 {
		return i
	}
	return 3
}
