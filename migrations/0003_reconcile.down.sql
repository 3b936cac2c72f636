DROP TABLE IF EXISTS reconcile_checkpoints;
DROP TABLE IF EXISTS reconcile_findings;
DROP TABLE IF EXISTS reconcile_runs;
