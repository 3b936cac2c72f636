package deduct

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"gorm.io/gorm/logger"

	"github.com/quotaflow/billing/internal/event"
	"github.com/quotaflow/billing/internal/ledger/ledgerdb"
)

// stmtCounter is a GORM logger that records every statement GORM runs.
type stmtCounter struct {
	mu    sync.Mutex
	stmts []string
}

func (c *stmtCounter) LogMode(logger.LogLevel) logger.Interface { return c }
func (c *stmtCounter) Info(context.Context, string, ...any)     {}
func (c *stmtCounter) Warn(context.Context, string, ...any)     {}
func (c *stmtCounter) Error(context.Context, string, ...any)    {}
func (c *stmtCounter) Trace(_ context.Context, _ time.Time, fc func() (string, int64), _ error) {
	sql, _ := fc()
	c.mu.Lock()
	c.stmts = append(c.stmts, sql)
	c.mu.Unlock()
}

func (c *stmtCounter) take() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := c.stmts
	c.stmts = nil
	return s
}

// TestStatementsPerBatch: no N+1. A 100-event batch over 5 merchants costs one
// existing-events query, one balance read for hydration (only when hashes are
// missing), one guarded UPDATE for all its merchants, one balance read inside
// the transaction (for balance_after) and multi-row INSERTs (100 rows: a
// prepared one of 64, a plain one of 36), in one transaction: the same number
// of statements for any number of merchants.
func TestStatementsPerBatch(t *testing.T) {
	e := newEnv(t)
	merchants := []string{"m-1", "m-2", "m-3", "m-4", "m-5"}
	for _, m := range merchants {
		e.grant(m, 1_000_000) // grants drop the hashes: the first batch hydrates
	}
	counter := &stmtCounter{}
	store, err := ledgerdb.New(e.mysql.SQL, e.ids, nil, ledgerdb.Options{Tracer: counter})
	if err != nil {
		t.Fatal(err)
	}
	d, err := New(e.redis.Client, e.redis.Keys, e.locker, store, nil, nil, Options{})
	if err != nil {
		t.Fatal(err)
	}
	batch := func(round int) []event.PaymentSucceeded {
		var b []event.PaymentSucceeded
		for i := range 100 {
			b = append(b, pay(fmt.Sprintf("r%d-e%d", round, i), merchants[i%len(merchants)], 1))
		}
		return b
	}
	for round, tc := range []struct {
		name                      string
		selects, updates, inserts int
	}{
		{"cold hashes", 3, 1, 2},
		{"warm hashes", 2, 1, 2},
	} {
		res := e.apply(d, batch(round))
		for _, r := range res {
			if r.Outcome != Applied {
				t.Fatalf("%s: outcome %+v", tc.name, r)
			}
		}
		stmts := counter.take()
		var selects, updates, inserts int
		for _, s := range stmts {
			switch strings.ToUpper(strings.Fields(s)[0]) {
			case "SELECT":
				selects++
			case "UPDATE":
				updates++
			case "INSERT":
				inserts++
			}
		}
		if selects != tc.selects || updates != tc.updates || inserts != tc.inserts || len(stmts) != tc.selects+tc.updates+tc.inserts {
			t.Errorf("%s: %d statements (%d SELECT, %d UPDATE, %d INSERT), want %d SELECT, %d UPDATE, %d INSERT:\n%s",
				tc.name, len(stmts), selects, updates, inserts, tc.selects, tc.updates, tc.inserts, short(stmts))
		}
	}
	e.checkConsistent()
}

func short(stmts []string) string {
	var b strings.Builder
	for _, s := range stmts {
		if len(s) > 120 {
			s = s[:120] + "..."
		}
		b.WriteString("  " + s + "\n")
	}
	return b.String()
}
