-- compat: breaking: a release-3 binary writes no outbox rows, so its balance changes would never be announced
-- Balance events: what the ledger transaction decided to announce, written in that
-- transaction and published by the relay afterwards (transactional outbox). id is derived
-- from what caused the event (<event_id or grant id>/<type>[/<threshold>]): the unique key
-- stops a second row for one crossing. seq orders publication (a merchant's rows are
-- inserted under its balance row lock, so seq follows its ledger order).
CREATE TABLE quota_outbox (
    seq            BIGINT       NOT NULL AUTO_INCREMENT,
    id             VARCHAR(128) NOT NULL,
    merchant_id    VARCHAR(64)  NOT NULL,
    type           VARCHAR(32)  NOT NULL,
    balance_before BIGINT       NULL,
    balance_after  BIGINT       NULL,
    threshold      BIGINT       NULL,
    caused_by      VARCHAR(64)  NOT NULL,
    occurred_at    DATETIME(6)  NOT NULL,
    sent_at        DATETIME(6)  NULL,
    PRIMARY KEY (seq),
    UNIQUE KEY quota_outbox_id (id),
    KEY quota_outbox_sent (sent_at, seq)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

-- Low-balance thresholds per merchant: an absolute number of units and a percentage of the
-- merchant's granted total (credited). NULL in both: the worker's default (QUOTA_LOW_DEFAULT);
-- 0: none.
ALTER TABLE merchant_balance
    ADD COLUMN low_units   BIGINT   NULL,
    ADD COLUMN low_percent SMALLINT NULL,
    ADD CONSTRAINT merchant_balance_low CHECK (low_units >= 0 AND low_percent BETWEEN 0 AND 99);
