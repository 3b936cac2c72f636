-- Billed rows become credits: the balance row keeps them in credited.
UPDATE quota_ledger SET kind = 'credit' WHERE kind = 'billed';
ALTER TABLE quota_ledger
    DROP KEY quota_ledger_merchant_seq,
    ADD KEY quota_ledger_merchant_id (merchant_id, id),
    DROP COLUMN seq,
    MODIFY COLUMN kind ENUM('credit','debit','rejected','expire') NOT NULL;
ALTER TABLE merchant_balance DROP COLUMN low_base, DROP COLUMN seq;
DELETE FROM reconcile_checkpoints;
ALTER TABLE reconcile_checkpoints CHANGE COLUMN last_seq last_ledger_id BIGINT NOT NULL;
