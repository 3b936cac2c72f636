-- compat: breaking: the first schema; nothing ran before it
-- The merchants known to billing and the truth about their balance: running totals that
-- always equal the sums of the merchant's credit and debit ledger rows (one transaction
-- writes both). A merchant without a row here is unknown.
CREATE TABLE merchant_balance (
    merchant_id VARCHAR(64)  NOT NULL,
    credited    BIGINT       NOT NULL DEFAULT 0,
    debited     BIGINT       NOT NULL DEFAULT 0,
    created_at  DATETIME(6)  NOT NULL DEFAULT CURRENT_TIMESTAMP(6),
    updated_at  DATETIME(6)  NOT NULL DEFAULT CURRENT_TIMESTAMP(6) ON UPDATE CURRENT_TIMESTAMP(6),
    PRIMARY KEY (merchant_id),
    CONSTRAINT merchant_balance_not_negative CHECK (credited >= 0 AND debited >= 0 AND credited >= debited)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;
