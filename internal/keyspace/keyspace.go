// Package keyspace names the Redis keys. A merchant's keys carry its id as a
// hash tag ({m}), so one Lua call may touch them all on a Redis Cluster; a
// sharded merchant's keys carry one tag per shard ({m#s}, see package shard),
// so its shards spread over the Cluster. The optional prefix (no braces) lets
// deployments and tests share one Redis.
package keyspace

import (
	"fmt"
	"strings"
)

// Keyspace builds key names under a prefix. The zero value uses no prefix.
type Keyspace struct {
	prefix string
}

// New returns a Keyspace whose keys all start with prefix.
func New(prefix string) (Keyspace, error) {
	if strings.ContainsAny(prefix, "{}") {
		return Keyspace{}, fmt.Errorf("keyspace: prefix %q must not contain braces", prefix)
	}
	return Keyspace{prefix: prefix}, nil
}

// Prefix is the prefix every key starts with.
func (k Keyspace) Prefix() string { return k.prefix }

// Quota is the hash with remain, ver and pending p:<event_id> fields of a
// merchant (tag = its id) or of one shard of it (tag = "m#s").
func (k Keyspace) Quota(tag string) string {
	return k.prefix + "quota:{" + tag + "}"
}

// Lock is the lock of a merchant or shard; it shares the hash slot of Quota.
func (k Keyspace) Lock(tag string) string {
	return k.prefix + "lock:quota:{" + tag + "}"
}

// ExportLock is the job lock of a statement export (job: its period and
// merchant set, see statement.JobID).
func (k Keyspace) ExportLock(job string) string {
	return k.prefix + "lock:export:" + job
}

// WorkerLease is the Snowflake worker-ID lease.
func (k Keyspace) WorkerLease(workerID int) string {
	return fmt.Sprintf("%sidgen:worker:%d", k.prefix, workerID)
}

// OutboxWake is the pub/sub channel on which a database's workers wake its
// active balance-event relay (see package outbox): one per database under
// the prefix, so deployments sharing a Redis do not wake each other.
func (k Keyspace) OutboxWake(database string) string {
	return k.prefix + "quota_outbox:wake:" + database
}

// QuotaPattern matches every merchant quota hash (for SCAN).
func (k Keyspace) QuotaPattern() string { return k.prefix + "quota:{*}" }

// MerchantFromQuota returns the merchant id of an unsharded merchant's Quota
// key, and false for any other key (a shard's included).
func (k Keyspace) MerchantFromQuota(key string) (string, bool) {
	rest, ok := strings.CutPrefix(key, k.prefix+"quota:{")
	if !ok || !strings.HasSuffix(rest, "}") || strings.Contains(rest, "#") {
		return "", false
	}
	return strings.TrimSuffix(rest, "}"), true
}
