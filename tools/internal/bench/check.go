package bench

import (
	"context"
	"fmt"

	"github.com/quotaflow/billing/internal/event"
	"github.com/quotaflow/billing/internal/invariant"
)

// Check is the correctness verdict on one strategy's run: package
// invariant's checks of the ledger, the balances and Redis.
type Check struct {
	// LedgerRows counts the debit and rejected rows (the credits are the grants).
	LedgerRows int64 `json:"ledger_rows"`
	Debits     int64 `json:"debits"`
	Rejected   int64 `json:"rejected"`
	// LedgerOK: exactly one row per event of the workload, with its merchant
	// and amount, and no other debit or rejected row.
	LedgerOK bool `json:"ledger_ok"`
	// BalancesOK: every merchant_balance row equals its ledger sums, and no
	// debit or credit row belongs to a merchant without a balance row.
	BalancesOK bool `json:"balances_ok"`
	// RedisOK: every merchant's Redis remain equals credited - debited and
	// no deduction is left pending; nil when the strategy keeps no Redis balance.
	RedisOK *bool `json:"redis_ok"`
	// RedisMissing counts merchants without a Redis balance: not wrong (a
	// strategy that hydrates lazily may never have touched them), not checked.
	RedisMissing int64 `json:"redis_missing,omitempty"`
	// NonNegative: no balance row, debit balance_after or Redis remain below zero.
	NonNegative bool `json:"non_negative"`
	// Problems describes the failures found.
	Problems []string `json:"problems,omitempty"`
}

// OK reports whether every check passed.
func (c Check) OK() bool {
	return c.LedgerOK && c.BalancesOK && c.NonNegative && (c.RedisOK == nil || *c.RedisOK)
}

// check verifies one strategy's database (and Redis, when redisBacked) after its run.
func check(ctx context.Context, env *Env, events []event.PaymentSucceeded, redisBacked bool) (Check, error) {
	st := invariant.State{DB: env.GORM, RedisSettled: true}
	if redisBacked {
		st.Redis, st.Keys = env.Redis, env.Keys
	}
	r, err := invariant.Check(ctx, invariant.Produced{Valid: events}, st)
	if err != nil {
		return Check{}, fmt.Errorf("bench: check: %w", err)
	}
	c := Check{Debits: int64(r.Checked["ledger debit rows"]), Rejected: int64(r.Checked["ledger rejected rows"]),
		LedgerOK: !r.Broken[invariant.Events], BalancesOK: !r.Broken[invariant.Balances],
		NonNegative: !r.Broken[invariant.Overdraft], Problems: r.Violations}
	c.LedgerRows = c.Debits + c.Rejected
	if redisBacked {
		ok := !r.Broken[invariant.Redis]
		c.RedisOK, c.RedisMissing = &ok, int64(r.Checked["redis keys not loaded"])
	}
	return c, nil
}
