// Package workload generates synthetic payment.succeeded traffic: a seeded,
// reproducible stream of events over a population of merchants, with a chosen
// skew, amounts, sources, and a share of duplicates and malformed messages;
// and, interleaved, a share of payment.refunded messages of those payments
// (partial, whole, over-refunded, sent before their payment, sent again).
//
// Every message says what it is (valid, duplicate, malformed), so a test or a
// checker knows the truth about what a consumer was fed. The same Config
// (seed included) always yields the same stream, byte for byte.
package workload

import (
	"cmp"
	"errors"
	"fmt"
	"time"

	"github.com/quotaflow/billing/internal/event"
)

// Defaults of Config.
const (
	DefaultMerchants = 1000
	DefaultMinAmount = 1
	DefaultMaxAmount = 10
	DefaultIDPrefix  = "evt-"
	DefaultStep      = time.Millisecond
	maxIDPrefixLen   = 40 // leaves room for the sequence number in a 64-char id
)

// defaultStart is the occurred_at of the first event when Config.Start is zero.
// It is fixed, not time.Now, so that a seed alone decides the stream.
var defaultStart = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// Config describes a stream. The zero value plus a seed is usable: 1000
// merchants, uniform, amounts 1..10, no duplicates, no malformed messages.
type Config struct {
	Seed      uint64
	Merchants int  // merchant ids m-000000 .. m-<Merchants-1>
	Skew      Skew // how events spread over merchants
	MinAmount int64
	MaxAmount int64 // amounts are uniform in [MinAmount, MaxAmount]
	// Duplicates is the share of messages that re-emit an earlier valid
	// message (same key, same bytes, same event_id); Malformed the share that
	// break the contract. Both in [0, 1], their sum at most 1.
	Duplicates float64
	Malformed  float64
	// Refunds is the share of messages that are refunds (topic Refunds),
	// of the kinds RefundMix weighs; the three shares sum to at most 1.
	Refunds   float64
	RefundMix RefundMix
	// IDPrefix starts every event_id (and, with "pay-" instead, every
	// payment_id): runs with different prefixes never share an event_id.
	IDPrefix string
	Start    time.Time     // occurred_at of the first message
	Step     time.Duration // occurred_at advances by Step per message
}

func (c *Config) setDefaults() {
	if c.MinAmount == 0 && c.MaxAmount == 0 {
		c.MinAmount, c.MaxAmount = DefaultMinAmount, DefaultMaxAmount
	}
	if c.Start.IsZero() {
		c.Start = defaultStart
	}
	if c.RefundMix == (RefundMix{}) {
		c.RefundMix = DefaultRefundMix
	}
	c.Merchants, c.IDPrefix, c.Step = cmp.Or(c.Merchants, DefaultMerchants), cmp.Or(c.IDPrefix, DefaultIDPrefix), cmp.Or(c.Step, DefaultStep)
}

// Validate reports every problem of c at once.
func (c Config) Validate() error {
	var errs []error
	add := func(bad bool, format string, args ...any) {
		if bad {
			errs = append(errs, fmt.Errorf(format, args...))
		}
	}
	add(c.Merchants < 1 || c.Merchants > 1_000_000, "merchants %d outside 1..1000000", c.Merchants)
	errs = append(errs, c.Skew.validate())
	add(c.MinAmount < 1 || c.MaxAmount < c.MinAmount || c.MaxAmount > event.MaxAmount, "amounts %d..%d: need 1 <= min <= max <= 10^12", c.MinAmount, c.MaxAmount)
	add(!share(c.Duplicates) || !share(c.Malformed) || !share(c.Refunds) || c.Duplicates+c.Malformed+c.Refunds > 1,
		"duplicates %v, malformed %v and refunds %v must be in [0,1] with a sum at most 1", c.Duplicates, c.Malformed, c.Refunds)
	errs = append(errs, c.RefundMix.validate())
	add(len(c.IDPrefix) > maxIDPrefixLen || (c.IDPrefix != "" && !event.ValidID(c.IDPrefix)),
		"id prefix %q must be at most %d characters of [A-Za-z0-9_.:-]", c.IDPrefix, maxIDPrefixLen)
	add(c.Step < 0, "step %v is negative", c.Step)
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("workload: %w", err)
	}
	return nil
}

func share(f float64) bool { return f >= 0 && f <= 1 }

// MerchantID is the id of the i-th merchant: m-000042.
func MerchantID(i int) string { return fmt.Sprintf("m-%06d", i) }

// MerchantIDs lists the ids of n merchants, m-000000 first.
func MerchantIDs(n int) []string {
	ids := make([]string, n)
	for i := range ids {
		ids[i] = MerchantID(i)
	}
	return ids
}
