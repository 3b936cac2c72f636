package deduct

import (
	"context"
	"fmt"
	"sort"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/quotaflow/billing/internal/event"
	"github.com/quotaflow/billing/internal/ledger"
	"github.com/quotaflow/billing/internal/ledger/ledgerdb"
	"github.com/quotaflow/billing/internal/quota"
	"github.com/quotaflow/billing/internal/testenv"
)

// counterIDs is a test IDSource: an atomic counter.
type counterIDs struct{ n atomic.Int64 }

func (c *counterIDs) NextIDs(dst []int64) error {
	end := c.n.Add(int64(len(dst)))
	for i := range dst {
		dst[i] = end - int64(len(dst)) + int64(i) + 1
	}
	return nil
}

// env is one test's real Redis prefix and MySQL database.
type env struct {
	t      testing.TB
	redis  *testenv.Redis
	mysql  *testenv.MySQL
	ids    *counterIDs
	store  *ledgerdb.Store
	locker *testLocker
	d      *Deductor
}

func newEnv(t testing.TB) *env {
	t.Helper()
	e := &env{t: t, redis: testenv.NewRedis(t), mysql: testenv.NewMySQL(t), ids: &counterIDs{}}
	e.locker = newTestLocker(t, e.redis.Client, e.redis.Keys, 30*time.Second)
	e.store = e.newStore()
	e.d = e.newDeductor()
	return e
}

func (e *env) newStore() *ledgerdb.Store {
	s, err := ledgerdb.New(e.mysql.SQL, e.ids, nil, ledgerdb.Options{})
	if err != nil {
		e.t.Fatal(err)
	}
	return s
}

// newDeductor is a fresh Deductor on the same services, as after a restart.
func (e *env) newDeductor() *Deductor {
	d, err := New(e.redis.Client, e.redis.Keys, e.locker, e.store, nil, nil, Options{})
	if err != nil {
		e.t.Fatal(err)
	}
	return d
}

func (e *env) grant(merchant string, amount int64) {
	e.t.Helper()
	id := fmt.Sprintf("grant-%s-%d", merchant, time.Now().UnixNano())
	if _, err := e.d.Grant(context.Background(), merchant, amount, id); err != nil {
		e.t.Fatal(err)
	}
}

func (e *env) apply(d *Deductor, events []event.PaymentSucceeded) []Result {
	e.t.Helper()
	res, err := d.Apply(context.Background(), events)
	if err != nil {
		e.t.Fatalf("Apply: %v", err)
	}
	return res
}

func pay(id, merchant string, amount int64) event.PaymentSucceeded {
	return event.PaymentSucceeded{EventID: id, PaymentID: "pay-" + id, MerchantID: merchant, Amount: amount,
		Source: event.SourcePC, OccurredAt: time.Date(2026, 11, 29, 7, 0, 0, 0, time.UTC)}
}

// hash reads and parses the quota hash of a tag (a merchant, or one of its shards).
func (e *env) hash(tag string) quota.Hash {
	e.t.Helper()
	h, err := e.redis.Client.HGetAll(context.Background(), e.redis.Keys.Quota(tag)).Result()
	if err != nil {
		e.t.Fatal(err)
	}
	q, err := quota.Parse(h)
	if err != nil {
		e.t.Fatal(err)
	}
	return q
}

// quota reads a merchant's hash: remain (-1 when missing) and pending deductions by event id.
func (e *env) quota(merchant string) (remain int64, pending map[string]int64) {
	e.t.Helper()
	q := e.hash(merchant)
	remain = -1
	if q.Exists {
		remain = q.Remain
	}
	pending = make(map[string]int64)
	for _, p := range q.Pending {
		pending[p.EventID] = p.Amount
	}
	return remain, pending
}

func (e *env) balance(merchant string) ledger.Balance {
	e.t.Helper()
	bals, err := e.store.Balances(context.Background(), []string{merchant})
	if err != nil {
		e.t.Fatal(err)
	}
	return bals[merchant]
}

// checkConsistent asserts the invariants of a quiet system: every balance row
// equals the sums of its ledger rows, every cached remain equals credited -
// debited (but for the merchants in liars, whose cache was set by hand), and
// no p: field is left.
func (e *env) checkConsistent(liars ...map[string]bool) {
	e.t.Helper()
	ctx := context.Background()
	sums, err := e.sums(ctx, nil)
	if err != nil {
		e.t.Fatal(err)
	}
	var bals []ledger.Balance
	if err := e.mysql.DB.WithContext(ctx).Find(&bals).Error; err != nil {
		e.t.Fatal(err)
	}
	for _, b := range bals {
		s := sums[b.MerchantID]
		if s.Credited != b.Credited || s.Debited != b.Debited {
			e.t.Errorf("merchant %s: balance row credited=%d debited=%d, ledger rows credited=%d debited=%d",
				b.MerchantID, b.Credited, b.Debited, s.Credited, s.Debited)
		}
		remain, pending := e.quota(b.MerchantID)
		if remain != -1 && remain != b.Available() && (len(liars) == 0 || !liars[0][b.MerchantID]) {
			e.t.Errorf("merchant %s: Redis remain %d, MySQL credited - debited %d", b.MerchantID, remain, b.Available())
		}
		if len(pending) > 0 {
			e.t.Errorf("merchant %s: pending fields left: %v", b.MerchantID, pending)
		}
	}
}

// snapshot is the observable state, without ids and timestamps, to compare runs.
type snapshot struct {
	Rows     []string
	Balances []string
	Redis    []string
}

func (e *env) snapshot(merchants ...string) snapshot {
	e.t.Helper()
	var s snapshot
	var rows []ledger.Row
	if err := e.mysql.DB.Order("event_id").Find(&rows).Error; err != nil {
		e.t.Fatal(err)
	}
	for _, r := range rows {
		if r.Kind == ledger.KindCredit {
			continue // grant ids differ between runs
		}
		s.Rows = append(s.Rows, fmt.Sprintf("%s %s %s %d after=%v %s", r.EventID, r.MerchantID, r.Kind, r.Amount, value(r.BalanceAfter), r.Reason))
	}
	var bals []ledger.Balance
	if err := e.mysql.DB.Order("merchant_id").Find(&bals).Error; err != nil {
		e.t.Fatal(err)
	}
	for _, b := range bals {
		s.Balances = append(s.Balances, fmt.Sprintf("%s %d %d", b.MerchantID, b.Credited, b.Debited))
	}
	sort.Strings(merchants)
	for _, m := range merchants {
		remain, pending := e.quota(m)
		if b, known := e.balances()[m]; remain == -1 && known {
			// A dropped hash is what the next deduction hydrates: MySQL's balance.
			remain = b.Available()
		}
		s.Redis = append(s.Redis, fmt.Sprintf("%s remain=%d pending=%d", m, remain, len(pending)))
	}
	return s
}

func (e *env) balances() map[string]ledger.Balance {
	e.t.Helper()
	var bals []ledger.Balance
	if err := e.mysql.DB.Find(&bals).Error; err != nil {
		e.t.Fatal(err)
	}
	out := make(map[string]ledger.Balance, len(bals))
	for _, b := range bals {
		out[b.MerchantID] = b
	}
	return out
}

func counterValue(t testing.TB, c prometheus.Counter) float64 {
	t.Helper()
	var m dto.Metric
	if err := c.Write(&m); err != nil {
		t.Fatal(err)
	}
	return m.GetCounter().GetValue()
}

func outcomes(res []Result) []Outcome {
	out := make([]Outcome, len(res))
	for i, r := range res {
		out[i] = r.Outcome
	}
	return out
}

// ledgerSums are the totals of one merchant's ledger rows.
type ledgerSums struct {
	MerchantID string
	Credited   int64 // sum of credit rows
	Debited    int64 // sum of debit and expire rows
	Rejected   int64 // number of rejected rows
}

// sums adds up the ledger rows of the given merchants, or of every merchant
// when merchantIDs is empty. Merchants without rows are absent from the map.
func (e *env) sums(ctx context.Context, merchantIDs []string) (map[string]ledgerSums, error) {
	q := e.mysql.DB.WithContext(ctx).Model(&ledger.Row{}).Select(
		"merchant_id",
		"COALESCE(SUM(CASE WHEN kind IN ('credit', 'billed', 'refund') THEN amount ELSE 0 END), 0) AS credited",
		"COALESCE(SUM(CASE WHEN kind IN ('debit', 'expire') THEN amount ELSE 0 END), 0) AS debited",
		"COALESCE(SUM(CASE WHEN kind = 'rejected' THEN 1 ELSE 0 END), 0) AS rejected",
	).Group("merchant_id")
	if len(merchantIDs) > 0 {
		q = q.Where("merchant_id IN ?", merchantIDs)
	}
	var rows []ledgerSums
	if err := q.Scan(&rows).Error; err != nil {
		return nil, err
	}
	out := make(map[string]ledgerSums, len(rows))
	for _, r := range rows {
		out[r.MerchantID] = r
	}
	return out, nil
}
