DROP TABLE IF EXISTS quota_ledger;
