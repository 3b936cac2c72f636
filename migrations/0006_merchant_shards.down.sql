DROP TABLE merchant_shards;
