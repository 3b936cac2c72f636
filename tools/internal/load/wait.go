package load

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"sync/atomic"
	"time"

	"github.com/segmentio/kafka-go"
	"go.uber.org/zap"
)

// pollEvery is how often the ledger is polled: the end of a run is known to
// this precision (0.4% of a 5-second run), for about a millisecond of
// MariaDB's CPU per poll.
const pollEvery = 20 * time.Millisecond

// target is the debited total and the count of refunds that mean every
// event is in, once known (a paced run knows it when its producer is done).
type target struct{ atomic.Pointer[goal] }

type goal struct {
	debited int64
	refunds int
}

func (t *target) set(debited int64, refunds int) { t.Store(&goal{debited, refunds}) }

// waitLedger polls until merchant_balance's debited total reaches the target
// and quota_refunds holds every refund (applied, or waiting for a payment
// the run never sent): every event has its ledger row (nothing is
// rejected, the quota is ample, and a row and its debit commit together). It fails when a worker exits,
// when the total has not moved for stall while events are outstanding, or
// when ctx ends, naming what it waited for.
func waitLedger(ctx context.Context, db *sql.DB, t *target, workers []*workerProc, stall time.Duration, log *zap.Logger) (time.Time, error) {
	tick := time.NewTicker(pollEvery)
	defer tick.Stop()
	var last int64 = -1
	lastRefunds := -1
	moved, reported := time.Now(), time.Now()
	for {
		var debited int64
		var refunds int
		err := db.QueryRowContext(ctx, "SELECT COALESCE(SUM(debited), 0), (SELECT COUNT(*) FROM quota_refunds) FROM merchant_balance").Scan(&debited, &refunds)
		now := time.Now()
		if err == nil {
			if v := t.Load(); v != nil && debited >= v.debited && refunds >= v.refunds {
				return now, nil
			}
			if debited != last || refunds != lastRefunds {
				last, lastRefunds, moved = debited, refunds, now
			}
		}
		for _, w := range workers {
			if err := w.exited(); err != nil {
				return now, err
			}
		}
		waiting := fmt.Sprintf("the ledger: debited %d and %d refunds of %s (%v)", last, lastRefunds, targetText(t), err)
		if now.Sub(moved) > stall {
			return now, fmt.Errorf("load: no ledger progress for %v waiting for %s", stall, waiting)
		}
		if now.Sub(reported) >= 5*time.Second {
			reported = now
			log.Info("waiting for the ledger", zap.Int64("debited", last), zap.String("target", targetText(t)))
		}
		select {
		case <-ctx.Done():
			return now, fmt.Errorf("load: waiting for %s: %w", waiting, ctx.Err())
		case <-tick.C:
		}
	}
}

func targetText(t *target) string {
	if v := t.Load(); v != nil {
		return fmt.Sprintf("%d (and %d refunds)", v.debited, v.refunds)
	}
	return "a total not known yet (still producing)"
}

// waitGroup waits until the consumer group is stable with n members that
// all hold partitions of topic, so a paced schedule starts on consuming
// workers, not on a group still forming.
func waitGroup(ctx context.Context, c *kafka.Client, group, topic string, n int, workers []*workerProc, limit time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	state := "not described yet"
	for {
		resp, err := c.DescribeGroups(ctx, &kafka.DescribeGroupsRequest{GroupIDs: []string{group}})
		switch {
		case err != nil:
			state = err.Error()
		case len(resp.Groups) != 1:
			state = fmt.Sprintf("%d groups described", len(resp.Groups))
		default:
			g := resp.Groups[0]
			assigned := 0
			for _, m := range g.Members {
				for _, t := range m.MemberAssignments.Topics {
					if t.Topic == topic && len(t.Partitions) > 0 {
						assigned++
					}
				}
			}
			state = fmt.Sprintf("state %q, %d members, %d with partitions", g.GroupState, len(g.Members), assigned)
			if g.GroupState == "Stable" && len(g.Members) == n && assigned == n {
				return nil
			}
		}
		for _, w := range workers {
			if err := w.exited(); err != nil {
				return err
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("load: waited %v for consumer group %s to be stable with %d members holding partitions (last: %s): %w", limit, group, n, state, ctx.Err())
		case <-tick.C:
		}
	}
}

// runRows counts the payments' ledger rows the workers wrote (ids after the
// fill's; refund rows aside) and when the first and the last of them or of
// the refund rows began their commit.
func runRows(ctx context.Context, db *sql.DB, after int64) (rows, rejected int64, first, last time.Time, err error) {
	var f, l sql.NullTime
	err = db.QueryRowContext(ctx, "SELECT COALESCE(SUM(kind <> 'refund'), 0), COALESCE(SUM(kind = 'rejected'), 0), MIN(created_at), MAX(created_at) FROM quota_ledger WHERE id > ? AND kind IN ('debit', 'rejected', 'refund')", after).
		Scan(&rows, &rejected, &f, &l)
	if err != nil {
		return 0, 0, first, last, fmt.Errorf("load: count the run's ledger rows: %w", err)
	}
	return rows, rejected, f.Time, l.Time, nil
}

// latency reads produce->ledger latency of the run's rows due from the
// schedule's start plus warmup on, and its two legs for each event: due time
// to the broker's acknowledgement (ackedAt), and that to its row.
func latency(ctx context.Context, db *sql.DB, after int64, start time.Time, warmup time.Duration, p *produced) (total, ack, afterAck Latency, err error) {
	q := "SELECT TIMESTAMPDIFF(MICROSECOND, ?, occurred_at), TIMESTAMPDIFF(MICROSECOND, ?, created_at) FROM quota_ledger WHERE id > ?"
	rows, err := db.QueryContext(ctx, q, start.UTC(), start.UTC(), after)
	if err != nil {
		return total, ack, afterAck, fmt.Errorf("load: read latencies: %w", err)
	}
	defer rows.Close()
	var us, toAck, fromAck []int64
	skipped := 0
	for rows.Next() {
		var due, created int64
		if err := rows.Scan(&due, &created); err != nil {
			return total, ack, afterAck, fmt.Errorf("load: read latencies: %w", err)
		}
		if due < warmup.Microseconds() {
			skipped++
			continue
		}
		us = append(us, created-due)
		if k, ok := p.seq(due); ok && p.ackedAt[k] > 0 {
			toAck = append(toAck, p.ackedAt[k]-due)
			fromAck = append(fromAck, created-p.ackedAt[k])
		}
	}
	if err := rows.Err(); err != nil {
		return total, ack, afterAck, fmt.Errorf("load: read latencies: %w", err)
	}
	if len(us) == 0 {
		return total, ack, afterAck, errors.New("load: no event due after the warm-up: make the run longer than --warmup")
	}
	total, ack, afterAck = summarize(us), summarize(toAck), summarize(fromAck)
	total.WarmupSkipped, ack.WarmupSkipped, afterAck.WarmupSkipped = skipped, skipped, skipped
	return total, ack, afterAck, nil
}

// summarize sorts latencies in microseconds and takes their quantiles.
func summarize(us []int64) Latency {
	if len(us) == 0 {
		return Latency{}
	}
	slices.Sort(us)
	quantile := func(q float64) float64 { return float64(us[min(len(us)-1, int(q*float64(len(us))))]) / 1000 }
	l := Latency{Count: len(us), P50MS: quantile(0.5), P99MS: quantile(0.99), P999MS: quantile(0.999), MaxMS: float64(us[len(us)-1]) / 1000}
	for k := range 101 {
		l.PercentileMS = append(l.PercentileMS, quantile(float64(k)/100))
	}
	return l
}
