package ledger

import (
	"errors"
	"fmt"
	"time"

	"gorm.io/gorm"
)

// IDSource issues unique ledger row ids (Snowflake ids in production).
// NextIDs fills every element of dst or returns an error.
type IDSource interface {
	NextIDs(dst []int64) error
}

// Options tunes a Store. The zero value is valid.
type Options struct {
	// Attempts is how many times a transaction is tried when MySQL reports a
	// deadlock or a lock wait timeout (default 5).
	Attempts int
	// Backoff is the first pause between attempts; it doubles each time, with
	// jitter (default 5ms).
	Backoff time.Duration
	// InsertChunk is the most rows one INSERT statement carries (default 1000).
	InsertChunk int
}

func (o *Options) setDefaults() {
	if o.Attempts <= 0 {
		o.Attempts = 5
	}
	if o.Backoff <= 0 {
		o.Backoff = 5 * time.Millisecond
	}
	if o.InsertChunk <= 0 {
		o.InsertChunk = 1000
	}
}

// Store reads and writes the ledger and the balances.
type Store struct {
	db      *gorm.DB
	ids     IDSource
	metrics *Metrics
	opts    Options
	now     func() time.Time
}

// New returns a Store on db. ids issues the primary keys of new rows; m may be
// nil (metrics are then kept but not registered anywhere).
func New(db *gorm.DB, ids IDSource, m *Metrics, opts Options) (*Store, error) {
	if db == nil {
		return nil, errors.New("ledger: nil *gorm.DB")
	}
	if ids == nil {
		return nil, errors.New("ledger: nil IDSource")
	}
	if m == nil {
		var err error
		if m, err = NewMetrics(nil); err != nil {
			return nil, err
		}
	}
	opts.setDefaults()
	// Hooks are not used and statements run inside our own transactions:
	// skipping GORM's implicit ones avoids SAVEPOINTs in CreateInBatches.
	db = db.Session(&gorm.Session{SkipDefaultTransaction: true, SkipHooks: true})
	return &Store{db: db, ids: ids, metrics: m, opts: opts, now: time.Now}, nil
}

// assignIDs gives every row with a zero ID a fresh one, in one call to the IDSource.
func (s *Store) assignIDs(rows []Row) error {
	n := 0
	for i := range rows {
		if rows[i].ID == 0 {
			n++
		}
	}
	if n == 0 {
		return nil
	}
	ids := make([]int64, n)
	if err := s.ids.NextIDs(ids); err != nil {
		return fmt.Errorf("ledger: row ids: %w", err)
	}
	j := 0
	for i := range rows {
		if rows[i].ID == 0 {
			rows[i].ID = ids[j]
			j++
		}
	}
	return nil
}
