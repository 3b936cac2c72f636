package demo

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"time"

	"gorm.io/gorm"

	"github.com/quotaflow/billing/internal/dlq"
	"github.com/quotaflow/billing/internal/ledger"
	"github.com/quotaflow/billing/internal/quotaevent"
)

// alertPercent is the low threshold the demo sets on a few merchants.
const alertPercent = 20

// eventsSummary is what the demo read back from the balance-events topic.
type eventsSummary struct {
	Alerted  int                     // merchants with the demo's threshold
	ByType   map[quotaevent.Type]int // distinct events
	Copies   int                     // messages beyond the first of an id
	Mismatch []string                // merchants whose events differ from their ledger's
}

// setAlerts puts a low threshold on the first merchants (the hot one first).
func (r *run) setAlerts(ctx context.Context, merchants []string) error {
	a := quotaevent.Alerts{Percent: alertPercent}
	for _, m := range merchants {
		if err := r.workers[0].Path().Ledger.SetAlerts(ctx, m, &a); err != nil {
			return fmt.Errorf("demo: alerts of %s: %w", m, err)
		}
	}
	r.sum.Events.Alerted = len(merchants)
	return nil
}

// events waits for the outbox to drain, reads the balance-events topic back,
// and holds each merchant's distinct events against what its ledger rows imply.
func (r *run) events(ctx context.Context, db *gorm.DB, client *dlq.Client) error {
	for deadline := time.Now().Add(time.Minute); ; {
		var unsent int64
		if err := db.WithContext(ctx).Raw("SELECT COUNT(*) FROM quota_outbox WHERE sent_at IS NULL").Scan(&unsent).Error; err != nil {
			return fmt.Errorf("demo: outbox: %w", err)
		}
		if unsent == 0 {
			break
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("demo: %d balance events still unpublished after a minute", unsent)
		}
		time.Sleep(50 * time.Millisecond)
	}
	msgs, err := client.Messages(ctx, r.st.EventsTopic)
	if err != nil {
		return fmt.Errorf("demo: read %s: %w", r.st.EventsTopic, err)
	}
	s := &r.sum.Events
	s.ByType = map[quotaevent.Type]int{}
	seen := map[string]bool{}
	got := map[string][]string{}
	for _, m := range msgs {
		var e quotaevent.Message
		if err := json.Unmarshal(m.Value, &e); err != nil {
			return fmt.Errorf("demo: balance event %s: %w", m.Value, err)
		}
		if seen[e.ID] {
			s.Copies++
			continue
		}
		seen[e.ID] = true
		s.ByType[e.Type]++
		got[e.MerchantID] = append(got[e.MerchantID], e.ID)
	}
	var rows []ledger.Row
	if err := db.WithContext(ctx).Find(&rows).Error; err != nil {
		return err
	}
	var bals []ledger.Balance
	if err := db.WithContext(ctx).Find(&bals).Error; err != nil {
		return err
	}
	settings := map[string]ledger.Balance{}
	for _, b := range bals {
		settings[b.MerchantID] = b
	}
	// The demo's workers have no default thresholds.
	want := ledger.Replay(rows, settings, quotaevent.Alerts{})
	merchants := map[string]bool{}
	for m := range want {
		merchants[m] = true
	}
	for m := range got {
		merchants[m] = true
	}
	for _, m := range slices.Sorted(maps.Keys(merchants)) {
		var ids []string
		if rp := want[m]; rp != nil {
			for _, e := range rp.Events {
				ids = append(ids, e.ID)
			}
		}
		if strings.Join(ids, " ") != strings.Join(got[m], " ") {
			s.Mismatch = append(s.Mismatch, m)
		}
	}
	return nil
}

// write prints the events line.
func (s eventsSummary) write(w io.Writer) {
	fmt.Fprintf(w, "balance ev.  ")
	for _, t := range []quotaevent.Type{quotaevent.Granted, quotaevent.Low, quotaevent.Depleted, quotaevent.Recovered} {
		fmt.Fprintf(w, " %s=%d", strings.TrimPrefix(string(t), "quota."), s.ByType[t])
	}
	fmt.Fprintf(w, " (read back, %d copies folded by id; a %d%% threshold on %d merchants, a grant midway); ", s.Copies, alertPercent, s.Alerted)
	if len(s.Mismatch) == 0 {
		fmt.Fprintf(w, "every merchant's events are what its ledger rows imply\n")
	} else {
		fmt.Fprintf(w, "%d merchants' events differ from their ledger's: %v\n", len(s.Mismatch), s.Mismatch[:min(5, len(s.Mismatch))])
	}
}
