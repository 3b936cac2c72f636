-- compat: breaking: a release-8 binary records a payment without applying the refunds waiting for it, and its reconciler does not count refund rows as credits
-- Refunds. A refund row (kind refund, event_id refund:<refund_id>) gives
-- back quota of a recorded payment; it adds to credited. quota_refunds holds
-- every refund once per refund_id, linked to the payment's event_id, with
-- what it did: pending (its payment is not recorded yet: it waits here and is
-- applied in the transaction that records the payment), applied (taken: what
-- it used up of the payment's debit; returned: what came back; expired,
-- billed, beyond: what did not), void (its payment was rejected or is a
-- duplicate: nothing to give back) or cancelled (by an operator, while
-- pending).
ALTER TABLE quota_ledger
    MODIFY COLUMN kind ENUM('credit','debit','rejected','expire','billed','refund') NOT NULL;

CREATE TABLE quota_refunds (
    refund_id    VARCHAR(64)  NOT NULL,
    event_id     VARCHAR(64)  NOT NULL,
    merchant_id  VARCHAR(64)  NOT NULL,
    amount       BIGINT       NOT NULL,
    reason       ENUM('refund','chargeback','correction') NOT NULL,
    occurred_at  DATETIME(6)  NOT NULL,
    state        ENUM('pending','applied','void','cancelled') NOT NULL,
    taken        BIGINT       NOT NULL DEFAULT 0,
    returned     BIGINT       NOT NULL DEFAULT 0,
    expired      BIGINT       NOT NULL DEFAULT 0,
    billed       BIGINT       NOT NULL DEFAULT 0,
    beyond       BIGINT       NOT NULL DEFAULT 0,
    note         VARCHAR(255) NOT NULL DEFAULT '',
    created_at   DATETIME(6)  NOT NULL DEFAULT CURRENT_TIMESTAMP(6),
    settled_at   DATETIME(6)  NULL,
    PRIMARY KEY (refund_id),
    KEY quota_refunds_event (event_id),
    KEY quota_refunds_state (state, created_at),
    KEY quota_refunds_merchant (merchant_id, state),
    CONSTRAINT quota_refunds_values CHECK (amount > 0 AND taken >= 0 AND returned >= 0 AND expired >= 0
        AND billed >= 0 AND beyond >= 0)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

-- refunds_waiting counts a merchant's pending refunds (never fewer): the
-- transaction that records payments looks for refunds only of merchants with
-- some, so a payment batch costs no statement more while none waits.
ALTER TABLE merchant_balance ADD COLUMN refunds_waiting BIGINT NOT NULL DEFAULT 0;

-- What an applied refund gave back to each grant (the invariant that every
-- unit of a grant is left, paid or expired counts these back).
CREATE TABLE quota_refund_parts (
    refund_id VARCHAR(64)  NOT NULL,
    grant_id  VARCHAR(128) NOT NULL,
    amount    BIGINT       NOT NULL,
    PRIMARY KEY (refund_id, grant_id),
    KEY quota_refund_parts_grant (grant_id),
    CONSTRAINT quota_refund_parts_amount CHECK (amount > 0)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;
