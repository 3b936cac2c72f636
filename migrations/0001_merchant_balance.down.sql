DROP TABLE IF EXISTS merchant_balance;
