package load

import (
	"context"
	"database/sql"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/quotaflow/billing/internal/idgen"
	"github.com/quotaflow/billing/internal/workload"
)

// quota granted to every merchant: no run comes near it, so nothing is
// rejected and the debited total tells when every event is in.
const quota = 1_000_000_000_000

// fillWorkerID is the Snowflake worker ID of the rows the run writes itself;
// the workers take 0..Workers-1.
const fillWorkerID = idgen.MaxWorker

// rowsPerInsert: big multi-row INSERTs load fastest (about 750 KB each, well
// under max_allowed_packet).
const rowsPerInsert = 5000

// filled is what grant wrote before the run.
type filled struct {
	debited int64 // the pre-filled debit rows' total
	lastID  int64 // every later row (the workers') has a larger id
}

// grant gives every merchant its quota (a balance row and a credit row, as a
// grant would) and, with rows > 0, writes rows debit rows spread round-robin
// over the merchants, with balances to match: the ledger as it would be
// after rows earlier payments. Their event_ids are the run's prefix followed
// by numbers after the run's own (firstSeq on), so old and new ids interleave
// in the unique index as a producer's ids over time would.
func grant(ctx context.Context, db *sql.DB, merchants []string, rows int, idPrefix string, firstSeq int) (filled, error) {
	ids, err := idgen.New(fillWorkerID, idgen.Options{})
	if err != nil {
		return filled{}, fmt.Errorf("load: %w", err)
	}
	debited := make([]int64, len(merchants))
	for j := range rows {
		debited[j%len(merchants)] += fillAmount(j, len(merchants))
	}
	var f filled
	now := time.Now().UTC()
	for off := 0; off < len(merchants); off += rowsPerInsert {
		chunk := merchants[off:min(off+rowsPerInsert, len(merchants))]
		bal := insertInto("merchant_balance (merchant_id, credited, debited)")
		led := insertInto("quota_ledger (id, event_id, merchant_id, kind, amount, balance_after, reason, occurred_at, created_at)")
		for i, m := range chunk {
			id, err := ids.NextID()
			if err != nil {
				return filled{}, fmt.Errorf("load: %w", err)
			}
			f.lastID = int64(id)
			bal.row(quoted(m), num(quota), num(debited[off+i]))
			led.row(num(int64(id)), quoted("grant-"+m), quoted(m), "'credit'", num(quota), num(quota), "'grant'", stamp(now), stamp(now))
		}
		if err := execAll(ctx, db, bal, led); err != nil {
			return filled{}, err
		}
	}
	after := make([]int64, len(merchants))
	for i := range after {
		after[i] = quota
	}
	sources := []string{"'pc'", "'miniapp'", "'openapi'"}
	for off := 0; off < rows; off += rowsPerInsert {
		n := min(rowsPerInsert, rows-off)
		batch := make([]idgen.ID, n)
		if err := ids.NextIDs(batch); err != nil {
			return filled{}, fmt.Errorf("load: %w", err)
		}
		led := insertInto("quota_ledger (id, event_id, merchant_id, kind, amount, balance_after, reason, payment_id, source, occurred_at, created_at)")
		for i := range n {
			j := off + i
			m, amount := j%len(merchants), fillAmount(j, len(merchants))
			after[m] -= amount
			eventID := idPrefix + strconv.Itoa(firstSeq+j)
			at := stamp(now.Add(time.Duration(j-rows) * time.Millisecond))
			led.row(num(int64(batch[i])), quoted(eventID), quoted(merchants[m]), "'debit'", num(amount), num(after[m]),
				"'payment'", quoted("pay-"+eventID), sources[j%3], at, at)
		}
		if err := execAll(ctx, db, led); err != nil {
			return filled{}, fmt.Errorf("load: pre-fill after %d of %d rows: %w", off, rows, err)
		}
		f.lastID = int64(batch[n-1])
	}
	for _, d := range debited {
		f.debited += d
	}
	return f, nil
}

// fillAmount is the amount of pre-filled row j: 1..10, as the workload's.
func fillAmount(j, merchants int) int64 { return int64(1 + (j/merchants)%workload.DefaultMaxAmount) }

// insert builds one multi-row INSERT as text. Every value is a number, a
// timestamp or an id of [A-Za-z0-9_.:-] made by this package, so quoting is
// enough; text is faster to build and send than 55,000 placeholders.
type insert struct {
	b    strings.Builder
	rows int
}

func insertInto(table string) *insert {
	ins := &insert{}
	ins.b.WriteString("INSERT INTO " + table + " VALUES ")
	return ins
}

func (ins *insert) row(values ...string) {
	if ins.rows > 0 {
		ins.b.WriteString(", ")
	}
	ins.rows++
	ins.b.WriteString("(" + strings.Join(values, ", ") + ")")
}

func execAll(ctx context.Context, db *sql.DB, stmts ...*insert) error {
	for _, s := range stmts {
		if _, err := db.ExecContext(ctx, s.b.String()); err != nil {
			return fmt.Errorf("load: %.60s...: %w", s.b.String(), err)
		}
	}
	return nil
}

func num(n int64) string       { return strconv.FormatInt(n, 10) }
func quoted(s string) string   { return "'" + s + "'" }
func stamp(t time.Time) string { return "'" + t.Format("2006-01-02 15:04:05.000000") + "'" }
