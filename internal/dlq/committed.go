package dlq

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kgo"
)

// ReadConfig configures ReadCommitted.
type ReadConfig struct {
	Brokers []string
	Opts    []kgo.Opt // client ID, TLS, SASL (dial.Kafka.Franz)
	Topic   string
	// PollWait bounds one wait for records before the stall check (1s by default).
	PollWait time.Duration
	// Stall fails the read when nothing arrives for this long while offsets
	// of the range remain (30s by default): an unreachable broker must not
	// pass for an empty partition. It must exceed the writers' transaction
	// timeout, for which an open transaction may hold records back.
	Stall    time.Duration
	MaxBytes int // most bytes per partition fetch (4 MiB by default)
}

// ReadCommitted calls fn, in offset order, for every record of rg that a
// read_committed consumer sees: committed and non-transactional records, not
// those of aborted transactions nor transaction markers. kafka-go's readers
// return both of those as messages, so the dead-letter topic, written in
// transactions, is read with franz-go here.
//
// The range is done once an offset at or past its last one has been seen,
// markers included: every aborted record is followed by its transaction's
// marker, so the end shows even when the range ends in aborted records. An
// open transaction holds the read back until it ends (the writers' timeout
// bounds that). fn returning an error ends the read with that error.
func ReadCommitted(ctx context.Context, c ReadConfig, rg Range, fn func(kafka.Message) error) error {
	if rg.Len() == 0 {
		return nil
	}
	if c.PollWait <= 0 {
		c.PollWait = time.Second
	}
	if c.Stall <= 0 {
		c.Stall = 30 * time.Second
	}
	if c.MaxBytes <= 0 {
		c.MaxBytes = 4 << 20
	}
	opts := append(slices.Clip(c.Opts),
		kgo.SeedBrokers(c.Brokers...),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.KeepControlRecords(), // the markers tell where a range ending in aborted records ends
		kgo.FetchMaxWait(min(c.PollWait, 500*time.Millisecond)),
		kgo.FetchMaxPartitionBytes(int32(c.MaxBytes)),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{
			c.Topic: {int32(rg.Partition): kgo.NewOffset().At(rg.From)},
		}),
	)
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return fmt.Errorf("dlq: reader of %s/%d: %w", c.Topic, rg.Partition, err)
	}
	defer cl.Close()
	next, progress := rg.From, time.Now()
	for next < rg.To {
		pctx, cancel := context.WithTimeout(ctx, c.PollWait)
		fs := cl.PollFetches(pctx)
		cancel()
		if ctx.Err() != nil {
			return ctx.Err()
		}
		var fetchErr error
		fs.EachError(func(_ string, _ int32, err error) {
			if !errors.Is(err, context.DeadlineExceeded) && fetchErr == nil {
				fetchErr = err
			}
		})
		if fetchErr != nil {
			return fmt.Errorf("dlq: read %s/%d at offset %d: %w", c.Topic, rg.Partition, next, fetchErr)
		}
		seen := false
		for it := fs.RecordIter(); !it.Done(); {
			r := it.Next()
			if r.Offset < next {
				continue
			}
			seen, next = true, r.Offset+1
			if r.Attrs.IsControl() || r.Offset >= rg.To {
				continue
			}
			if err := ctx.Err(); err != nil { // as a reader would, once fn cancelled it
				return err
			}
			if err := fn(fromRecord(r)); err != nil {
				return err
			}
		}
		if seen {
			progress = time.Now()
		} else if time.Since(progress) > c.Stall {
			return fmt.Errorf("dlq: %s/%d delivered nothing for %s at offset %d (range end %d)", c.Topic, rg.Partition, c.Stall, next, rg.To)
		}
	}
	return nil
}
