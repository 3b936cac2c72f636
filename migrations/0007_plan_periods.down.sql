DROP TABLE merchant_plans;
ALTER TABLE merchant_balance DROP KEY merchant_balance_next_expiry, DROP COLUMN next_expiry, DROP COLUMN head_end, DROP COLUMN head_grant;
DROP TABLE quota_attribution;
DROP TABLE quota_grants;
-- Expire rows become debits: the balance row keeps them in debited.
UPDATE quota_ledger SET kind = 'debit' WHERE kind = 'expire';
ALTER TABLE quota_ledger DROP COLUMN grant_id, MODIFY COLUMN kind ENUM('credit','debit','rejected') NOT NULL;
