package ledgerdb

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/quotaflow/billing/internal/ledger"
)

// Merchants that share nothing, each alone as under its lock, grant and then
// use up each grant (every debit crosses the head: the grants' slow path).
// Grant transactions lock the grant rows they read and no gap beside them, so
// they never deadlock with their neighbours' (under REPEATABLE READ this ran
// 25–51 deadlock retries and gave up on some grants).
func TestNeighbouringMerchantsGrantWithoutDeadlocks(t *testing.T) {
	s, _ := newStore(t)
	ctx := context.Background()
	const merchants, rounds = 16, 40
	var wg sync.WaitGroup
	errs := make(chan error, merchants)
	for m := range merchants {
		wg.Add(1)
		go func() {
			defer wg.Done()
			id := fmt.Sprintf("m%02d", m)
			for i := range rounds {
				if _, err := s.Grant(ctx, []ledger.Credit{{ID: fmt.Sprintf("g-%s-%d", id, i), MerchantID: id, Amount: 10, Priority: 50 - i%3}}); err != nil {
					errs <- err
					return
				}
				if err := s.Commit(ctx, []ledger.Row{debit(fmt.Sprintf("e-%s-%d", id, i), id, 10)}); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if n := counterValue(t, s.metrics.deadlockRetries); n != 0 {
		t.Errorf("%v deadlock or lock-wait retries between merchants that share nothing", n)
	}
}
