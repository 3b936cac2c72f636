package ledger

import (
	"errors"
	"fmt"
	"time"
)

// Period is a statement's period (From, To]. A row belongs to it by the time
// it was recorded (created_at), or by a later one of a row before it in its
// merchant's ledger order: created_at is taken before the transaction that
// orders the rows, so it may run backwards along seq by a retry's length,
// and a period is a contiguous run of seq numbers, the same in every export.
type Period struct {
	From, To time.Time
}

// Place is where a row falls relative to a Period.
type Place int

// The places of a row.
const (
	Before Place = iota // recorded at or before From: in the opening balance
	Within              // in the period: listed and totalled
	After               // after To: only in the balance at "now"
)

// Place places a row recorded at t.
func (p Period) Place(t time.Time) Place {
	switch {
	case !t.After(p.From):
		return Before
	case !t.After(p.To):
		return Within
	}
	return After
}

// KindTotal is the number and amount of one kind's rows.
type KindTotal struct {
	Count  int64 `json:"count"`
	Amount int64 `json:"amount"`
}

// ErrTieOut means a merchant's ledger does not tie out; *TieOutError says
// where.
var ErrTieOut = errors.New("ledger: statement does not tie out")

// TieOutError names the merchant, the row (Seq 0: the whole statement) and
// what disagreed.
type TieOutError struct {
	MerchantID string
	Seq        int64
	Detail     string
}

func (e *TieOutError) Error() string {
	if e.Seq == 0 {
		return fmt.Sprintf("ledger: statement of merchant %s does not tie out: %s", e.MerchantID, e.Detail)
	}
	return fmt.Sprintf("ledger: statement of merchant %s does not tie out at seq %d: %s", e.MerchantID, e.Seq, e.Detail)
}

// Is makes errors.Is(err, ErrTieOut) hold.
func (e *TieOutError) Is(target error) bool { return target == ErrTieOut }

// Statement is one merchant's statement for a Period, built from all its
// ledger rows in seq order (Add) and checked against its balance row
// (Finish). It checks as it goes: seq numbers follow one another from 1,
// every row's balance_after is the balance its predecessors and its own
// movement make, and at the end the rows (at "now", as the snapshot saw it)
// add up to merchant_balance's credited and debited, each on its own, with as
// many rows as its seq.
type Statement struct {
	MerchantID string
	Opening    int64              // the balance at From, as recorded (balance_after)
	Closing    int64              // the balance at To, as recorded (balance_after)
	Totals     map[Kind]KindTotal // the period's rows by kind
	Rows       int64              // the period's rows

	period            Period
	balance           int64     // after every row so far
	credited, debited int64     // what every row so far added and took
	seq               int64     // of the last row so far
	latest            time.Time // the latest created_at so far
}

// NewStatement starts the statement of merchant for period.
func NewStatement(merchant string, period Period) *Statement {
	return &Statement{MerchantID: merchant, Totals: make(map[Kind]KindTotal), period: period}
}

// Add adds the merchant's next row and returns where it falls (see Period),
// or a *TieOutError. Opening is final once a row falls Within or After.
func (s *Statement) Add(r *Row) (Place, error) {
	sign, known := r.Kind.Movement()
	switch {
	case r.MerchantID != s.MerchantID:
		return 0, s.fail(0, fmt.Sprintf("row %d of merchant %s in its statement", r.ID, r.MerchantID))
	case r.Seq == nil || *r.Seq != s.seq+1:
		return 0, s.fail(s.seq+1, fmt.Sprintf("row %d (event %s) has seq %s where %d was due", r.ID, r.EventID, seqText(r.Seq), s.seq+1))
	case !known:
		return 0, s.fail(*r.Seq, fmt.Sprintf("event %s has kind %q, which moves the balance in no known way", r.EventID, r.Kind))
	}
	s.seq++
	s.balance += sign * r.Amount
	switch sign {
	case 1:
		s.credited += r.Amount
	case -1:
		s.debited += r.Amount
	}
	if r.BalanceAfter == nil || *r.BalanceAfter != s.balance {
		return 0, s.fail(s.seq, fmt.Sprintf("event %s (%s %d) records balance_after %s, its predecessors make %d",
			r.EventID, r.Kind, r.Amount, seqText(r.BalanceAfter), s.balance))
	}
	if r.CreatedAt.After(s.latest) {
		s.latest = r.CreatedAt
	}
	place := s.period.Place(s.latest)
	switch place {
	case Before:
		s.Opening, s.Closing = *r.BalanceAfter, *r.BalanceAfter
	case Within:
		s.Closing = *r.BalanceAfter
		t := s.Totals[r.Kind]
		t.Count++
		t.Amount += r.Amount
		s.Totals[r.Kind] = t
		s.Rows++
	}
	return place, nil
}

// Finish checks the statement once every row is in: opening plus the
// period's totals, each moved as its kind moves, is the closing balance; and
// the rows make b: as many as b.Seq, their credits (credit, billed) b.Credited
// and their debits (debit, expire) b.Debited. Each side on its own, as the
// reconciler's ledger audit does: a balance row whose credited and debited
// are both off by the same amount still has the right balance.
func (s *Statement) Finish(b Balance) error {
	sum := s.Opening
	for k, t := range s.Totals {
		sign, _ := k.Movement()
		sum += sign * t.Amount
	}
	switch {
	case sum != s.Closing:
		return s.fail(0, fmt.Sprintf("opening %d and the period's totals make %d, the closing balance is %d", s.Opening, sum, s.Closing))
	case s.seq != b.Seq:
		return s.fail(0, fmt.Sprintf("%d rows, merchant_balance.seq is %d", s.seq, b.Seq))
	case s.credited != b.Credited || s.debited != b.Debited:
		return s.fail(0, fmt.Sprintf("the rows make a balance of %d now (credited %d - debited %d), merchant_balance has %d (credited %d - debited %d)",
			s.balance, s.credited, s.debited, b.Available(), b.Credited, b.Debited))
	}
	return nil
}

func (s *Statement) fail(seq int64, detail string) error {
	return &TieOutError{MerchantID: s.MerchantID, Seq: seq, Detail: detail}
}

func seqText(v *int64) string {
	if v == nil {
		return "NULL"
	}
	return fmt.Sprint(*v)
}
