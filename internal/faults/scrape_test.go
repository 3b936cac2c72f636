package faults

import (
	"strconv"

	"github.com/quotaflow/billing/internal/workerproc"
)

// samples is one scrape of a worker's /metrics.
type samples = workerproc.Samples

// outcome is billing_events_total for one outcome.
func outcome(m samples, o string) float64 {
	return m[`billing_events_total{outcome="`+o+`"}`]
}

func lastLines(s string, n int) string { return workerproc.LastLines(s, n) }

func itoa(n int) string { return strconv.Itoa(n) }
