package load

import (
	"context"
	"database/sql"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/quotaflow/billing/internal/event"
	"github.com/quotaflow/billing/internal/idgen"
	"github.com/quotaflow/billing/internal/ledger"
	"github.com/quotaflow/billing/internal/workload"
)

// quota granted to every merchant: no run comes near it, so nothing is
// rejected and the debited total tells when every event is in.
const quota = 1_000_000_000_000

// fillWorkerID is the Snowflake worker ID of the rows the run writes itself;
// the workers take 0..Workers-1.
const fillWorkerID = idgen.MaxWorker

// rowsPerInsert: big multi-row INSERTs load fastest (4,000 rows of 14 columns
// stay under MySQL's 65,535 placeholders).
const rowsPerInsert = 4000

// filled is what grant wrote before the run.
type filled struct {
	debited int64 // the pre-filled debit rows' total
	lastID  int64 // every later row (the workers') has a larger id
}

// grant gives every merchant its quota (a balance row, a credit row and a
// grant at the head of its burn-down, as a grant would) and, with rows > 0, writes rows debit rows spread round-robin
// over the merchants, with balances to match: the ledger as it would be
// after rows earlier payments. Their event_ids are the run's prefix followed
// by numbers after the run's own (firstSeq on), so old and new ids interleave
// in the unique index as a producer's ids over time would, and they are
// written in a scattered order (scatter): the index's pages end up as part
// full as random ids leave them, not packed full by ascending inserts (which
// would make every insert of the run split a page). With ordered, they are
// ascending and all sort before the run's: ids that grow with time.
func grant(ctx context.Context, db *sql.DB, merchants []string, rows int, idPrefix string, firstSeq int, ordered bool) (filled, error) {
	gen, err := idgen.New(fillWorkerID, idgen.Options{})
	if err != nil {
		return filled{}, fmt.Errorf("load: %w", err)
	}
	var f filled
	debited, after := make([]int64, len(merchants)), make([]int64, len(merchants))
	seqs := make([]int64, len(merchants)) // each merchant's rows so far: its grant, then its debits
	for j := range rows {
		debited[j%len(merchants)] += fillAmount(j, len(merchants))
	}
	now := time.Now().UTC()
	credit := int64(quota)
	for off := 0; off < len(merchants); off += rowsPerInsert {
		chunk := merchants[off:min(off+rowsPerInsert, len(merchants))]
		bal := make([]any, 0, 7*len(chunk))
		grants := make([]any, 0, 6*len(chunk))
		led := make([]ledger.Row, len(chunk))
		for i, m := range chunk {
			// One never-expiring grant per merchant, at the head of its
			// burn-down: head_end - debited is its remaining.
			n := 1 + int64((rows+len(merchants)-1-(off+i))/len(merchants)) // the grant and its debits
			bal = append(bal, m, credit, debited[off+i], "grant-"+m, credit, n, credit)
			grants = append(grants, "grant-"+m, m, credit, credit-debited[off+i], now, now)
			seqs[off+i] = 1
			first := int64(1)
			led[i] = ledger.Row{EventID: "grant-" + m, MerchantID: m, Kind: ledger.KindCredit, Amount: quota,
				BalanceAfter: &credit, Reason: ledger.ReasonGrant, Seq: &first, OccurredAt: now, CreatedAt: now}
			after[off+i] = quota
		}
		tuples := strings.Repeat(", (?, ?, ?, ?, ?, ?, ?)", len(chunk))[2:]
		if _, err := db.ExecContext(ctx, "INSERT INTO merchant_balance (merchant_id, credited, debited, head_grant, head_end, seq, low_base) VALUES "+tuples, bal...); err != nil {
			return filled{}, fmt.Errorf("load: grant: %w", err)
		}
		tuples = strings.Repeat(", (?, ?, ?, ?, 50, ?, ?)", len(chunk))[2:]
		if _, err := db.ExecContext(ctx, "INSERT INTO quota_grants (grant_id, merchant_id, amount, remaining, priority, starts_at, created_at) VALUES "+tuples, grants...); err != nil {
			return filled{}, fmt.Errorf("load: grant: %w", err)
		}
		if f.lastID, err = insert(ctx, db, gen, led); err != nil {
			return filled{}, err
		}
	}
	sources := []event.Source{event.SourcePC, event.SourceMiniApp, event.SourceOpenAPI}
	for off := 0; off < rows; off += rowsPerInsert {
		led := make([]ledger.Row, min(rowsPerInsert, rows-off))
		for i := range led {
			j := off + i
			m, amount := j%len(merchants), fillAmount(j, len(merchants))
			after[m] -= amount
			seqs[m]++
			seq := seqs[m]
			balance, eventID := after[m], idPrefix+strconv.Itoa(firstSeq+scatter(j, rows))
			if ordered { // "-" sorts before every digit: all before the run's ids
				eventID = fmt.Sprintf("%s-%010d", idPrefix, j)
			}
			at := now.Add(time.Duration(j-rows) * time.Millisecond)
			grantID := "grant-" + merchants[m]
			led[i] = ledger.Row{EventID: eventID, MerchantID: merchants[m], Kind: ledger.KindDebit, Amount: amount,
				BalanceAfter: &balance, Reason: ledger.ReasonPayment, PaymentID: "pay-" + eventID, Source: string(sources[j%3]),
				GrantID: &grantID, Seq: &seq, OccurredAt: at, CreatedAt: at}
		}
		if f.lastID, err = insert(ctx, db, gen, led); err != nil {
			return filled{}, fmt.Errorf("load: pre-fill after %d of %d rows: %w", off, rows, err)
		}
	}
	for _, d := range debited {
		f.debited += d
	}
	return f, nil
}

// insert gives rows their ids and writes them in one statement; it returns the last id.
func insert(ctx context.Context, db *sql.DB, gen *idgen.Generator, rows []ledger.Row) (int64, error) {
	ids := make([]idgen.ID, len(rows))
	if err := gen.NextIDs(ids); err != nil {
		return 0, fmt.Errorf("load: %w", err)
	}
	for i := range rows {
		rows[i].ID = int64(ids[i])
	}
	args := make([]any, 0, 13*len(rows))
	for _, r := range rows {
		args = append(args, r.ID, r.EventID, r.MerchantID, string(r.Kind), r.Amount, r.BalanceAfter, r.Reason, r.PaymentID,
			r.Source, r.OccurredAt, r.CreatedAt, r.GrantID, r.Seq)
	}
	query := "INSERT INTO quota_ledger (id, event_id, merchant_id, kind, amount, balance_after, reason, payment_id, source, occurred_at, created_at, grant_id, seq) VALUES " +
		strings.Repeat(", (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", len(rows))[2:]
	if _, err := db.ExecContext(ctx, query, args...); err != nil {
		return 0, fmt.Errorf("load: insert ledger rows: %w", err)
	}
	return rows[len(rows)-1].ID, nil
}

// fillAmount is the amount of pre-filled row j: 1..10, as the workload's.
func fillAmount(j, merchants int) int64 { return int64(1 + (j/merchants)%workload.DefaultMaxAmount) }

// warm reads the ledger's secondary indexes once, as a server that has been
// running has them in its buffer pool when they fit: the growth figure is
// about the indexes' size, not about a cold start.
func warm(ctx context.Context, db *sql.DB) error {
	for _, index := range []string{"quota_ledger_event_id", "quota_ledger_merchant_seq"} {
		var n int64
		if err := db.QueryRowContext(ctx, "SELECT COUNT(*) FROM quota_ledger FORCE INDEX ("+index+")").Scan(&n); err != nil {
			return fmt.Errorf("load: warm index %s: %w", index, err)
		}
	}
	return nil
}

// scatter maps 0..n-1 onto itself, one to one, far from ascending: j times a
// prime larger than n, modulo n.
func scatter(j, n int) int {
	const prime = 4_294_967_291 // the largest prime below 2^32; n stays below it
	return int(uint64(j) * prime % uint64(n))
}
