// Package outbox is the relay of balance events: it publishes the rows the
// ledger's transactions wrote to quota_outbox, in seq order, with kafka-go,
// then marks them sent and later prunes them. Delivery is at least once: a
// crash between the broker's acknowledgement and the mark publishes a row
// again, with the same id; consumers dedupe by id. One relay of all running
// workers of a database publishes at a time (a MySQL named lock held by its connection), so
// a merchant's events reach the topic in its ledger order; the others' commits
// wake it through Redis (Wakes).
package outbox

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/cenkalti/backoff/v4"
	"github.com/segmentio/kafka-go"
	"go.uber.org/zap"

	"github.com/quotaflow/billing/internal/quotaevent"
)

// Writer publishes messages (a *kafka.Writer, synchronous, acks=all).
type Writer interface {
	WriteMessages(ctx context.Context, msgs ...kafka.Message) error
}

// Config tunes a Relay. The zero value is valid.
type Config struct {
	BatchSize int // rows per publish (default 500)
	// Poll is how often an idle relay looks for rows nobody announced (Wake,
	// after a commit of its own process or, through Wakes, of another, looks
	// at once): a long timer, since looking costs MySQL a query (default 5s).
	Poll time.Duration
	// Standby is how often a relay without the lock tries to take it: how
	// soon another takes over when the active one stops (default 2s).
	Standby   time.Duration
	Retention time.Duration // how long sent rows stay before they are pruned (0: at the next prune)
	// PruneEvery is how often, while rows come, sent rows are pruned and the
	// backlog counted (default 5s); with none since, every idleHousekeep.
	PruneEvery time.Duration
	// Wakes, if set, carry this process's commits to the relay that leads,
	// and another process's to this one while it leads.
	Wakes Wakes
}

// idleHousekeep is how often a relay that saw no row prunes and counts:
// what it last pruned and counted has not changed but for other processes'
// rows, which a Poll finds anyway.
const idleHousekeep = time.Minute

func (c *Config) setDefaults() {
	if c.BatchSize <= 0 {
		c.BatchSize = 500
	}
	if c.Poll <= 0 {
		c.Poll = 5 * time.Second
	}
	if c.Standby <= 0 {
		c.Standby = 2 * time.Second
	}
	c.Retention = max(c.Retention, 0)
	if c.PruneEvery <= 0 {
		c.PruneEvery = 5 * time.Second
	}
}

// Relay publishes the outbox. Run it once per process.
type Relay struct {
	db   *sql.DB
	w    Writer
	log  *zap.Logger
	m    *Metrics
	cfg  Config
	wake chan struct{}
	// announced asks for a PUBLISH to Wakes; leading says none is needed.
	announced chan struct{}
	leading   atomic.Bool
	now       func() time.Time
}

// New returns a Relay; m may be nil (unregistered metrics).
func New(db *sql.DB, w Writer, log *zap.Logger, m *Metrics, cfg Config) (*Relay, error) {
	if m == nil {
		var err error
		if m, err = NewMetrics(nil); err != nil {
			return nil, err
		}
	}
	if cfg.Wakes.Redis != nil && cfg.Wakes.Channel == "" {
		return nil, errors.New("outbox: Wakes has no channel")
	}
	cfg.setDefaults()
	return &Relay{db: db, w: w, log: log, m: m, cfg: cfg, wake: make(chan struct{}, 1), announced: make(chan struct{}, 1),
		now: time.Now}, nil
}

// Wake makes an idle relay look at the outbox now (after a commit of its
// process wrote to it); unless it leads, it tells the one that does
// (Wakes). It never waits.
func (r *Relay) Wake() {
	notify(r.wake)
	if r.cfg.Wakes.Redis != nil && !r.leading.Load() {
		notify(r.announced)
	}
}

// Run relays until ctx ends; it returns nil then. While another process
// holds the relay lock it waits; MySQL or broker failures are retried.
func (r *Relay) Run(ctx context.Context) error {
	if r.cfg.Wakes.Redis != nil {
		defer start(ctx, r.announce)()
	}
	bo := retryBackOff()
	for ctx.Err() == nil {
		err := r.lead(ctx)
		if ctx.Err() != nil {
			return nil
		}
		if err != nil {
			r.m.errors.WithLabelValues("mysql").Inc()
			r.log.Warn("balance-event relay: MySQL failed, retrying", zap.Error(err))
		} else {
			bo.Reset() // another process relays; look again later
		}
		if !r.sleep(ctx, max(bo.NextBackOff(), r.cfg.Standby)) {
			return nil
		}
	}
	return nil
}

// lockName is the MySQL named lock of the one active relay of a database:
// named locks are server-wide, so it names the database (hashed: a lock name
// has at most 64 characters).
const lockName = "CONCAT('quota_outbox_relay:', MD5(DATABASE()))"

// lead takes the relay lock on a connection of its own and relays while it
// holds it. nil: another process holds it, or ctx ended.
func (r *Relay) lead(ctx context.Context) error {
	c, err := r.db.Conn(ctx)
	if err != nil {
		return fmt.Errorf("outbox: connection: %w", err)
	}
	defer c.Close()
	var got sql.NullInt64
	if err := c.QueryRowContext(ctx, "SELECT GET_LOCK("+lockName+", 0)").Scan(&got); err != nil {
		return fmt.Errorf("outbox: take the relay lock: %w", err)
	}
	if got.Int64 != 1 {
		return nil
	}
	r.m.leader.Set(1)
	defer r.m.leader.Set(0)
	defer func() {
		// Closing the connection frees the lock too; this says so at once.
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
		defer cancel()
		_, _ = c.ExecContext(rctx, "DO RELEASE_LOCK("+lockName+")")
	}()
	// Until the lock goes, this process's commits need no PUBLISH (Wake
	// wakes r) and the others' arrive on the channel.
	r.leading.Store(true)
	defer r.leading.Store(false)
	if r.cfg.Wakes.Redis != nil {
		defer start(ctx, r.listen)()
	}
	return r.relay(ctx, c)
}

// relay publishes batch after batch on c (which holds the lock) until ctx
// ends (nil) or MySQL fails (its error: the lock may be gone with the
// connection). A failed publish is retried with backoff; the backlog is
// still counted meanwhile.
func (r *Relay) relay(ctx context.Context, c *sql.Conn) error {
	var pruned time.Time
	seen := true // rows since the last housekeeping; the first one runs at once
	bo := retryBackOff()
	for {
		if since := r.now().Sub(pruned); seen && since >= r.cfg.PruneEvery || since >= idleHousekeep {
			if err := r.housekeep(ctx, c); err != nil {
				return ignoreEnd(ctx, err)
			}
			pruned, seen = r.now(), false
		}
		rows, err := unsent(ctx, c, r.cfg.BatchSize)
		if err != nil {
			return ignoreEnd(ctx, err)
		}
		seen = seen || len(rows) > 0
		wait := r.cfg.Poll
		if len(rows) > 0 {
			if err := r.publish(ctx, rows); err != nil {
				if ctx.Err() != nil {
					return nil
				}
				wait = bo.NextBackOff()
				r.m.errors.WithLabelValues("publish").Inc()
				r.log.Warn("balance events not published, retrying", zap.Int("events", len(rows)),
					zap.String("first_id", rows[0].event.ID), zap.Duration("wait", wait), zap.Error(err))
				if !r.sleep(ctx, wait) {
					return nil
				}
				continue
			}
			bo.Reset()
			if err := markSent(ctx, c, rows, r.now().UTC()); err != nil {
				return ignoreEnd(ctx, err)
			}
		}
		if len(rows) < r.cfg.BatchSize && !r.idle(ctx, wait) {
			return nil
		}
	}
}

// publish writes rows in one synchronous request set (acks=all).
func (r *Relay) publish(ctx context.Context, rows []row) error {
	msgs := make([]kafka.Message, 0, len(rows))
	for _, row := range rows {
		msgs = append(msgs, kafka.Message{Key: []byte(row.event.MerchantID), Value: quotaevent.Encode(row.event)})
	}
	if err := r.w.WriteMessages(ctx, msgs...); err != nil {
		return fmt.Errorf("outbox: publish %d events: %w", len(msgs), err)
	}
	r.m.published.Add(float64(len(msgs)))
	return nil
}

// housekeep prunes sent rows past the retention and counts the backlog.
func (r *Relay) housekeep(ctx context.Context, c *sql.Conn) error {
	n, err := prune(ctx, c, r.now().UTC().Add(-r.cfg.Retention))
	r.m.pruned.Add(float64(n))
	if err != nil {
		return err
	}
	count, oldest, err := backlog(ctx, c)
	if err != nil {
		return err
	}
	r.m.unsent.Set(float64(count))
	age := 0.0
	if count > 0 {
		age = max(r.now().Sub(oldest).Seconds(), 0)
	}
	r.m.oldestSeconds.Set(age)
	return nil
}

// idle waits for d or a Wake; false when ctx ended.
func (r *Relay) idle(ctx context.Context, d time.Duration) bool { return wait(ctx, d, r.wake) }

// sleep waits for d; false when ctx ended.
func (r *Relay) sleep(ctx context.Context, d time.Duration) bool { return wait(ctx, d, nil) }

// wait waits for d or a value on wake (nil: none); false when ctx ended.
func wait(ctx context.Context, d time.Duration, wake <-chan struct{}) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-wake:
	case <-t.C:
	}
	return true
}

// retryBackOff is the wait between the relay's retries: from 100 ms up to 5 s, for ever.
func retryBackOff() *backoff.ExponentialBackOff {
	return backoff.NewExponentialBackOff(backoff.WithInitialInterval(100*time.Millisecond), backoff.WithMaxInterval(5*time.Second),
		backoff.WithMaxElapsedTime(0))
}

// ignoreEnd turns an error caused by ctx ending into nil.
func ignoreEnd(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return nil
	}
	return err
}
