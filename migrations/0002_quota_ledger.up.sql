-- compat: breaking: a release-1 binary writes balances without ledger rows, so the ledger would not sum to them
-- Append-only ledger: one row per event (credit, debit or rejected). The UNIQUE event_id is
-- the floor of idempotency: whatever Redis says, an event is recorded at most once.
CREATE TABLE quota_ledger (
    id            BIGINT       NOT NULL,
    event_id      VARCHAR(64)  NOT NULL,
    merchant_id   VARCHAR(64)  NOT NULL,
    kind          ENUM('credit','debit','rejected') NOT NULL,
    amount        BIGINT       NOT NULL,
    balance_after BIGINT       NULL,
    reason        VARCHAR(64)  NOT NULL DEFAULT '',
    payment_id    VARCHAR(128) NOT NULL DEFAULT '',
    source        VARCHAR(16)  NOT NULL DEFAULT '',
    occurred_at   DATETIME(6)  NOT NULL,
    created_at    DATETIME(6)  NOT NULL DEFAULT CURRENT_TIMESTAMP(6),
    PRIMARY KEY (id),
    UNIQUE KEY quota_ledger_event_id (event_id),
    KEY quota_ledger_merchant_id (merchant_id, id),
    CONSTRAINT quota_ledger_amount_positive CHECK (amount > 0)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;
