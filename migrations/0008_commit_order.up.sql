-- compat: breaking: a release-7 binary writes ledger rows without seq (the UNIQUE key admits NULLs) that the read API's cursor and the reconciler skip, and reads reconcile_checkpoints.last_ledger_id, renamed last_seq
-- Ledger order is commit order, per merchant. seq numbers a merchant's rows
-- 1, 2, 3 ... in the order its balance moved: every transaction that writes
-- rows of a merchant takes their numbers from merchant_balance.seq while it
-- holds that row's lock, so a row with a higher seq commits after every
-- lower one and no number is skipped. Rows of a merchant without a balance
-- row (unknown_merchant rejections) have none. The read API's cursor, the
-- reconciler's checkpoints and balance_after follow seq, not the Snowflake id
-- (taken before the lock, on clocks that differ by a few ms).
--
-- low_base is what a percentage threshold is a percentage of: the available
-- balance right after the merchant's last credit or expiry (what it holds for
-- the period), no longer the all-time granted total.
--
-- A billed row takes billed overage off the balance: under the overage policy
-- a grant to a merchant below zero first brings it back to zero (adding to
-- credited, so the ledger still sums to the balance), then credits the grant:
-- overage units are invoiced, so no grant repays them.
ALTER TABLE merchant_balance
    ADD COLUMN seq      BIGINT NOT NULL DEFAULT 0,
    ADD COLUMN low_base BIGINT NOT NULL DEFAULT 0;

ALTER TABLE quota_ledger
    MODIFY COLUMN kind ENUM('credit','debit','rejected','expire','billed') NOT NULL,
    ADD COLUMN seq BIGINT NULL;

UPDATE quota_ledger l
    JOIN (SELECT r.id, ROW_NUMBER() OVER (PARTITION BY r.merchant_id ORDER BY r.id) AS n
          FROM quota_ledger r JOIN merchant_balance b ON b.merchant_id = r.merchant_id
          WHERE NOT (r.kind = 'rejected' AND r.reason = 'unknown_merchant')) o ON o.id = l.id
    SET l.seq = o.n;

UPDATE merchant_balance b
    SET b.seq = (SELECT COALESCE(MAX(l.seq), 0) FROM quota_ledger l WHERE l.merchant_id = b.merchant_id),
        b.low_base = b.credited;

-- The reconciler's checkpoints follow seq; those by id are dropped (the next
-- pass reads each merchant's ledger once in full).
DELETE FROM reconcile_checkpoints;
ALTER TABLE reconcile_checkpoints CHANGE COLUMN last_ledger_id last_seq BIGINT NOT NULL;

ALTER TABLE quota_ledger
    DROP KEY quota_ledger_merchant_id,
    ADD UNIQUE KEY quota_ledger_merchant_seq (merchant_id, seq);
