-- compat: additive
-- The reconciler's audit trail: append-only, one row per run and one per finding.
CREATE TABLE reconcile_runs (
    id                BIGINT       NOT NULL AUTO_INCREMENT,
    started_at        DATETIME(6)  NOT NULL,
    finished_at       DATETIME(6)  NOT NULL,
    dry_run           BOOLEAN      NOT NULL,
    status            VARCHAR(16)  NOT NULL,
    merchants_checked BIGINT       NOT NULL DEFAULT 0,
    clean             BIGINT       NOT NULL DEFAULT 0,
    busy_skipped      BIGINT       NOT NULL DEFAULT 0,
    drifted           BIGINT       NOT NULL DEFAULT 0,
    repaired          BIGINT       NOT NULL DEFAULT 0,
    abs_drift         BIGINT       NOT NULL DEFAULT 0,
    error             TEXT         NULL,
    PRIMARY KEY (id),
    KEY reconcile_runs_started_at (started_at)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

CREATE TABLE reconcile_findings (
    id           BIGINT       NOT NULL AUTO_INCREMENT,
    run_id       BIGINT       NOT NULL,
    merchant_id  VARCHAR(64)  NOT NULL,
    kind         VARCHAR(32)  NOT NULL,
    redis_value  BIGINT       NULL,
    expected     BIGINT       NOT NULL,
    delta        BIGINT       NOT NULL,
    pending      BIGINT       NOT NULL DEFAULT 0,
    action       VARCHAR(16)  NOT NULL,
    detail       VARCHAR(512) NOT NULL DEFAULT '',
    created_at   DATETIME(6)  NOT NULL DEFAULT CURRENT_TIMESTAMP(6),
    PRIMARY KEY (id),
    KEY reconcile_findings_run (run_id),
    KEY reconcile_findings_merchant (merchant_id, id),
    CONSTRAINT reconcile_findings_run_fk FOREIGN KEY (run_id) REFERENCES reconcile_runs (id)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

-- Settled ledger sums per merchant up to a ledger id, so the ledger audit reads only new rows.
CREATE TABLE reconcile_checkpoints (
    merchant_id    VARCHAR(64)  NOT NULL,
    last_ledger_id BIGINT       NOT NULL,
    credited       BIGINT       NOT NULL,
    debited        BIGINT       NOT NULL,
    updated_at     DATETIME(6)  NOT NULL DEFAULT CURRENT_TIMESTAMP(6) ON UPDATE CURRENT_TIMESTAMP(6),
    PRIMARY KEY (merchant_id)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;
