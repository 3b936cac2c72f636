// Package dlq is the dead-letter record format and the operator's tools on
// the dead-letter topic: scan, summary and replay.
//
// A record keeps the original key and value bytes untouched and says, in
// headers, where the message came from and why it failed, so a replay can send
// exactly what was received back to where it was received.
//
// # Reading without disturbing anyone
//
// [Scan] reads the DLQ with one plain reader per partition at explicit
// offsets, never in a consumer group: it commits nothing, joins nothing and
// triggers no rebalance. It reads from the first offset (or a later start) to
// the high watermark captured before it began, then stops, so a DLQ that keeps
// growing during a scan still gives a finite, repeatable answer.
//
// # Transactions
//
// Workers write records with a [TxnWriter] per consumed partition, in Kafka
// transactions, so that a partition's new owner can fence its previous one
// (see package consumer). Every reader here is read_committed
// ([ReadCommitted], with franz-go: kafka-go's readers return records of
// aborted transactions and transaction markers as messages); an open
// transaction holds a read back until it ends.
//
// # Replay and its progress
//
// [Replayer.Run] sends the original key, value and headers of the selected
// records back to their original topic (and partition), adding
// replay.job_id and replay.count = the record's replay count + 1, so a replay
// that fails again returns to the DLQ with a raised count and is refused
// once the count reaches the limit. Writes are synchronous with acks=all.
//
// Progress is kept in an explicit file, not in a consumer group of the
// replay's own. The reasons:
//
//   - A replay is a selection (topic, error class, merchant, event ids, time
//     window, offsets, target topic), not a subscription. A group stores one
//     offset per partition for the whole topic; the file stores one per
//     partition per selection, so "replay the conflicts" and later "replay
//     merchant m-42" don't move each other's progress.
//   - The file records the job id with the offsets: a resumed run sends under
//     the same replay.job_id as the run it continues.
//   - Group offsets expire (offsets.retention.minutes), need group ACLs, and
//     joining a group means a coordinator and rebalances for a one-off job;
//     a dry run must not write anything, which a group commit would.
//   - The file is plain JSON an operator can read, archive with the incident,
//     or delete to start over ([ReplayOptions].Restart does it per selection).
//
// The cost: progress lives where the command runs. Run a replay as a Job with
// the file on a volume, or from one operator's shell; the file is locked while
// a replay runs so two runs on one machine cannot interleave.
//
// The file is rewritten atomically (temp file, fsync, rename) after every
// acknowledged batch, and records per partition the next DLQ offset not yet
// handled. A batch in flight when the run is interrupted is finished (bounded
// by the send timeout) and recorded before the run stops, so an interrupted run
// resumes with neither gaps nor duplicates. If the process dies between the
// broker's ack and the rename, that batch is sent again on resume: at least
// once, which the worker's idempotency (unique event_id in the ledger) absorbs.
package dlq
