package bench

import (
	"runtime"
	"time"

	"github.com/quotaflow/billing/internal/event"
	"github.com/quotaflow/billing/internal/scenario"
)

// Report is the outcome of a bench run.
type Report struct {
	StartedAt time.Time    `json:"started_at"`
	Workload  WorkloadInfo `json:"workload"`
	Host      Host         `json:"host"`
	Results   []Result     `json:"results"`
}

// WorkloadInfo describes what every strategy was fed.
type WorkloadInfo struct {
	Events      int      `json:"events"`
	Merchants   int      `json:"merchants"`
	Skew        string   `json:"skew"`
	TopShare    float64  `json:"top_merchant_share"` // measured share of the busiest merchant
	MinAmount   int64    `json:"min_amount"`
	MaxAmount   int64    `json:"max_amount"`
	TotalAmount int64    `json:"total_amount"`
	Quota       int64    `json:"quota_per_merchant"`
	Seed        uint64   `json:"seed"`
	Callers     int      `json:"callers"`
	Batch       int      `json:"batch"`
	Strategies  []string `json:"strategies"`
}

// Host is where the run happened.
type Host struct {
	CPUs       int    `json:"cpus"`
	GOMAXPROCS int    `json:"gomaxprocs"`
	Go         string `json:"go"`
	MySQL      string `json:"mysql"`
	Redis      string `json:"redis"`
}

// Result is one strategy's run.
type Result struct {
	Strategy     string        `json:"strategy"`
	Events       int           `json:"events"`
	Elapsed      time.Duration `json:"-"`
	EventsPerSec float64       `json:"events_per_sec"`
	// VsRowLock is EventsPerSec over rowlock's in the same run (0: no baseline).
	VsRowLock float64          `json:"vs_rowlock,omitempty"`
	Latency   Latencies        `json:"-"`
	Check     Check            `json:"check"`
	Counters  map[string]int64 `json:"counters,omitempty"`
	Database  string           `json:"database"`
	KeyPrefix string           `json:"redis_prefix"`
	Error     string           `json:"error,omitempty"`

	// Deadlocks are the server's while the callers ran: other sessions'
	// deadlocks on the server count too.
	Deadlocks scenario.Deadlocks `json:"deadlocks"`

	// Milliseconds, for JSON readers.
	ElapsedMS float64 `json:"elapsed_ms"`
	P50MS     float64 `json:"p50_ms"`
	P99MS     float64 `json:"p99_ms"`
	P999MS    float64 `json:"p999_ms"`
	MaxMS     float64 `json:"max_ms"`
}

// OK reports whether the strategy ran to the end and passed every check.
func (r Result) OK() bool { return r.Error == "" && r.Check.OK() }

func newReport(cfg Config, events []event.PaymentSucceeded) *Report {
	perMerchant := map[string]int{}
	var total int64
	top := 0
	for _, e := range events {
		perMerchant[e.MerchantID]++
		top = max(top, perMerchant[e.MerchantID])
		total += e.Amount
	}
	return &Report{
		StartedAt: time.Now().UTC(),
		Workload: WorkloadInfo{
			Events: len(events), Merchants: cfg.Merchants, Skew: cfg.Skew.String(),
			TopShare:  float64(top) / float64(max(len(events), 1)),
			MinAmount: cfg.MinAmount, MaxAmount: cfg.MaxAmount, TotalAmount: total,
			Quota: cfg.Quota, Seed: cfg.Seed, Callers: cfg.Callers, Batch: cfg.Batch,
			Strategies: cfg.Strategies,
		},
		Host: Host{CPUs: runtime.NumCPU(), GOMAXPROCS: runtime.GOMAXPROCS(0), Go: runtime.Version()},
	}
}

// finish fills the ratios to rowlock and the millisecond fields.
func (r *Report) finish() {
	var base float64
	for _, res := range r.Results {
		if res.Strategy == NameRowLock && res.Error == "" {
			base = res.EventsPerSec
		}
	}
	for i := range r.Results {
		res := &r.Results[i]
		if base > 0 && res.Error == "" {
			res.VsRowLock = res.EventsPerSec / base
		}
		res.ElapsedMS = ms(res.Elapsed)
		res.P50MS, res.P99MS, res.P999MS, res.MaxMS = ms(res.Latency.P50), ms(res.Latency.P99), ms(res.Latency.P999), ms(res.Latency.Max)
	}
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// OK reports whether every strategy ran and passed its checks.
func (r *Report) OK() bool {
	for _, res := range r.Results {
		if !res.OK() {
			return false
		}
	}
	return len(r.Results) > 0
}
