// Package invariant checks from the outside, given what was produced and the
// final MySQL, Redis and DLQ state, what the system promises (the constants
// below), and says what broke.
package invariant

import (
	"bytes"
	"context"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"
	"gorm.io/gorm"

	"github.com/quotaflow/billing/internal/dlq"
	"github.com/quotaflow/billing/internal/event"
	"github.com/quotaflow/billing/internal/keyspace"
	"github.com/quotaflow/billing/internal/ledger"
	"github.com/quotaflow/billing/internal/ledger/ledgerdb"
	"github.com/quotaflow/billing/internal/quota"
	"github.com/quotaflow/billing/internal/quotaevent"
	"github.com/quotaflow/billing/internal/shard"
)

// Produced is what went into the topic, as the producer knows it.
type Produced struct {
	// Valid holds every message that decodes, duplicates included, in produce order.
	Valid []event.PaymentSucceeded
	// Invalid counts messages that must each end in the DLQ, once by
	// provenance: malformed ones and conflicting duplicates (same event_id,
	// other merchant or amount).
	Invalid int
	// Exhausting: the run makes valid messages fail alone on purpose (a
	// corrupted cache), so a valid event may be dead-lettered as exhausted
	// (and count in Invalid). Otherwise a valid event in the DLQ is a failure:
	// an outage taken for the message's fault.
	Exhausting bool
}

// firsts maps each valid event_id to its first event, the one the ledger must hold.
func (p Produced) firsts() map[string]event.PaymentSucceeded {
	first := map[string]event.PaymentSucceeded{}
	for _, e := range p.Valid {
		if _, seen := first[e.EventID]; !seen {
			first[e.EventID] = e
		}
	}
	return first
}

// State is where the checker reads the outcome.
type State struct {
	DB    *gorm.DB
	Redis redis.UniversalClient
	Keys  keyspace.Keyspace
	// DLQ holds the records read back from the dead-letter topic.
	DLQ []dlq.Record
	// RedisSettled says nothing is in flight: Redis must equal MySQL exactly
	// (or lack the hash), with nothing pending.
	RedisSettled bool
	// Drifted names merchants whose Redis hash was written, deleted or lost
	// on purpose (a test's injected drift): they are not compared. Checking
	// before any reconciler pass with only these exempt is what catches
	// drift a worker caused, which a pass would silently repair.
	Drifted []string
}

// The invariants, as Report.Broken names them.
const (
	Events    = "events"    // each valid event has one matching ledger row; no row lacks its event
	Balances  = "balances"  // each balance row equals its ledger replayed in seq order (ledger.Replay); none is missing
	Overdraft = "overdraft" // no balance, debit or Redis remain below zero
	Redis     = "redis"     // once settled, Redis equals MySQL with nothing pending
	DLQ       = "dlq"       // every invalid message dead-lettered, nothing else
	Grants    = "grants"    // active grants back the balance; every unit of a grant is left, paid or expired
	Refunds   = "refunds"   // each refund is applied once, within its payment's debit, or waits for a payment not recorded
)

// Report lists every broken invariant; it is empty when all hold.
type Report struct {
	Checked    map[string]int  // what was counted, for the summary
	Broken     map[string]bool // the invariants with a violation
	Violations []string
}

// OK reports whether every invariant holds.
func (r *Report) OK() bool { return len(r.Violations) == 0 }

func (r *Report) fail(invariant, format string, args ...any) {
	r.Broken[invariant] = true
	if len(r.Violations) < 50 { // enough to diagnose, not enough to drown the log
		r.Violations = append(r.Violations, fmt.Sprintf(format, args...))
	} else if len(r.Violations) == 50 {
		r.Violations = append(r.Violations, "... more violations omitted")
	}
}

// String renders the report for a person.
func (r *Report) String() string {
	var b strings.Builder
	for _, k := range slices.Sorted(maps.Keys(r.Checked)) {
		fmt.Fprintf(&b, "  %-28s %d\n", k, r.Checked[k])
	}
	if r.OK() {
		b.WriteString("  all invariants hold\n")
		return b.String()
	}
	fmt.Fprintf(&b, "  %d invariant violation(s):\n", len(r.Violations))
	for _, v := range r.Violations {
		b.WriteString("    - " + v + "\n")
	}
	return b.String()
}

// Check verifies every invariant.
func Check(ctx context.Context, p Produced, s State) (*Report, error) {
	r := &Report{Checked: map[string]int{}, Broken: map[string]bool{}}
	rows, err := load(ctx, s.DB, "SELECT event_id, merchant_id, kind, amount, balance_after, overage, reason, seq FROM quota_ledger",
		func(r ledger.Row) string { return r.EventID }) // event_id is UNIQUE
	if err != nil {
		return nil, err
	}
	balances, err := load(ctx, s.DB, "SELECT merchant_id, credited, debited, overdraft_policy, overdraft_floor, seq FROM merchant_balance",
		func(b ledger.Balance) string { return b.MerchantID })
	if err != nil {
		return nil, err
	}
	checkEvents(r, p, rows)
	checkBalances(r, rows, balances)
	if err := checkRefunds(ctx, r, s.DB, rows); err != nil {
		return nil, err
	}
	if err := checkGrants(ctx, r, s.DB); err != nil {
		return nil, err
	}
	if err := checkRedis(ctx, r, s, balances); err != nil {
		return nil, err
	}
	checkDLQ(r, p, s)
	return r, nil
}

// grantAccount is one grant and what its units became.
type grantAccount struct {
	GrantID, MerchantID, State   string
	Amount, Remaining            int64
	Paid, Expired, Expires, Debt int64
}

// checkGrants: each merchant's active grants' remaining (ledgerdb.ReadGrants)
// sums to max(available, 0); each grant's units are remaining, paid (debits
// naming it, whole or in quota_attribution) or expired (its one expire row),
// with nothing left over unless a debt took it (never under reject); an
// expired grant has nothing remaining.
func checkGrants(ctx context.Context, r *Report, db *gorm.DB) error {
	var bals []ledger.Balance
	if err := db.WithContext(ctx).Raw("SELECT merchant_id, credited, debited, overdraft_policy FROM merchant_balance WHERE merchant_id IN (SELECT merchant_id FROM quota_grants)").Scan(&bals).Error; err != nil {
		return fmt.Errorf("invariant: read balances: %w", err)
	}
	debt := make(map[string]int64, len(bals))
	for _, b := range bals {
		if b.PolicyKind != ledger.PolicyReject {
			debt[b.MerchantID] = 1
		}
	}
	pool, err := db.DB()
	if err != nil {
		return fmt.Errorf("invariant: %w", err)
	}
	grants, err := ledgerdb.ReadGrants(ctx, pool, nil)
	if err != nil {
		return fmt.Errorf("invariant: read grants: %w", err)
	}
	accounts := make([]grantAccount, len(grants))
	for i, g := range grants {
		accounts[i] = grantAccount{GrantID: g.ID, MerchantID: g.MerchantID, State: string(g.State), Amount: g.Amount,
			Remaining: g.Remaining, Debt: debt[g.MerchantID]}
	}
	// What each grant's units became, from one pass over the rows that name a
	// grant (quota_ledger.grant_id has no index: a query per grant would scan
	// the ledger once per grant).
	var uses []struct {
		GrantID, Kind string
		Amount, Rows  int64
	}
	err = db.WithContext(ctx).Raw(`SELECT grant_id, kind, SUM(amount) AS amount, COUNT(*) AS ` + "`rows`" + ` FROM quota_ledger
		WHERE grant_id IS NOT NULL AND kind IN ('debit', 'expire') GROUP BY grant_id, kind
		UNION ALL SELECT grant_id, 'debit', SUM(amount), COUNT(*) FROM quota_attribution GROUP BY grant_id
		UNION ALL SELECT grant_id, 'refund', SUM(amount), COUNT(*) FROM quota_refund_parts GROUP BY grant_id`).Scan(&uses).Error
	if err != nil {
		return fmt.Errorf("invariant: read grant uses: %w", err)
	}
	byGrant := map[string]*grantAccount{}
	for i := range accounts {
		byGrant[accounts[i].GrantID] = &accounts[i]
	}
	for _, u := range uses {
		a, ok := byGrant[u.GrantID]
		if !ok {
			r.fail(Grants, "%d %s row(s) name grant %s, which does not exist", u.Rows, u.Kind, u.GrantID)
			continue
		}
		switch u.Kind {
		case string(ledger.KindExpire):
			a.Expired += u.Amount
			a.Expires += u.Rows
		case string(ledger.KindRefund): // given back: paid no more
			a.Paid -= u.Amount
		default:
			a.Paid += u.Amount
		}
	}
	left := map[string]int64{}
	for _, a := range accounts {
		if a.State == string(ledger.GrantActive) {
			left[a.MerchantID] += a.Remaining
		} else if a.Remaining != 0 && a.State == string(ledger.GrantExpired) {
			r.fail(Grants, "grant %s expired with %d remaining", a.GrantID, a.Remaining)
		}
		used := a.Remaining + a.Paid + a.Expired
		if a.Expires > 1 || used > a.Amount || (a.Debt == 0 && used != a.Amount) {
			r.fail(Grants, "grant %s of %d: %d remaining + %d paid + %d expired (%d expire rows)", a.GrantID, a.Amount, a.Remaining, a.Paid, a.Expired, a.Expires)
		}
	}
	r.Checked["grants"] = len(accounts)
	for _, b := range bals {
		if want := max(0, b.Available()); left[b.MerchantID] != want {
			r.fail(Grants, "merchant %s: active grants' remaining %d != max(available, 0) = %d", b.MerchantID, left[b.MerchantID], want)
		}
	}
	return nil
}

// load reads the rows of query by key.
func load[T any](ctx context.Context, db *gorm.DB, query string, key func(T) string) (map[string]T, error) {
	var rows []T
	if err := db.WithContext(ctx).Raw(query).Scan(&rows).Error; err != nil {
		return nil, fmt.Errorf("invariant: %s: %w", query, err)
	}
	out := make(map[string]T, len(rows))
	for _, r := range rows {
		out[key(r)] = r
	}
	return out, nil
}

// checkEvents: each valid unique event has exactly one ledger row that matches
// it, and no debit or rejection exists without its event.
func checkEvents(r *Report, p Produced, rows map[string]ledger.Row) {
	first := p.firsts()
	r.Checked["valid unique events"] = len(first)
	for id, e := range first {
		row, ok := rows[id]
		switch {
		case !ok:
			r.fail(Events, "event %s (merchant %s, amount %d) has no ledger row: lost", id, e.MerchantID, e.Amount)
		case row.Kind != ledger.KindDebit && row.Kind != ledger.KindRejected:
			r.fail(Events, "event %s recorded as %s", id, row.Kind)
		case row.MerchantID != e.MerchantID || row.Amount != e.Amount:
			r.fail(Events, "event %s recorded for %s/%d, produced for %s/%d", id, row.MerchantID, row.Amount, e.MerchantID, e.Amount)
		}
	}
	for id, row := range rows {
		if row.Kind != ledger.KindDebit && row.Kind != ledger.KindRejected {
			continue // grants, their expiries and settlements have no payment event
		}
		r.Checked["ledger "+string(row.Kind)+" rows"]++
		if _, ok := first[id]; !ok {
			r.fail(Events, "ledger %s row %s (merchant %s) has no produced event", row.Kind, id, row.MerchantID)
		}
	}
}

// checkBalances: merchant_balance equals the ledger replayed in seq order
// (ledger.Replay: totals, seq, each row's balance_after, and nothing the
// model finds wrong), and neither it nor any debit row's balance_after is
// below what the merchant's overdraft policy allows (0 unless floor or
// overage).
func checkBalances(r *Report, rows map[string]ledger.Row, balances map[string]ledger.Balance) {
	replayed := ledger.Replay(slices.Collect(maps.Values(rows)), balances, quotaevent.Alerts{})
	for id, row := range rows {
		if row.Kind == ledger.KindDebit && row.BalanceAfter != nil && belowPolicy(balances[row.MerchantID].Policy(), *row.BalanceAfter) {
			r.fail(Overdraft, "debit %s left merchant %s at %d (policy %s)", id, row.MerchantID, *row.BalanceAfter, balances[row.MerchantID].Policy())
		}
		if want, ok := overageOf(row, balances[row.MerchantID].Policy()); !ok {
			r.fail(Overdraft, "%s %s of merchant %s records overage %d, want %d (balance after %s, policy %s)",
				row.Kind, id, row.MerchantID, row.Overage, want, afterOf(row), balances[row.MerchantID].Policy())
		}
		if want := replayed[row.MerchantID]; row.Seq != nil && want != nil && *row.Seq >= 1 && *row.Seq <= int64(len(want.After)) &&
			(row.BalanceAfter == nil || *row.BalanceAfter != want.After[*row.Seq-1]) {
			r.fail(Balances, "%s %s of merchant %s (seq %d) records balance_after %s, its ledger replays to %d",
				row.Kind, id, row.MerchantID, *row.Seq, afterOf(row), want.After[*row.Seq-1])
		}
	}
	r.Checked["merchants"] = len(balances)
	for m, b := range balances {
		if belowPolicy(b.Policy(), b.Available()) {
			r.fail(Overdraft, "merchant %s overdrawn: credited %d, debited %d (policy %s)", m, b.Credited, b.Debited, b.Policy())
		}
		want := replayed[m]
		if want == nil {
			want = &ledger.Replayed{}
		}
		if want.Credited != b.Credited || want.Debited != b.Debited || want.Seq != b.Seq {
			r.fail(Balances, "merchant %s balance row %d/%d seq %d != its ledger replayed %d/%d seq %d", m, b.Credited, b.Debited, b.Seq, want.Credited, want.Debited, want.Seq)
		}
	}
	for m, want := range replayed {
		for _, f := range want.Faults {
			r.fail(Balances, "merchant %s: %s", m, f)
		}
		if _, ok := balances[m]; !ok && (want.Credited != 0 || want.Debited != 0 || want.Seq != 0) {
			r.fail(Balances, "merchant %s moves %d/%d in the ledger but has no balance row", m, want.Credited, want.Debited)
		}
	}
}

// checkRedis: no loaded merchant's remain is below its policy's lowest; once settled, every
// loaded merchant's remain equals credited - debited and nothing is pending.
// A sharded merchant's remain is the sum of its shards (of both layouts while
// a resharding folds), none of which may be negative.
func checkRedis(ctx context.Context, r *Report, s State, balances map[string]ledger.Balance) error {
	if s.Redis == nil {
		return nil
	}
	merchants := slices.Sorted(maps.Keys(balances))
	sqlDB, err := s.DB.DB()
	if err != nil {
		return fmt.Errorf("invariant: %w", err)
	}
	layouts, err := shard.NewStore(sqlDB).Layouts(ctx, merchants)
	if err != nil {
		return fmt.Errorf("invariant: %w", err)
	}
	var keys []string
	for _, m := range merchants {
		for _, t := range layouts[m].Tags(m) {
			keys = append(keys, s.Keys.Quota(t))
		}
	}
	all, err := quota.Read(ctx, s.Redis, keys)
	if err != nil {
		return fmt.Errorf("invariant: %w", err)
	}
	hashes := make([]map[string]string, len(merchants))
	for i, m := range merchants {
		n := len(layouts[m].Tags(m))
		shards := all[:n]
		all = all[n:]
		for k, h := range shards {
			if q, err := quota.Parse(h); n > 1 && err == nil && belowShardFloor(q.Remain, h[quota.FieldFloor]) {
				r.fail(Overdraft, "merchant %s shard %s redis remain %d is below its floor %q", m, layouts[m].Tags(m)[k], q.Remain, h[quota.FieldFloor])
			}
		}
		hashes[i] = quota.Merge(shards)
		if n > 1 && len(hashes[i]) > 0 && hashes[i][quota.FieldRemain] == "" && !slices.Contains(s.Drifted, m) {
			// Some shards only: the next wide pass rebuilds them all.
			r.Checked["redis keys not loaded"]++
			hashes[i] = nil
		}
	}
	for i, m := range merchants {
		if slices.Contains(s.Drifted, m) {
			r.Checked["redis keys drifted on purpose"]++
			continue
		}
		if len(hashes[i]) == 0 {
			r.Checked["redis keys not loaded"]++
			continue // not loaded: the worker hydrates from MySQL on demand
		}
		r.Checked["redis keys read"]++
		q, err := quota.Parse(hashes[i])
		if err != nil || !q.Exists {
			r.fail(Redis, "merchant %s redis hash %v unreadable: %v", m, hashes[i], err)
			continue
		}
		if belowPolicy(balances[m].Policy(), q.Remain) {
			r.fail(Overdraft, "merchant %s redis remain %d is below what policy %s allows", m, q.Remain, balances[m].Policy())
		}
		if !s.RedisSettled {
			continue // in-flight p: deductions may still hold part of the balance
		}
		if want := balances[m].Available(); q.Remain != want {
			r.fail(Redis, "merchant %s redis remain %d != credited-debited %d", m, q.Remain, want)
		}
		for _, p := range q.Pending {
			r.fail(Redis, "merchant %s still has pending %s", m, quota.PendingField(p.EventID))
		}
	}
	return nil
}

// checkDLQ: every invalid message is dead-lettered, and distinct by
// provenance (original topic, partition, offset) exactly once: records of one
// provenance are copies of one dead-lettering (at least once), with one
// payload. Nothing else is dead-lettered: each record is judged by what it
// is (judgeDeadLetter), so a valid event dead-lettered in place of a missing
// invalid one does not pass as the right count.
func checkDLQ(r *Report, p Produced, s State) {
	valid := p.firsts()
	type origin struct {
		topic     string
		partition int
		offset    int64
	}
	first := map[origin]dlq.Record{}
	for _, rec := range s.DLQ {
		o := origin{rec.OriginalTopic, rec.OriginalPartition, rec.OriginalOffset}
		f, ok := first[o]
		if !ok {
			first[o] = rec
			judgeDeadLetter(r, valid, rec, p.Exhausting)
			continue
		}
		if !bytes.Equal(f.Key, rec.Key) || !bytes.Equal(f.Value, rec.Value) {
			r.fail(DLQ, "message %s/%d@%d dead-lettered with different payloads", o.topic, o.partition, o.offset)
		}
	}
	r.Checked["dlq records"] = len(s.DLQ)
	r.Checked["dlq copies"] = len(s.DLQ) - len(first)
	if len(first) != p.Invalid {
		r.fail(DLQ, "%d distinct messages dead-lettered, %d invalid produced", len(first), p.Invalid)
	}
}

// judgeDeadLetter checks what one dead-lettering is, not just that it counts:
// a record that decodes must be a conflict (an event_id produced valid with
// another merchant or amount); one that does not decode is poison.
func judgeDeadLetter(r *Report, valid map[string]event.PaymentSucceeded, rec dlq.Record, exhausting bool) {
	e, err := event.Decode(rec.Key, rec.Value)
	if err != nil {
		return
	}
	where := fmt.Sprintf("%s/%d@%d", rec.OriginalTopic, rec.OriginalPartition, rec.OriginalOffset)
	switch v, ok := valid[e.EventID]; {
	case !ok:
		r.fail(DLQ, "event %s dead-lettered from %s conflicts with no produced event", e.EventID, where)
	case v.MerchantID == e.MerchantID && v.Amount == e.Amount && !(exhausting && rec.Class == dlq.ClassExhausted):
		r.fail(DLQ, "valid event %s (merchant %s, amount %d) dead-lettered from %s", e.EventID, e.MerchantID, e.Amount, where)
	}
}

// overageOf checks a row's overage: the part of a debit below zero, recorded
// under the overage policy. A row that records one must record exactly that
// part (its policy may have changed since); under the merchant's overage
// policy every debit must. ok is false when the row is wrong, want is the right value.
func overageOf(row ledger.Row, p ledger.Policy) (want int64, ok bool) {
	if row.Kind != ledger.KindDebit || row.BalanceAfter == nil {
		return 0, row.Overage == 0
	}
	want = ledger.Policy{Kind: ledger.PolicyOverage}.Overage(*row.BalanceAfter+row.Amount, row.Amount)
	if row.Overage == 0 && p.Kind != ledger.PolicyOverage {
		return want, true
	}
	return want, row.Overage == want
}

// belowShardFloor reports a shard's remain below its part of the overdraft
// floor (its floor field: N, "inf" under overage, absent 0).
func belowShardFloor(remain int64, floor string) bool {
	if floor == "inf" {
		return false
	}
	f, _ := strconv.ParseInt(floor, 10, 64)
	return remain < -f
}

// afterOf renders a row's balance_after, "none" when it has none.
func afterOf(row ledger.Row) string {
	if row.BalanceAfter == nil {
		return "none"
	}
	return strconv.FormatInt(*row.BalanceAfter, 10)
}

// belowPolicy reports a balance under the lowest the policy allows.
func belowPolicy(p ledger.Policy, balance int64) bool {
	lowest, bounded := p.Lowest()
	return bounded && balance < lowest
}

// checkRefunds: every refund row belongs to an applied refund, which it (with
// its second row, if any) gives back exactly; what the refunds of a payment
// took is at most its debit and each is returned, expired or billed; a refund
// waits only for a payment not recorded, and one is void only for a payment
// not debited.
func checkRefunds(ctx context.Context, r *Report, db *gorm.DB, rows map[string]ledger.Row) error {
	var recs []struct {
		RefundID, EventID, MerchantID, State     string
		Amount, Taken, Returned, Expired, Billed int64
	}
	if err := db.WithContext(ctx).Raw("SELECT refund_id, event_id, merchant_id, state, amount, taken, returned, expired, billed FROM quota_refunds").Scan(&recs).Error; err != nil {
		return fmt.Errorf("invariant: read refunds: %w", err)
	}
	owned := map[string]bool{}
	taken := map[string]int64{}
	for _, rec := range recs {
		first := ledger.RefundRowID(rec.RefundID)
		second := ledger.RefundGrantsRowID(first)
		owned[first], owned[second] = true, true
		payment, recorded := rows[rec.EventID]
		switch rec.State {
		case string(ledger.RefundApplied):
			if back := rows[first].Amount + rows[second].Amount; back != rec.Returned {
				r.fail(Refunds, "refund %s returned %d, its rows give back %d", rec.RefundID, rec.Returned, back)
			}
			if rec.Returned+rec.Expired+rec.Billed != rec.Taken {
				r.fail(Refunds, "refund %s took %d: %d returned + %d expired + %d billed", rec.RefundID, rec.Taken, rec.Returned, rec.Expired, rec.Billed)
			}
			if !recorded || payment.Kind != ledger.KindDebit || payment.MerchantID != rec.MerchantID {
				r.fail(Refunds, "refund %s applied to %s, which is no debit of %s", rec.RefundID, rec.EventID, rec.MerchantID)
			}
			taken[rec.EventID] += rec.Taken
		case string(ledger.RefundPending):
			// One of a payment recorded for another merchant waits until it is
			// delivered again (a conflict no payment's transaction looks for).
			if recorded && payment.MerchantID == rec.MerchantID {
				r.fail(Refunds, "refund %s waits for payment %s, which is recorded (%s)", rec.RefundID, rec.EventID, payment.Kind)
			}
		case string(ledger.RefundVoid):
			if recorded && payment.Kind == ledger.KindDebit && payment.MerchantID == rec.MerchantID {
				r.fail(Refunds, "refund %s is void, but payment %s is a debit of its merchant", rec.RefundID, rec.EventID)
			}
		}
		r.Checked["refunds "+rec.State]++
	}
	for id, n := range taken {
		if n > rows[id].Amount {
			r.fail(Refunds, "the refunds of payment %s took %d of its debit of %d", id, n, rows[id].Amount)
		}
	}
	for id, row := range rows {
		if row.Kind == ledger.KindRefund && !owned[id] {
			r.fail(Refunds, "refund row %s (merchant %s) belongs to no refund", id, row.MerchantID)
		}
	}
	return nil
}
