// Package statement writes reconciliation statements: per merchant and
// period, the opening balance, every ledger row of the period in ledger
// (seq) order, totals by kind and the closing balance, from one consistent
// snapshot, checked as they stream (ledger.Statement), then a trailer with
// the counts and the SHA-256 of everything before it. An export runs under
// a job lock in Redis per (period, merchant set), kept by the lock's
// watchdog for as long as it runs; a file is written beside its name and
// renamed into place only when complete.
package statement

import (
	"cmp"
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/quotaflow/billing/internal/keyspace"
	"github.com/quotaflow/billing/internal/ledger"
	"github.com/quotaflow/billing/internal/ledger/ledgerdb"
	"github.com/quotaflow/billing/internal/lock"
)

var (
	// ErrBusy: another export of the same period and merchants holds the
	// job lock (and Options.Wait was 0, or ran out).
	ErrBusy = errors.New("statement: another export of this period and merchant set is running")
	// ErrPeriodOpen: the period ends later than the snapshot less the
	// settle time; rows of it may still be committing.
	ErrPeriodOpen = errors.New("statement: the period is not over")
)

// Defaults of Options.
const (
	DefaultLockTTL = 30 * time.Second
	// DefaultSettle exceeds how long a row can take from its created_at to
	// its commit: a transaction attempt lasts at most ledgerdb.MaxTxAge,
	// and a batch is retried for a few attempts.
	DefaultSettle = time.Minute
)

// Options describe one export.
type Options struct {
	Period    ledger.Period
	Merchants []string // empty: every merchant with a balance row
	Format    string   // FormatCSV or FormatJSONL
	// Out is the file to write (through a temporary file beside it,
	// renamed when complete), or "-" for Stdout. An existing directory
	// gets a file named after the period (FileName).
	Out    string
	Stdout io.Writer
	// Wait is how long to wait for another export of the same job; 0
	// refuses at once (ErrBusy).
	Wait    time.Duration
	LockTTL time.Duration // of the job lock (default DefaultLockTTL)
	Settle  time.Duration // see ErrPeriodOpen (default DefaultSettle; negative: none)
	Page    int           // merchants per page of the snapshot (default ledgerdb.DefaultStatementPage)
	Logger  *zap.Logger
}

func (o *Options) setDefaults() {
	o.LockTTL = cmp.Or(o.LockTTL, DefaultLockTTL)
	o.Settle = cmp.Or(o.Settle, DefaultSettle)
	o.Settle = max(o.Settle, 0)
	o.Logger = cmp.Or(o.Logger, zap.NewNop())
	o.Format = cmp.Or(o.Format, FormatJSONL)
}

// Validate reports every problem of o at once.
func (o Options) Validate() error {
	var errs []error
	if !o.Period.To.After(o.Period.From) {
		errs = append(errs, fmt.Errorf("the period ends (%s) before it starts (%s)", timeText(o.Period.To), timeText(o.Period.From)))
	}
	if o.Format != "" && o.Format != FormatCSV && o.Format != FormatJSONL {
		errs = append(errs, fmt.Errorf("format %q is not csv or jsonl", o.Format))
	}
	if o.Out == "" {
		errs = append(errs, errors.New("no output (a file, a directory or -)"))
	}
	if o.Wait < 0 || o.LockTTL < 0 || (o.LockTTL > 0 && o.LockTTL < 10*time.Millisecond) {
		errs = append(errs, fmt.Errorf("wait %v and lock TTL %v: the wait must not be negative, the TTL at least 10ms", o.Wait, o.LockTTL))
	}
	return errors.Join(errs...)
}

// Summary is what an export wrote.
type Summary struct {
	Path     string // the file written; "-" for Stdout
	Trailer  Trailer
	AsOf     time.Time // the snapshot's time
	Duration time.Duration
}

// Locker takes the job lock (*lock.Client).
type Locker interface {
	Obtain(ctx context.Context, key string, ttl time.Duration) (*lock.Lock, error)
	Wait(ctx context.Context, keys []string, ttl time.Duration) (*lock.Lock, error)
}

// Export writes one export. Its errors: ErrBusy; ErrPeriodOpen;
// ledger.ErrTieOut (a *ledger.TieOutError names the merchant);
// ledger.ErrUnknownMerchant (a listed merchant); lock.ErrLost when the job
// lock was lost meanwhile (looked at once more before the rename: a file
// appears only while the lock is held); others are failures. On any error
// no file is left (Stdout then ends without a trailer).
func Export(ctx context.Context, db *sql.DB, locks Locker, keys keyspace.Keyspace, o Options) (Summary, error) {
	start := time.Now()
	o.setDefaults()
	if err := o.Validate(); err != nil {
		return Summary{}, fmt.Errorf("statement: %w", err)
	}
	held, stop, err := obtain(ctx, locks, keys.ExportLock(JobID(o.Period, o.Merchants)), o)
	if err != nil {
		return Summary{}, err
	}
	defer stop()
	defer func() {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		if err := held.Release(rctx); err != nil && !errors.Is(err, lock.ErrNotHeld) {
			o.Logger.Warn("statement: release the job lock", zap.Error(err))
		}
	}()
	out, err := create(o)
	if err != nil {
		return Summary{}, err
	}
	sum, err := write(held.Context(), db, out, o)
	if err == nil {
		err = context.Cause(held.Context()) // lost between the last row and here
	}
	if err == nil {
		err = out.commit()
	}
	if err != nil {
		out.abort()
		if cause := context.Cause(held.Context()); errors.Is(cause, lock.ErrLost) {
			err = fmt.Errorf("statement: export stopped, its output removed: %w", cause)
		}
		return Summary{}, err
	}
	sum.Path, sum.Duration = out.path, time.Since(start)
	o.Logger.Info("statement: export written", zap.String("path", sum.Path), zap.Int64("merchants", sum.Trailer.Merchants),
		zap.Int64("rows", sum.Trailer.Rows), zap.String("sha256", sum.Trailer.SHA256), zap.Duration("duration", sum.Duration))
	return sum, nil
}

// JobID names the job of a period and merchant set: the same for the same
// period and set, whatever the order or repetition of the merchants.
func JobID(p ledger.Period, merchants []string) string {
	set := "all"
	if len(merchants) > 0 {
		h := sha256.Sum256([]byte(strings.Join(slices.Compact(slices.Sorted(slices.Values(merchants))), "\n")))
		set = hex.EncodeToString(h[:8])
	}
	return timeText(p.From) + "/" + timeText(p.To) + "/" + set
}

// obtain takes the job lock, waiting up to o.Wait. The lock's Context lives
// under ctx until the returned stop is called (after Release).
func obtain(ctx context.Context, locks Locker, key string, o Options) (*lock.Lock, func(), error) {
	var held *lock.Lock
	var err error
	lctx, stop := context.WithCancel(ctx)
	if o.Wait == 0 {
		held, err = locks.Obtain(lctx, key, o.LockTTL)
	} else {
		timer := time.AfterFunc(o.Wait, stop) // a wait that runs out ends like a cancelled one
		held, err = locks.Wait(lctx, []string{key}, o.LockTTL)
		if !timer.Stop() && err == nil {
			_ = held.Release(context.WithoutCancel(ctx))
			held, err = nil, lock.ErrNotObtained
		}
	}
	if err != nil {
		stop()
		if errors.Is(err, lock.ErrNotObtained) && ctx.Err() == nil {
			return nil, nil, fmt.Errorf("%w (job lock %s)", ErrBusy, key)
		}
		return nil, nil, fmt.Errorf("statement: job lock: %w", err)
	}
	return held, stop, nil
}

// FileName is the name of an export's file in a directory.
func FileName(p ledger.Period, format string) string {
	const compact = "20060102T150405Z"
	return "statements-" + p.From.UTC().Format(compact) + "-" + p.To.UTC().Format(compact) + "." + format
}

// output is where an export goes: a temporary file renamed at the end, or
// Stdout.
type output struct {
	w    io.Writer
	f    *os.File // nil: Stdout
	path string   // the final name
}

func create(o Options) (*output, error) {
	if o.Out == "-" {
		return &output{w: cmp.Or[io.Writer](o.Stdout, os.Stdout), path: "-"}, nil
	}
	path := o.Out
	if fi, err := os.Stat(path); err == nil && fi.IsDir() {
		path = filepath.Join(path, FileName(o.Period, o.Format))
	}
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*.tmp")
	if err != nil {
		return nil, fmt.Errorf("statement: %w", err)
	}
	return &output{w: f, f: f, path: path}, nil
}

// commit makes the file durable and gives it its name.
func (o *output) commit() error {
	if o.f == nil {
		return nil
	}
	err := o.f.Sync()
	if cerr := o.f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(o.f.Name(), o.path)
	}
	if err == nil {
		err = syncDir(filepath.Dir(o.path))
	}
	if err != nil {
		return fmt.Errorf("statement: %w", err)
	}
	return nil
}

func (o *output) abort() {
	if o.f != nil {
		_ = o.f.Close()
		_ = os.Remove(o.f.Name())
	}
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// write streams the snapshot through the checks into the encoder.
func write(ctx context.Context, db *sql.DB, out *output, o Options) (Summary, error) {
	enc, err := newEncoder(o.Format, out.w)
	if err != nil {
		return Summary{}, err
	}
	var sum Summary
	t := Trailer{ByKind: make(map[ledger.Kind]ledger.KindTotal)}
	var cur *ledger.Statement
	var bal ledger.Balance
	opened := false
	openOnce := func() error {
		if opened {
			return nil
		}
		opened = true
		return enc.opening(cur.MerchantID, cur.Opening)
	}
	finish := func() error {
		if cur == nil {
			return nil
		}
		if err := cur.Finish(bal); err != nil {
			return err
		}
		if err := openOnce(); err != nil {
			return err
		}
		if err := enc.totals(cur.MerchantID, cur.Rows, cur.Totals); err != nil {
			return err
		}
		t.Merchants++
		t.Rows += cur.Rows
		for k, v := range cur.Totals {
			all := t.ByKind[k]
			all.Count += v.Count
			all.Amount += v.Amount
			t.ByKind[k] = all
		}
		return enc.closing(cur.MerchantID, cur.Closing)
	}
	err = ledgerdb.ReadStatements(ctx, db, o.Merchants, o.Page, ledgerdb.StatementVisitor{
		Start: func(asOf time.Time) error {
			sum.AsOf = asOf
			if o.Period.To.After(asOf.Add(-o.Settle)) {
				return fmt.Errorf("%w: it ends at %s, the snapshot is of %s and rows take up to %v to commit",
					ErrPeriodOpen, timeText(o.Period.To), timeText(asOf), o.Settle)
			}
			return enc.start(o.Period, asOf)
		},
		Merchant: func(b ledger.Balance) error {
			if err := finish(); err != nil {
				return err
			}
			cur, bal, opened = ledger.NewStatement(b.MerchantID, o.Period), b, false
			return nil
		},
		Row: func(r *ledger.Row) error {
			place, err := cur.Add(r)
			if err != nil || place != ledger.Within {
				return err
			}
			if err := openOnce(); err != nil {
				return err
			}
			return enc.row(r)
		},
	})
	if err == nil {
		err = finish()
	}
	if err == nil {
		t, err = enc.trailer(t)
	}
	if err == nil {
		err = enc.flush()
	}
	if err != nil {
		return Summary{}, err
	}
	sum.Trailer = t
	return sum, nil
}
