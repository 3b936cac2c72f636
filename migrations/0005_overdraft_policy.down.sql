ALTER TABLE quota_ledger DROP COLUMN overage;
ALTER TABLE merchant_balance
    DROP CONSTRAINT merchant_balance_floor,
    DROP CONSTRAINT merchant_balance_totals,
    DROP COLUMN overdraft_policy,
    DROP COLUMN overdraft_floor,
    ADD CONSTRAINT merchant_balance_not_negative CHECK (credited >= 0 AND debited >= 0 AND credited >= debited);
