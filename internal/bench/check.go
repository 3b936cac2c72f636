package bench

import (
	"context"
	"fmt"

	"github.com/quotaflow/billing/internal/event"
	"github.com/quotaflow/billing/internal/ledger"
	"github.com/quotaflow/billing/internal/quota"
)

// RedisBalanced is implemented by strategies that keep each merchant's
// balance in Redis (keyspace.Quota); the check then compares it with MySQL.
type RedisBalanced interface {
	RedisBalances() bool
}

// RedisBalances implements RedisBalanced.
func (s *RedisPerEvent) RedisBalances() bool { return true }

// RedisBalances implements RedisBalanced.
func (s *Pipeline) RedisBalances() bool { return true }

// Check is the correctness verdict on one strategy's run.
type Check struct {
	// LedgerRows counts the debit and rejected rows (the credits are the grants).
	LedgerRows int64 `json:"ledger_rows"`
	Debits     int64 `json:"debits"`
	Rejected   int64 `json:"rejected"`
	// LedgerOK: exactly one row per event of the workload, with its merchant
	// and amount, and no other debit or rejected row.
	LedgerOK bool `json:"ledger_ok"`
	// BalancesOK: every merchant_balance row equals its ledger sums (credited
	// = credit rows, debited = debit rows), and no debit or credit row
	// belongs to a merchant without a balance row.
	BalancesOK bool `json:"balances_ok"`
	// RedisOK: every merchant's Redis remain equals credited - debited and
	// no deduction is left pending; nil when the strategy keeps no Redis balance.
	RedisOK *bool `json:"redis_ok"`
	// RedisMissing counts merchants without a Redis balance: not wrong (a
	// strategy that hydrates lazily may never have touched them), not checked.
	RedisMissing int64 `json:"redis_missing,omitempty"`
	// NonNegative: no balance row, ledger balance_after or Redis remain below zero.
	NonNegative bool `json:"non_negative"`
	// Problems describes the first failures found.
	Problems []string `json:"problems,omitempty"`
}

// OK reports whether every check passed.
func (c Check) OK() bool {
	return c.LedgerOK && c.BalancesOK && c.NonNegative && (c.RedisOK == nil || *c.RedisOK)
}

const maxProblems = 10

func (c *Check) problem(format string, args ...any) {
	if len(c.Problems) < maxProblems {
		c.Problems = append(c.Problems, fmt.Sprintf(format, args...))
	}
}

// checker verifies one strategy's database (and Redis) after its run.
type checker struct {
	env    *Env
	events []event.PaymentSucceeded
	redis  bool
}

func (k checker) run(ctx context.Context) (Check, error) {
	c := Check{LedgerOK: true, BalancesOK: true, NonNegative: true}
	if err := k.ledger(ctx, &c); err != nil {
		return c, err
	}
	balances, err := k.balances(ctx, &c)
	if err != nil {
		return c, err
	}
	if k.redis {
		ok := true
		c.RedisOK = &ok
		if err := k.redisBalances(ctx, &c, balances); err != nil {
			return c, err
		}
	}
	return c, nil
}

type ledgerEntry struct {
	merchant string
	amount   int64
}

func (k checker) ledger(ctx context.Context, c *Check) error {
	want := make(map[string]ledgerEntry, len(k.events))
	for _, e := range k.events {
		want[e.EventID] = ledgerEntry{e.MerchantID, e.Amount}
	}
	rows, err := k.env.DB.QueryContext(ctx,
		"SELECT event_id, merchant_id, amount, kind, COALESCE(balance_after, 0) FROM quota_ledger WHERE kind <> ?", ledger.KindCredit)
	if err != nil {
		return fmt.Errorf("bench: check ledger: %w", err)
	}
	defer rows.Close()
	seen := make(map[string]bool, len(k.events))
	for rows.Next() {
		var id, m string
		var kind ledger.Kind
		var amount, after int64
		if err := rows.Scan(&id, &m, &amount, &kind, &after); err != nil {
			return fmt.Errorf("bench: check ledger: %w", err)
		}
		c.LedgerRows++
		if kind == ledger.KindDebit {
			c.Debits++
		} else {
			c.Rejected++
		}
		if after < 0 {
			c.NonNegative = false
			c.problem("ledger row %s has balance_after %d", id, after)
		}
		w, ok := want[id]
		switch {
		case !ok:
			c.LedgerOK = false
			c.problem("ledger row %s matches no event of the workload", id)
		case seen[id]:
			c.LedgerOK = false
			c.problem("event %s has more than one ledger row", id)
		case w != (ledgerEntry{m, amount}):
			c.LedgerOK = false
			c.problem("event %s: ledger says %s/%d, workload %s/%d", id, m, amount, w.merchant, w.amount)
		}
		seen[id] = true
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("bench: check ledger: %w", err)
	}
	if missing := len(want) - len(seen); missing > 0 {
		c.LedgerOK = false
		c.problem("%d events have no ledger row", missing)
	}
	return nil
}

const balanceSumsSQL = `SELECT b.merchant_id, b.credited, b.debited,
	COALESCE(SUM(CASE WHEN l.kind = 'credit' THEN l.amount END), 0),
	COALESCE(SUM(CASE WHEN l.kind = 'debit' THEN l.amount END), 0)
FROM merchant_balance b LEFT JOIN quota_ledger l ON l.merchant_id = b.merchant_id
GROUP BY b.merchant_id, b.credited, b.debited`

const orphanRowsSQL = `SELECT COUNT(*) FROM quota_ledger l
LEFT JOIN merchant_balance b ON b.merchant_id = l.merchant_id
WHERE b.merchant_id IS NULL AND l.kind <> 'rejected'`

// balances checks merchant_balance against the ledger and returns credited -
// debited per merchant.
func (k checker) balances(ctx context.Context, c *Check) (map[string]int64, error) {
	rows, err := k.env.DB.QueryContext(ctx, balanceSumsSQL)
	if err != nil {
		return nil, fmt.Errorf("bench: check balances: %w", err)
	}
	defer rows.Close()
	out := make(map[string]int64)
	mismatched := 0
	for rows.Next() {
		var m string
		var credited, debited, credits, debits int64
		if err := rows.Scan(&m, &credited, &debited, &credits, &debits); err != nil {
			return nil, fmt.Errorf("bench: check balances: %w", err)
		}
		out[m] = credited - debited
		if credited != credits || debited != debits {
			c.BalancesOK = false
			mismatched++
			c.problem("merchant %s: balance %d/%d, ledger sums %d/%d (credited/debited)", m, credited, debited, credits, debits)
		}
		if credited-debited < 0 {
			c.NonNegative = false
			c.problem("merchant %s: balance %d", m, credited-debited)
		}
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("bench: check balances: %w", err)
	}
	var orphans int64
	if err := k.env.DB.QueryRowContext(ctx, orphanRowsSQL).Scan(&orphans); err != nil {
		return nil, fmt.Errorf("bench: check balances: %w", err)
	}
	if orphans > 0 {
		c.BalancesOK = false
		c.problem("%d credit/debit rows of merchants without a balance row", orphans)
	}
	if mismatched > maxProblems {
		c.problem("... %d merchants disagree with their ledger in all", mismatched)
	}
	return out, nil
}

func (k checker) redisBalances(ctx context.Context, c *Check, balances map[string]int64) error {
	merchants := make([]string, 0, len(balances))
	keys := make([]string, 0, len(balances))
	for m := range balances {
		merchants, keys = append(merchants, m), append(keys, k.env.Keys.Quota(m))
	}
	hashes, err := quota.Read(ctx, k.env.Redis, keys)
	if err != nil {
		return fmt.Errorf("bench: check redis: %w", err)
	}
	for i, m := range merchants {
		compareRedis(c, m, hashes[i], balances[m])
	}
	return nil
}

func compareRedis(c *Check, m string, h map[string]string, want int64) {
	fail := func(format string, args ...any) {
		ok := false
		c.RedisOK = &ok
		c.problem(format, args...)
	}
	if len(h) == 0 {
		// A strategy that hydrates lazily may never have touched this merchant.
		c.RedisMissing++
		return
	}
	q, err := quota.Parse(h)
	switch {
	case err != nil:
		fail("merchant %s: %v", m, err)
		return
	case !q.Exists:
		fail("merchant %s: quota hash without remain", m)
		return
	}
	if q.Remain < 0 {
		c.NonNegative = false
		c.problem("merchant %s: redis remain %d", m, q.Remain)
	}
	if q.Remain != want {
		fail("merchant %s: redis remain %d, MySQL credited - debited %d", m, q.Remain, want)
	}
	if len(q.Pending) > 0 {
		fail("merchant %s: deduction of %s still pending", m, q.Pending[0].EventID)
	}
}
