package ledger

import (
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// Kind is the kind of a ledger row.
type Kind string

// The kinds of ledger rows.
const (
	KindCredit   Kind = "credit"   // quota granted; adds to credited
	KindDebit    Kind = "debit"    // quota used by a payment; adds to debited
	KindRejected Kind = "rejected" // a payment that used nothing (insufficient, unknown merchant)
	KindExpire   Kind = "expire"   // the remainder of an expired or revoked grant; adds to debited
	KindBilled   Kind = "billed"   // billed overage taken off the balance by a grant or refund: back to zero; adds to credited
)

// Movement is what a row of kind k does to its merchant's balance: 1 adds
// its amount, -1 takes it, 0 moves nothing; false for a kind it does not
// know, which a statement refuses. A new kind is one line here.
func (k Kind) Movement() (int64, bool) {
	switch k {
	case KindCredit, KindBilled, KindRefund:
		return 1, true
	case KindDebit, KindExpire:
		return -1, true
	case KindRejected:
		return 0, true
	}
	return 0, false
}

func (k Kind) known() bool { _, ok := k.Movement(); return ok }

// Reasons written on ledger rows.
const (
	ReasonPayment         = "payment"
	ReasonGrant           = "grant"
	ReasonInsufficient    = "insufficient"
	ReasonUnknownMerchant = "unknown_merchant"
	ReasonExpiry          = "expiry"
	ReasonRevoked         = "revoked" // on the expire row of a grant revoked before its expiry
	ReasonRollover        = "rollover"
	ReasonOverage         = "overage"
)

// Column limits of quota_ledger (migrations/0002_quota_ledger.up.sql).
const (
	maxIDChars        = 64
	maxReasonChars    = 64
	maxPaymentIDChars = 128
	maxSourceChars    = 16
)

// Row is one quota_ledger row.
type Row struct {
	ID           int64  `gorm:"column:id;primaryKey;autoIncrement:false"`
	EventID      string `gorm:"column:event_id"`
	MerchantID   string `gorm:"column:merchant_id"`
	Kind         Kind   `gorm:"column:kind"`
	Amount       int64  `gorm:"column:amount"`
	BalanceAfter *int64 `gorm:"column:balance_after"` // nil: the merchant is unknown
	Reason       string `gorm:"column:reason"`
	PaymentID    string `gorm:"column:payment_id"`
	Source       string `gorm:"column:source"`
	// Overage is the part of a debit below zero under the overage policy
	// (set by Commit), else 0.
	Overage int64 `gorm:"column:overage"`
	// GrantID is the grant that paid the whole debit, or that an expire row
	// ends (set by Commit and Expire); nil for a debit paid by several grants
	// (quota_attribution) or owed.
	GrantID *string `gorm:"column:grant_id"`
	// Seq is the row's place in its merchant's ledger (1, 2, 3 ... in commit
	// order, set by the transaction that writes it); nil for a rejection of
	// an unknown merchant.
	Seq        *int64    `gorm:"column:seq"`
	OccurredAt time.Time `gorm:"column:occurred_at"`
	CreatedAt  time.Time `gorm:"column:created_at"`
	// Refunded is what refunds that waited for this payment gave back in
	// the transaction that recorded it (set by Commit; no column): its
	// merchant's caches under-report by that much.
	Refunded int64 `gorm:"-"`
}

// TableName is the GORM table of Row.
func (Row) TableName() string { return "quota_ledger" }

// Check reports a value the table would refuse, before anything is written.
func (r Row) Check() error {
	switch {
	case r.EventID == "" || utf8.RuneCountInString(r.EventID) > maxIDChars:
		return fmt.Errorf("event_id must be 1..%d characters", maxIDChars)
	case r.MerchantID == "" || utf8.RuneCountInString(r.MerchantID) > maxIDChars:
		return fmt.Errorf("merchant_id must be 1..%d characters", maxIDChars)
	case !r.Kind.known():
		return fmt.Errorf("kind %q is not credit, debit, rejected, expire, billed or refund", r.Kind)
	case r.Amount <= 0:
		return fmt.Errorf("amount %d must be positive", r.Amount)
	case utf8.RuneCountInString(r.Reason) > maxReasonChars:
		return fmt.Errorf("reason longer than %d characters", maxReasonChars)
	case utf8.RuneCountInString(r.PaymentID) > maxPaymentIDChars:
		return fmt.Errorf("payment_id longer than %d characters", maxPaymentIDChars)
	case utf8.RuneCountInString(r.Source) > maxSourceChars:
		return fmt.Errorf("source longer than %d characters", maxSourceChars)
	case !utf8.ValidString(r.PaymentID) || !utf8.ValidString(r.EventID) || !utf8.ValidString(r.MerchantID):
		return fmt.Errorf("ids must be valid UTF-8")
	}
	if y := r.OccurredAt.UTC().Year(); y < 1000 || y > 9999 {
		return fmt.Errorf("occurred_at %s is outside the DATETIME range", r.OccurredAt.UTC().Format(time.RFC3339))
	}
	return nil
}

// Balance is one merchant_balance row: the truth about a merchant's quota.
type Balance struct {
	MerchantID string `gorm:"column:merchant_id;primaryKey"`
	Credited   int64  `gorm:"column:credited"`
	Debited    int64  `gorm:"column:debited"`
	// LowUnits and LowPercent are the merchant's low-balance thresholds;
	// both nil: the default (Options.Events.DefaultAlerts).
	LowUnits   *int64 `gorm:"column:low_units"`
	LowPercent *int   `gorm:"column:low_percent"`
	// PolicyKind and OverdraftFloor are the overdraft policy (see Policy).
	PolicyKind     PolicyKind `gorm:"column:overdraft_policy;default:reject"`
	OverdraftFloor int64      `gorm:"column:overdraft_floor"`
	// HeadGrant pays every debit until Debited reaches HeadEnd (see
	// migrations/0007); NextExpiry is the earliest expiry with a remainder.
	HeadGrant  *string    `gorm:"column:head_grant"`
	HeadEnd    *int64     `gorm:"column:head_end"`
	NextExpiry *time.Time `gorm:"column:next_expiry"`
	// Seq is the seq of the merchant's last ledger row (see Row.Seq).
	Seq int64 `gorm:"column:seq"`
	// LowBase is what a percentage threshold is of: the available balance
	// right after the merchant's last credit or expiry.
	LowBase int64 `gorm:"column:low_base"`
	// RefundsWaiting counts the merchant's refunds that wait for their
	// payment (at least: a payment's transaction reads them only then).
	RefundsWaiting int64 `gorm:"column:refunds_waiting"`
}

// TableName is the GORM table of Balance.
func (Balance) TableName() string { return "merchant_balance" }

// Available is what the merchant may still use: credited - debited.
func (b Balance) Available() int64 { return b.Credited - b.Debited }

// Sentinel errors; errors.As gives *GuardError and *RefusedError their details.
var (
	// ErrUnknownMerchant: the merchant has no merchant_balance row (grant first).
	ErrUnknownMerchant = errors.New("ledger: merchant unknown to billing (no merchant_balance row)")
	ErrGuard           = errors.New("ledger: balance guard refused the debit")
	ErrDuplicate       = errors.New("ledger: duplicate ledger row") // rolled back
	ErrConflict        = errors.New("ledger: event id already recorded with different content")
	ErrRefused         = errors.New("ledger: value refused by the database")
	ErrUnknownGrant    = errors.New("ledger: grant unknown to billing (no quota_grants row)")
)

// GuardError names a merchant whose cached balance disagrees with MySQL: the
// cache over-reported (MySQL cannot cover the debit), or with Covered
// under-reported (MySQL covers an amount the cache rejected).
type GuardError struct {
	MerchantID string
	Amount     int64
	Covered    bool
}

func (e *GuardError) Error() string {
	if e.Covered {
		return "ledger: balance guard refused a rejection of " + strconv.FormatInt(e.Amount, 10) +
			" for merchant " + e.MerchantID + ": MySQL covers it"
	}
	return "ledger: balance guard refused a debit of " + strconv.FormatInt(e.Amount, 10) +
		" for merchant " + e.MerchantID
}

// Is makes errors.Is(err, ErrGuard) hold.
func (e *GuardError) Is(target error) bool { return target == ErrGuard }

// ExpiryDueError: the guard refused the batch because grants of these
// merchants are due to expire; nothing is written. Drop their caches first
// (a crash then leaves nothing that over-reports), record the expiries
// (Expire), and redo the batch.
type ExpiryDueError struct {
	Merchants []string
}

func (e *ExpiryDueError) Error() string {
	return "ledger: grants of " + strings.Join(e.Merchants, ", ") + " are due to expire before the batch"
}

// RefusedError is a value the database refused; EventID names its row if known.
type RefusedError struct {
	EventID string
	Err     error
}

func (e *RefusedError) Error() string {
	if e.EventID == "" {
		return "ledger: value refused by the database: " + e.Err.Error()
	}
	return "ledger: value of event " + e.EventID + " refused by the database: " + e.Err.Error()
}

func (e *RefusedError) Unwrap() error { return e.Err }

// Is makes errors.Is(err, ErrRefused) hold.
func (e *RefusedError) Is(target error) bool { return target == ErrRefused }

// TakenTotals sums what rows take from each merchant's balance (debits and
// expiries add, credits and billed rows subtract) and lists every merchant of
// rows, sorted.
func TakenTotals(rows []Row) (map[string]int64, []string) {
	totals := make(map[string]int64)
	for _, r := range rows {
		if sign, _ := r.Kind.Movement(); sign != 0 {
			totals[r.MerchantID] -= sign * r.Amount
		} else if _, seen := totals[r.MerchantID]; !seen {
			totals[r.MerchantID] = 0
		}
	}
	merchants := make([]string, 0, len(totals))
	for m := range totals {
		merchants = append(merchants, m)
	}
	sort.Strings(merchants)
	return totals, merchants
}

// RowCounts counts rows per merchant: how many seq numbers each takes.
func RowCounts(rows []Row) map[string]int64 {
	n := make(map[string]int64)
	for _, r := range rows {
		n[r.MerchantID]++
	}
	return n
}

// Sequence walks rows in order from each merchant's balance before the batch
// and sets each row's Seq and BalanceAfter, and a debit's overage (the part
// below zero, under the overage policy). bals are the balances after the
// batch, which took taken (see TakenTotals) and one seq number per row; a
// merchant without a balance row gets neither on its rows.
func Sequence(rows []Row, bals []Balance, taken map[string]int64) {
	type cursor struct{ balance, seq int64 }
	at := make(map[string]*cursor, len(bals))
	counts := RowCounts(rows)
	policies := PoliciesOf(bals)
	for _, b := range bals {
		at[b.MerchantID] = &cursor{balance: b.Available() + taken[b.MerchantID], seq: b.Seq - counts[b.MerchantID]}
	}
	for i := range rows {
		r := &rows[i]
		c, known := at[r.MerchantID]
		r.Overage = 0
		if !known {
			r.BalanceAfter, r.Seq = nil, nil
			continue
		}
		switch r.Kind {
		case KindDebit:
			r.Overage = policies[r.MerchantID].Overage(c.balance, r.Amount)
			c.balance -= r.Amount
		case KindExpire:
			c.balance -= r.Amount
		case KindCredit, KindBilled, KindRefund:
			c.balance += r.Amount
		}
		c.seq++
		after, seq := c.balance, c.seq
		r.BalanceAfter, r.Seq = &after, &seq
	}
}

// StaleRejection returns a *GuardError (Covered) for the first rejected row
// that MySQL disagrees with, or nil. BalanceAfter is MySQL's balance at the
// row; the merchant's policy (reject when absent) says what it covers.
func StaleRejection(rows []Row, policies map[string]Policy) *GuardError {
	for _, r := range rows {
		if r.Kind != KindRejected {
			continue
		}
		unknown := r.BalanceAfter == nil
		covered := !unknown && policies[r.MerchantID].Covers(*r.BalanceAfter, r.Amount)
		if unknown != (r.Reason == ReasonUnknownMerchant) || covered {
			return &GuardError{MerchantID: r.MerchantID, Amount: r.Amount, Covered: true}
		}
	}
	return nil
}

// PoliciesOf maps each balance's merchant to its policy.
func PoliciesOf(bals []Balance) map[string]Policy {
	out := make(map[string]Policy, len(bals))
	for _, b := range bals {
		out[b.MerchantID] = b.Policy()
	}
	return out
}

// PolicyKind is a merchant's overdraft policy.
type PolicyKind string

// The overdraft policies.
const (
	PolicyReject  PolicyKind = "reject"  // the balance never goes below 0 (the default)
	PolicyFloor   PolicyKind = "floor"   // down to -Floor
	PolicyOverage PolicyKind = "overage" // never rejects; the part below 0 is overage
)

// Policy is a merchant's overdraft policy.
type Policy struct {
	Kind  PolicyKind
	Floor int64 // PolicyFloor only
}

func (p Policy) String() string {
	if p.Kind == PolicyFloor {
		return "floor " + strconv.FormatInt(p.Floor, 10)
	}
	if p.Kind == "" {
		return string(PolicyReject)
	}
	return string(p.Kind)
}

// Lowest is the lowest balance the policy allows; false when unbounded (overage).
func (p Policy) Lowest() (int64, bool) {
	switch p.Kind {
	case PolicyOverage:
		return 0, false
	case PolicyFloor:
		return -p.Floor, true
	}
	return 0, true
}

// Covers reports whether a balance may pay amount: available - amount stays
// at or above the policy's lowest balance (always, under overage).
func (p Policy) Covers(available, amount int64) bool {
	lowest, bounded := p.Lowest()
	return !bounded || available-amount >= lowest
}

// Overage is the part of a debit of amount, from balance before, that falls
// below zero under the overage policy; 0 under the others.
func (p Policy) Overage(before, amount int64) int64 {
	if p.Kind != PolicyOverage {
		return 0
	}
	return min(amount, max(amount-max(before, 0), 0))
}

// RedisFloor is the policy as the quota hash's floor field holds it:
// "inf" for overage, else the floor in units.
func (p Policy) RedisFloor() string {
	lowest, bounded := p.Lowest()
	if !bounded {
		return "inf"
	}
	return strconv.FormatInt(-lowest, 10)
}

// Policy is the merchant's overdraft policy.
func (b Balance) Policy() Policy {
	return Policy{Kind: b.PolicyKind, Floor: b.OverdraftFloor}
}
