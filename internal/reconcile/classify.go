package reconcile

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/quotaflow/billing/internal/quota"
)

// merchantInput is one merchant's consistent view: its quota hashes read under
// its locks, and its balance row and pending-event ledger rows from one snapshot.
type merchantInput struct {
	ID string
	balance
	Shards    []shardHash     // in shard order, at least one (one when unsharded)
	Confirmed map[string]bool // pending event ids that have a debit row of this merchant
	Held      bool            // a critical finding from the ledger audit
}

// shardHash is one shard's quota hash as read.
type shardHash struct {
	Key  string
	Hash map[string]string // HGETALL; empty when the key is missing
}

// parseShards parses every shard, then the merchant's quota as their sum
// (quota.Merge): one shard that cannot be parsed makes the whole unreadable,
// and the error names its key. A missing shard makes the whole missing.
func parseShards(shards []shardHash) (quota.Hash, error) {
	hs := make([]map[string]string, len(shards))
	var bad error
	for i, s := range shards {
		hs[i] = s.Hash
		if _, err := quota.Parse(s.Hash); err != nil && bad == nil {
			bad = fmt.Errorf("%s: %w", s.Key, err)
		}
	}
	q, err := quota.Parse(quota.Merge(hs))
	return q, cmp.Or(bad, err)
}

type planKind int

const (
	planNone    planKind = iota
	planRepair           // repair.lua
	planHydrate          // quota.Hydrate
)

// plan is the one Redis write a merchant needs.
type plan struct {
	Kind      planKind
	ExpectVer string
	Remain    int64
	Floor     string // planHydrate: the overdraft floor (quota.Hydrate)
	Delete    []string
}

// verdict is what classify decided. Findings whose Action is still empty wait
// for the plan's outcome (resolve).
type verdict struct {
	Findings []Finding
	Plan     plan
}

// resolve sets the action of every finding waiting for the plan.
func (v *verdict) resolve(a Action) {
	for i := range v.Findings {
		if v.Findings[i].Action == "" {
			v.Findings[i].Action = a
		}
	}
}

// classify compares one merchant's Redis state with MySQL and plans the repair.
func classify(in merchantInput, now time.Time, p Config) verdict {
	var v verdict
	truth := in.Credited - in.Debited
	held := in.Held
	q, perr := parseShards(in.Shards)
	var remain *int64
	if q.Exists {
		remain = &q.Remain
	}
	// The ledger audit reports a negative balance of every merchant (and sets
	// Held); this one covers a balance that went negative between the two reads.
	below := in.belowPolicy()
	if below && !held {
		v.Findings = append(v.Findings, Finding{MerchantID: in.ID, Kind: KindNegativeBalance, RedisValue: remain,
			Expected: truth, Delta: truth, Action: ActionReported, Detail: in.describe()})
	}
	held = held || below
	if perr != nil {
		v.Findings = append(v.Findings, Finding{MerchantID: in.ID, Kind: KindMalformed, RedisValue: remain,
			Expected: truth, Action: ActionReported, Detail: perr.Error()})
		return v
	}
	if !q.Exists {
		f := Finding{MerchantID: in.ID, Kind: KindMissingKey, Expected: truth, Detail: "no quota hash"}
		if q.Leftover > 0 {
			f.Detail = fmt.Sprintf("quota hash without remain, %d leftover fields", q.Leftover)
		}
		switch {
		case held || p.SkipHydrate:
			f.Action = ActionReported
		case p.DryRun:
			f.Action = ActionDryRun
		default:
			v.Plan = plan{Kind: planHydrate, Remain: truth, Floor: in.Policy.RedisFloor()}
		}
		v.Findings = append(v.Findings, f)
		return v
	}
	return classifyHash(v, in, q, truth, held, now, p)
}

func classifyHash(v verdict, in merchantInput, q quota.Hash, truth int64, held bool, now time.Time, p Config) verdict {
	var young, orphan, stale int64
	var orphans, stales []quota.Pending
	for _, e := range q.Pending {
		switch {
		case in.Confirmed[e.EventID]:
			stale += e.Amount
			stales = append(stales, e)
		case now.Sub(e.At) > p.Grace:
			orphan += e.Amount
			orphans = append(orphans, e)
		default:
			young += e.Amount
		}
	}
	expected := truth - young - orphan
	drift := q.Remain - expected
	remain := &q.Remain
	var found []Finding
	if drift != 0 {
		kind := KindRedisHigh
		if drift < 0 {
			kind = KindRedisLow
		}
		found = append(found, Finding{MerchantID: in.ID, Kind: kind, RedisValue: remain, Expected: expected,
			Delta: drift, Pending: young + orphan,
			Detail: fmt.Sprintf("credited=%d debited=%d pending_in_flight=%d orphaned=%d", in.Credited, in.Debited, young, orphan)})
	}
	if len(orphans) > 0 {
		found = append(found, Finding{MerchantID: in.ID, Kind: KindOrphanPending, RedisValue: remain,
			Expected: q.Remain + orphan, Delta: -orphan, Pending: orphan, Detail: describe(orphans, now)})
	}
	if len(stales) > 0 {
		found = append(found, Finding{MerchantID: in.ID, Kind: KindStalePending, RedisValue: remain,
			Expected: q.Remain, Pending: stale, Detail: describe(stales, now)})
	}
	if len(found) == 0 {
		return v
	}
	target := truth - young
	action := Action("")
	switch {
	case held:
		action = ActionReported
	case p.RepairCeiling > 0 && abs(target-q.Remain) > p.RepairCeiling:
		action = ActionOverCeiling
	case p.DryRun:
		action = ActionDryRun
	default:
		v.Plan = plan{Kind: planRepair, ExpectVer: q.Ver, Remain: target}
		for _, e := range slices.Concat(orphans, stales) {
			v.Plan.Delete = append(v.Plan.Delete, quota.PendingField(e.EventID))
		}
	}
	for i := range found {
		found[i].Action = action
	}
	v.Findings = append(v.Findings, found...)
	return v
}

// describe lists entries as "evt=amount@age" within the audit column's width.
func describe(entries []quota.Pending, now time.Time) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d entries:", len(entries))
	for i, e := range entries {
		item := fmt.Sprintf(" %s=%d@%s", e.EventID, e.Amount, now.Sub(e.At).Truncate(time.Second))
		if b.Len()+len(item) > maxDetail-16 {
			fmt.Fprintf(&b, " (+%d more)", len(entries)-i)
			break
		}
		b.WriteString(item)
	}
	return b.String()
}

// maxDetail is the width of reconcile_findings.detail.
const maxDetail = 512

func abs(x int64) int64 {
	if x < 0 {
		return -x
	}
	return x
}
