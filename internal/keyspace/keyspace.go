// Package keyspace names the Redis keys. A merchant's keys carry its id as a
// hash tag ({m}), so one Lua call may touch them all on a Redis Cluster; the
// optional prefix (no braces) lets deployments and tests share one Redis.
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

// Quota is the hash with the merchant's remain, ver and pending p:<event_id> fields.
func (k Keyspace) Quota(merchantID string) string {
	return k.prefix + "quota:{" + merchantID + "}"
}

// Lock is the per-merchant lock; it shares the hash slot of Quota.
func (k Keyspace) Lock(merchantID string) string {
	return k.prefix + "lock:quota:{" + merchantID + "}"
}

// WorkerLease is the Snowflake worker-ID lease.
func (k Keyspace) WorkerLease(workerID int) string {
	return fmt.Sprintf("%sidgen:worker:%d", k.prefix, workerID)
}

// QuotaPattern matches every merchant quota hash (for SCAN).
func (k Keyspace) QuotaPattern() string { return k.prefix + "quota:{*}" }

// MerchantFromQuota returns the merchant id of a Quota key, and false for any other key.
func (k Keyspace) MerchantFromQuota(key string) (string, bool) {
	rest, ok := strings.CutPrefix(key, k.prefix+"quota:{")
	if !ok || !strings.HasSuffix(rest, "}") {
		return "", false
	}
	return strings.TrimSuffix(rest, "}"), true
}
