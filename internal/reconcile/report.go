package reconcile

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"text/tabwriter"
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
	switch r.Status {
	case StatusClean:
		return 0
	case StatusDrift:
		return 1
	case StatusRepaired:
		return 2
	default:
		return 3
	}
}

// Write renders the report in format (OutputText or OutputJSON).
func (r *Report) Write(w io.Writer, format string) error {
	if format == OutputJSON {
		return r.WriteJSON(w)
	}
	return r.WriteText(w)
}

// WriteJSON writes the report as one JSON object and a newline.
func (r *Report) WriteJSON(w io.Writer) error {
	out := *r
	if out.Findings == nil {
		out.Findings = []Finding{}
	}
	return json.NewEncoder(w).Encode(out)
}

// maxTextFindings bounds the findings listed by WriteText; the audit table
// and the JSON report have all of them.
const maxTextFindings = 50

// WriteText writes a summary for a person.
func (r *Report) WriteText(w io.Writer) error {
	ew := &errWriter{w: w}
	mode := ""
	if r.DryRun {
		mode = " (dry run: Redis untouched)"
	}
	ew.printf("reconcile run %d%s: %s in %s\n", r.RunID, mode, r.Status, r.FinishedAt.Sub(r.StartedAt).Round(time.Millisecond))
	ew.printf("merchants: checked=%d clean=%d busy=%d drifted=%d repaired=%d ledger_audited=%d abs_drift=%d\n",
		r.Checked, r.Clean, r.Busy, r.Drifted, r.Repaired, r.LedgerAudited, r.AbsDrift)
	if len(r.Findings) > 0 {
		tw := tabwriter.NewWriter(ew, 2, 8, 2, ' ', 0)
		fmt.Fprintln(tw, "MERCHANT\tKIND\tREDIS\tEXPECTED\tDELTA\tPENDING\tACTION\tDETAIL")
		for i, f := range r.Findings {
			if i == maxTextFindings {
				fmt.Fprintf(tw, "... %d more (--output json, or reconcile_findings where run_id = %d)\n", len(r.Findings)-i, r.RunID)
				break
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%+d\t%d\t%s\t%s\n", f.MerchantID, f.Kind, redisText(f.RedisValue),
				f.Expected, f.Delta, f.Pending, f.Action, f.Detail)
		}
		_ = tw.Flush()
	}
	if len(r.BusyMerchants) > 0 {
		ew.printf("busy (not checked, a worker held the lock): %v\n", limit(r.BusyMerchants, 20))
	}
	if len(r.Unknown) > 0 {
		ew.printf("unknown merchants (no merchant_balance row): %v\n", limit(r.Unknown, 20))
	}
	if r.Error != "" {
		ew.printf("error: %s\n", r.Error)
	}
	return ew.err
}

func redisText(v *int64) string {
	if v == nil {
		return "-"
	}
	return fmt.Sprint(*v)
}

func limit(s []string, n int) []string {
	if len(s) <= n {
		return s
	}
	return append(append([]string(nil), s[:n]...), fmt.Sprintf("(+%d more)", len(s)-n))
}

type errWriter struct {
	w   io.Writer
	err error
}

func (e *errWriter) Write(p []byte) (int, error) {
	if e.err != nil {
		return 0, e.err
	}
	n, err := e.w.Write(p)
	e.err = err
	return n, err
}

func (e *errWriter) printf(format string, args ...any) { fmt.Fprintf(e, format, args...) }
