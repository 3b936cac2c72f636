ALTER TABLE merchant_balance
    DROP CONSTRAINT merchant_balance_low,
    DROP COLUMN low_units,
    DROP COLUMN low_percent;
DROP TABLE quota_outbox;
