package reconcile

import (
	"errors"
	"time"
)

// Status is the outcome of a run (reconcile_runs.status).
type Status string

// Statuses. Only drift counts: missing_key findings never change a status.
const (
	StatusClean    Status = "clean"    // no drift
	StatusDrift    Status = "drift"    // drift is left (dry run, over ceiling, critical, aborted)
	StatusRepaired Status = "repaired" // drift was found and all of it repaired
	StatusFailed   Status = "failed"   // the run could not finish
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
	Drifted       int64     `json:"drifted"`  // merchants with at least one drift finding (missing_key is not drift)
	Repaired      int64     `json:"repaired"` // merchants whose drift repair was applied
	Hydrated      int64     `json:"hydrated"` // merchants whose missing quota hash was hydrated
	AbsDrift      int64     `json:"abs_drift"`
	LedgerAudited int64     `json:"ledger_audited"`
	BusyMerchants []string  `json:"busy_merchants,omitempty"`
	Unknown       []string  `json:"unknown_merchants,omitempty"` // named with --merchant, absent from merchant_balance
	Findings      []Finding `json:"findings"`
	Error         string    `json:"error,omitempty"`

	err error
}

func statusOf(findings []Finding) Status {
	s := StatusClean
	for _, f := range findings {
		switch {
		case !f.Kind.drift():
		case f.Action != ActionRepaired:
			return StatusDrift
		default:
			s = StatusRepaired
		}
	}
	return s
}

func (r *Report) fail(err error) {
	r.err = errors.Join(r.err, err)
	r.Error = r.err.Error()
	r.Status = StatusFailed
}

// Err is why the run failed, or nil.
func (r *Report) Err() error { return r.err }
