package config

import (
	"time"

	"github.com/quotaflow/billing/internal/quotaevent"
)

// QuotaEvents configures the balance events.
type QuotaEvents struct {
	Topic         string
	PerPayment    bool              // quota.deducted / quota.rejected for every payment
	DefaultAlerts quotaevent.Alerts // thresholds of merchants without their own
	Retention     time.Duration     // how long published outbox rows stay before they are pruned
}

// DefaultQuotaEventsTopic is the balance-events topic.
const DefaultQuotaEventsTopic = "quota.events"

func (p *parser) quotaEvents() QuotaEvents {
	q := QuotaEvents{
		Topic:      p.str("QUOTA_EVENTS_TOPIC", DefaultQuotaEventsTopic),
		PerPayment: p.boolean("QUOTA_EVENTS_PER_PAYMENT", false),
		Retention:  p.duration("QUOTA_OUTBOX_RETENTION", time.Minute, 0, 7*24*time.Hour),
	}
	raw := p.str("QUOTA_LOW_DEFAULT", "none")
	a, err := quotaevent.ParseAlerts(raw)
	if err != nil {
		p.fail("QUOTA_LOW_DEFAULT", raw, err.Error()+` (e.g. "1000", "10%", "1000,10%" or "none")`)
	}
	q.DefaultAlerts = a
	return q
}
