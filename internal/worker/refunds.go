package worker

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/segmentio/kafka-go"
	"go.uber.org/zap"

	"github.com/quotaflow/billing/internal/consumer"
	"github.com/quotaflow/billing/internal/event"
	appmetrics "github.com/quotaflow/billing/internal/metrics"
)

// decodeRefund is the refunds consumer's decoder, routed by merchant.
func decodeRefund(m kafka.Message) (event.RefundCommand, consumer.Route, error) {
	r, err := event.DecodeRefund(m.Key, m.Value)
	if err != nil {
		return event.RefundCommand{}, consumer.Route{}, err
	}
	return r, consumer.Route{Key: r.MerchantID}, nil
}

// refundHandler runs a lane batch of refunds through the refund path of
// billingctl (deduct.RefundBatch): one transaction for the batch.
type refundHandler billingHandler

func (h *refundHandler) HandleBatch(ctx context.Context, items []consumer.Item[event.RefundCommand]) ([]error, error) {
	refunds := values(items)
	results, err := h.deductor.RefundBatch(ctx, refunds)
	if err != nil {
		return nil, err // for the whole batch: the consumer retries it, or splits it if permanent
	}
	errs := make([]error, len(items))
	for i, r := range results {
		h.metrics.refunds.WithLabelValues(string(r.Outcome)).Inc()
		if errs[i] = r.Err; r.Err == nil { // else permanent: the consumer dead-letters it and logs why
			logResult(h.log, "refund", items[i].Msg, zap.String("refund_id", refunds[i].RefundID), refunds[i].MerchantID, r)
		}
	}
	return errs, nil
}

// pendingAges is the ledger's view of the refunds that wait for their payment.
type pendingAges interface {
	PendingAges(ctx context.Context) ([]time.Duration, error)
}

// pendingRefunds is a collector that reads the pending refunds when scraped
// (nothing polls between scrapes): how many, how many are older than
// overdue (BillingRefundsPendingOverdue), and the oldest's age. A failed
// read, or one before watch, reports nothing: the series go stale, not zero.
type pendingRefunds struct {
	ledger            pendingAges // nil until watch
	overdue           time.Duration
	log               *zap.Logger
	count, late, aged *prometheus.Desc
}

func newPendingRefunds() *pendingRefunds {
	desc := func(name, help string) *prometheus.Desc {
		return prometheus.NewDesc(appmetrics.Namespace+"_"+name, help, nil, nil)
	}
	return &pendingRefunds{
		count: desc("refunds_pending", "Refunds waiting for their payment (billingctl payment refunds --pending)."),
		late:  desc("refunds_pending_overdue", "Refunds waiting for their payment longer than WORKER_REFUND_PENDING_AGE."),
		aged:  desc("refunds_pending_oldest_seconds", "Age of the oldest refund waiting for its payment (0 when none)."),
	}
}

// watch gives the collector its source, before the metrics are served.
func (p *pendingRefunds) watch(l pendingAges, overdue time.Duration, log *zap.Logger) {
	p.ledger, p.overdue, p.log = l, overdue, log
}

func (p *pendingRefunds) Describe(ch chan<- *prometheus.Desc) {
	ch <- p.count
	ch <- p.late
	ch <- p.aged
}

// collectTimeout bounds the read a scrape makes.
const collectTimeout = 2 * time.Second

func (p *pendingRefunds) Collect(ch chan<- prometheus.Metric) {
	if p.ledger == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), collectTimeout)
	defer cancel()
	ages, err := p.ledger.PendingAges(ctx)
	if err != nil {
		p.log.Warn("pending refunds not read for /metrics", zap.Error(err))
		return
	}
	var late int
	var oldest time.Duration
	for _, a := range ages {
		if a >= p.overdue {
			late++
		}
		oldest = max(oldest, a)
	}
	ch <- prometheus.MustNewConstMetric(p.count, prometheus.GaugeValue, float64(len(ages)))
	ch <- prometheus.MustNewConstMetric(p.late, prometheus.GaugeValue, float64(late))
	ch <- prometheus.MustNewConstMetric(p.aged, prometheus.GaugeValue, oldest.Seconds())
}
