-- Refund rows become credits: the balance row keeps them in credited.
UPDATE quota_ledger SET kind = 'credit' WHERE kind = 'refund';
ALTER TABLE quota_ledger MODIFY COLUMN kind ENUM('credit','debit','rejected','expire','billed') NOT NULL;
DROP TABLE quota_refund_parts;
DROP TABLE quota_refunds;
ALTER TABLE merchant_balance DROP COLUMN refunds_waiting;
