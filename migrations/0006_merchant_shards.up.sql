-- compat: breaking: a release-5 binary ignores merchant_shards and deducts from quota:{M} beside the shards of a sharded merchant
-- Quota shards of hot merchants. A merchant without a row has one shard (quota:{m}).
-- folding_from is the shard count of the layout a resharding has not folded into this one yet.
CREATE TABLE merchant_shards (
    merchant_id  VARCHAR(64)  NOT NULL,
    shards       INT          NOT NULL,
    folding_from INT          NULL,
    updated_at   DATETIME(6)  NOT NULL DEFAULT CURRENT_TIMESTAMP(6) ON UPDATE CURRENT_TIMESTAMP(6),
    PRIMARY KEY (merchant_id),
    CONSTRAINT merchant_shards_range CHECK (shards BETWEEN 1 AND 64 AND (folding_from IS NULL OR folding_from BETWEEN 1 AND 64))
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;
