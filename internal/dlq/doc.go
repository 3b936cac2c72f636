// Package dlq is the dead-letter record format and the operator's work on
// the dead-letter topic: a summary and a replay.
//
// A record keeps the original key and value bytes and says, in headers, where
// the message came from and why it failed, so a replay sends back exactly
// what was received. Dead-lettering is at least once: a record's key is its
// provenance (original topic, partition and offset), the topic may be
// compacted, and this package treats the records of one provenance as one
// message. Nothing here joins a consumer group or commits an offset.
package dlq
