// Package shard splits a hot merchant's quota into shards: which shard an
// event belongs to, the Redis hash tag of each shard, how available quota is
// split among them, and the shard counts kept in MySQL (merchant_shards).
//
// A merchant has one shard unless merchant_shards says otherwise; its keys are
// then today's quota:{m} and lock:quota:{m}. With n > 1 shards, shard s is
// quota:{m#s} and lock:quota:{m#s}: a hash tag per shard, so the shards of one
// merchant spread over the nodes of a Redis Cluster ('#' never occurs in a
// merchant id, so a tag names one merchant and shard unambiguously).
package shard

import (
	"strconv"
	"strings"
)

// Max is the largest shard count of a merchant.
const Max = 64

// Of is the shard of an event among n: FNV-1a of its event_id modulo n. It
// must never change: a pending deduction lives in its event's shard, and a
// redelivered event finds it there.
func Of(eventID string, n int) int {
	if n <= 1 {
		return 0
	}
	h := uint32(2166136261)
	for i := 0; i < len(eventID); i++ {
		h ^= uint32(eventID[i])
		h *= 16777619
	}
	return int(h % uint32(n))
}

// Tag is the hash tag of shard s of n of a merchant: the merchant id when n is
// 1, else "m#s".
func Tag(merchantID string, s, n int) string {
	if n <= 1 {
		return merchantID
	}
	return merchantID + "#" + strconv.Itoa(s)
}

// Tags lists the tags of a layout of n shards, in shard order.
func Tags(merchantID string, n int) []string {
	tags := make([]string, max(n, 1))
	for s := range tags {
		tags[s] = Tag(merchantID, s, n)
	}
	return tags
}

// Merchant is the merchant id of a tag.
func Merchant(tag string) string {
	m, _, _ := strings.Cut(tag, "#")
	return m
}

// Split divides total among n shards as evenly as it goes, the remainder to
// the first shards, so that the parts always sum to total.
func Split(total int64, n int) []int64 {
	n = max(n, 1)
	parts := make([]int64, n)
	if total <= 0 {
		return parts
	}
	each, rest := total/int64(n), total%int64(n)
	for s := range parts {
		parts[s] = each
		if int64(s) < rest {
			parts[s]++
		}
	}
	return parts
}
