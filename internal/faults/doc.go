// Package faults is the fault-injection suite of the billing worker: each test
// runs workers (real billing-worker processes built from cmd/billing-worker,
// or app.NewWorker in the test process) on services of the test's own, breaks
// something at seeded random moments, and then proves with the invariant
// checker that no event was lost, none applied twice, no merchant overdrawn,
// every poison message dead-lettered (once by provenance; copies allowed) and
// no valid one, and Redis equal to MySQL: first before any repair (only
// merchants a scenario corrupted by hand exempt), then after one reconciler
// pass.
//
// The faults: worker processes killed with SIGKILL and restarted, or stopped
// with SIGSTOP past the lock TTL; Redis restarted with its data lost, or down
// longer than the lock TTL; MariaDB killed and restarted; broker error storms
// and forced rebalances through kfake's control hooks; duplicated, reordered
// and rewound delivery; and the whole write path on a Redis Cluster. A churn
// test kills one of three workers every few seconds and bounds the duplicates
// each kill causes; a soak test watches the workers' memory and goroutines.
//
// Every scenario prints its seed and replays with -faults.seed. Sizes are
// small by default (the package runs in CI in a few minutes); -faults.long
// runs the full lengths and -soak=10m a long soak.
//
// Destructive tests start their own redis-server and mariadbd: the shared
// services are never stopped. The package holds no production code.
package faults
