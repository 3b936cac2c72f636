package main

import (
	"bufio"
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

// maxTextFindings bounds the findings listed in text; JSON and the audit table have all.
const maxTextFindings = 50

// writeText writes a summary for a person.
func writeText(w io.Writer, r *reconcile.Report) error {
	bw := bufio.NewWriter(w) // keeps the first write error for Flush
	mode := ""
	if r.DryRun {
		mode = " (dry run: Redis untouched)"
	}
	fmt.Fprintf(bw, "reconcile run %d%s: %s in %s\n", r.RunID, mode, r.Status, r.FinishedAt.Sub(r.StartedAt).Round(time.Millisecond))
	fmt.Fprintf(bw, "merchants: checked=%d clean=%d busy=%d drifted=%d repaired=%d ledger_audited=%d abs_drift=%d\n",
		r.Checked, r.Clean, r.Busy, r.Drifted, r.Repaired, r.LedgerAudited, r.AbsDrift)
	if len(r.Findings) > 0 {
		tw := tabwriter.NewWriter(bw, 2, 8, 2, ' ', 0)
		fmt.Fprintln(tw, "MERCHANT\tKIND\tREDIS\tEXPECTED\tDELTA\tPENDING\tACTION\tDETAIL")
		for i, f := range r.Findings {
			if i == maxTextFindings {
				fmt.Fprintf(tw, "... %d more (--output json, or reconcile_findings where run_id = %d)\n", len(r.Findings)-i, r.RunID)
				break
			}
			redis := "-"
			if f.RedisValue != nil {
				redis = fmt.Sprint(*f.RedisValue)
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%+d\t%d\t%s\t%s\n", f.MerchantID, f.Kind, redis, f.Expected, f.Delta, f.Pending, f.Action, f.Detail)
		}
		_ = tw.Flush()
	}
	if len(r.BusyMerchants) > 0 {
		fmt.Fprintf(bw, "busy (not checked, a worker held the lock): %v\n", limit(r.BusyMerchants, 20))
	}
	if len(r.Unknown) > 0 {
		fmt.Fprintf(bw, "unknown merchants (no merchant_balance row): %v\n", limit(r.Unknown, 20))
	}
	if r.Error != "" {
		fmt.Fprintf(bw, "error: %s\n", r.Error)
	}
	return bw.Flush()
}

func limit(s []string, n int) []string {
	if len(s) <= n {
		return s
	}
	return append(s[:n:n], fmt.Sprintf("(+%d more)", len(s)-n))
}
