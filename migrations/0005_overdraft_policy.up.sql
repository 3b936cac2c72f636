-- compat: breaking: a release-4 binary relies on the CHECK this drops to keep balances at 0 or above, and ignores overdraft policies
-- Overdraft policy per merchant: reject (never below 0), floor (down to -overdraft_floor),
-- overage (never rejects; what a debit takes below zero is recorded on its row as overage,
-- for postpaid billing). The guard of the ledger transaction enforces it, so the balance
-- may now be negative and the old CHECK goes.
ALTER TABLE merchant_balance
    DROP CONSTRAINT merchant_balance_not_negative,
    ADD COLUMN overdraft_policy ENUM('reject','floor','overage') NOT NULL DEFAULT 'reject',
    ADD COLUMN overdraft_floor  BIGINT NOT NULL DEFAULT 0,
    ADD CONSTRAINT merchant_balance_totals CHECK (credited >= 0 AND debited >= 0),
    ADD CONSTRAINT merchant_balance_floor CHECK (overdraft_floor >= 0 AND (overdraft_policy = 'floor' OR overdraft_floor = 0));

-- The part of a debit below zero under the overage policy (0 otherwise).
ALTER TABLE quota_ledger
    ADD COLUMN overage BIGINT NOT NULL DEFAULT 0;
