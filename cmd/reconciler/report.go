package main

import (
	"encoding/json"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/quotaflow/billing/internal/reconcile"
)

// writeReport renders the report in format (outputText or outputJSON).
func writeReport(w io.Writer, r *reconcile.Report, format string) error {
	if format == outputJSON {
		return writeJSON(w, r)
	}
	return writeText(w, r)
}

// writeJSON writes the report as one JSON object and a newline.
func writeJSON(w io.Writer, r *reconcile.Report) error {
	out := *r
	if out.Findings == nil {
		out.Findings = []reconcile.Finding{}
	}
	return json.NewEncoder(w).Encode(out)
}

// maxTextFindings bounds the findings listed by writeText; the audit table
// and the JSON report have all of them.
const maxTextFindings = 50

// writeText writes a summary for a person.
func writeText(w io.Writer, r *reconcile.Report) error {
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
