-- compat: breaking: a release-6 binary debits without burning grants down, so quota_grants would no longer sum to the balance
-- Plan periods: a merchant's balance is made of grants that burn down in
-- (priority, expiry, age) order and may expire. An expire row moves the
-- remainder of an expired grant out of the balance; it adds to debited, so
-- available stays credited - debited everywhere.
ALTER TABLE quota_ledger
    MODIFY COLUMN kind ENUM('credit','debit','rejected','expire') NOT NULL,
    -- The grant that paid the whole debit (or that an expire row ends); NULL
    -- for a debit paid by several grants (quota_attribution) or owed.
    ADD COLUMN grant_id VARCHAR(128) NULL;

-- One row per grant. The remaining of the merchant's head grant (the first in
-- burn-down order) is head_end - debited on merchant_balance; this column
-- holds it only from when the head moves on (see ledger.RemainingSQL).
CREATE TABLE quota_grants (
    grant_id     VARCHAR(128) NOT NULL,
    merchant_id  VARCHAR(64)  NOT NULL,
    amount       BIGINT       NOT NULL,
    remaining    BIGINT       NOT NULL,
    priority     SMALLINT     NOT NULL,
    starts_at    DATETIME(6)  NOT NULL,
    expires_at   DATETIME(6)  NULL,
    rollover_max BIGINT       NOT NULL DEFAULT 0,
    state        ENUM('active','used','expired') NOT NULL DEFAULT 'active',
    created_at   DATETIME(6)  NOT NULL DEFAULT CURRENT_TIMESTAMP(6),
    ended_at     DATETIME(6)  NULL,
    PRIMARY KEY (grant_id),
    KEY quota_grants_burn (merchant_id, state, priority, expires_at, created_at),
    CONSTRAINT quota_grants_values CHECK (amount > 0 AND remaining >= 0 AND remaining <= amount
        AND priority BETWEEN 0 AND 100 AND rollover_max >= 0)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

-- Debits paid by more than one grant, or partly owed (the part no grant paid
-- is the row's amount less these parts).
CREATE TABLE quota_attribution (
    event_id VARCHAR(64)  NOT NULL,
    grant_id VARCHAR(128) NOT NULL,
    amount   BIGINT       NOT NULL,
    PRIMARY KEY (event_id, grant_id),
    KEY quota_attribution_grant (grant_id),
    CONSTRAINT quota_attribution_amount CHECK (amount > 0)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

-- The burn-down head: head_grant pays every debit until debited reaches
-- head_end (head_grant NULL: debits are owed until a grant arrives; head_end
-- NULL: unknown, the next debit settles it). next_expiry is the earliest
-- expiry of a grant with a remainder: the guard refuses debits from then on,
-- until the expiry is recorded.
ALTER TABLE merchant_balance
    ADD COLUMN head_grant  VARCHAR(128) NULL,
    ADD COLUMN head_end    BIGINT       NULL,
    ADD COLUMN next_expiry DATETIME(6)  NULL,
    ADD KEY merchant_balance_next_expiry (next_expiry);

-- Recurring plan grants: one grant per period, issued by the worker's scheduler.
CREATE TABLE merchant_plans (
    merchant_id  VARCHAR(64)  NOT NULL,
    amount       BIGINT       NOT NULL,
    every_months INT          NOT NULL DEFAULT 0,
    every_secs   BIGINT       NOT NULL DEFAULT 0,
    rollover_max BIGINT       NOT NULL DEFAULT 0,
    priority     SMALLINT     NOT NULL,
    anchor       DATETIME(6)  NOT NULL,
    next_start   DATETIME(6)  NOT NULL,
    updated_at   DATETIME(6)  NOT NULL DEFAULT CURRENT_TIMESTAMP(6) ON UPDATE CURRENT_TIMESTAMP(6),
    PRIMARY KEY (merchant_id),
    KEY merchant_plans_next (next_start),
    CONSTRAINT merchant_plans_values CHECK (amount > 0 AND rollover_max >= 0 AND priority BETWEEN 0 AND 100
        AND (every_months > 0) <> (every_secs > 0))
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

-- Every balance so far becomes one never-expiring opening grant, so that the
-- grants' remaining sums to the available balance from the start.
INSERT INTO quota_grants (grant_id, merchant_id, amount, remaining, priority, starts_at, created_at)
    SELECT CONCAT('opening:', merchant_id), merchant_id, credited - debited, credited - debited, 50, created_at, created_at
    FROM merchant_balance WHERE credited > debited;
UPDATE merchant_balance SET head_grant = CONCAT('opening:', merchant_id), head_end = credited
    WHERE credited > debited;
UPDATE merchant_balance SET head_end = 9223372036854775807 WHERE credited <= debited;
