package dlq

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// ErrFenced means a writer opened later under the same transactional ID took
// over: this one's open transaction was aborted and it may write no more.
var ErrFenced = errors.New("dlq: fenced by a newer writer of the same transactional ID")

// errBroken is returned by the writes after a failed one.
var errBroken = errors.New("dlq: writer unusable after a failed write; open a new one")

// TxnWriter writes dead-letter records to one topic in Kafka transactions
// under one transactional ID. It exists for fencing: a consumer that owns a
// partition writes that partition's dead-letter records under an ID of the
// partition's own, so that whoever owns it next, on opening its writer,
// aborts the previous owner's open transaction and makes every later write
// of the previous owner fail, even one from a process frozen past its group
// session that wakes up still believing it owns the partition. Records are
// visible to read_committed readers (ReadCommitted) only once their
// transaction commits.
//
// Writes are serialized. After a failed write the writer is unusable (its
// transaction's outcome may be unknown): close it and open a new one, which
// aborts whatever the old one left open.
type TxnWriter struct {
	cl      *kgo.Client
	timeout time.Duration

	mu     sync.Mutex
	broken error
}

// TxnConfig configures OpenTxnWriter.
type TxnConfig struct {
	Brokers []string
	Opts    []kgo.Opt // client ID, TLS, SASL (dial.Kafka.Franz)
	Topic   string
	ID      string // transactional ID
	// Timeout is the broker's transaction timeout, after which it aborts a
	// transaction its writer left open (a crash), and also the bound of one
	// Write.
	Timeout time.Duration
}

// OpenTxnWriter registers the transactional ID with the broker, which fences
// every earlier writer of that ID and aborts its open transaction, and
// returns the writer. It fails when ctx ends first.
func OpenTxnWriter(ctx context.Context, c TxnConfig) (*TxnWriter, error) {
	if len(c.Brokers) == 0 {
		return nil, ErrNoBrokers
	}
	if c.ID == "" || c.Topic == "" || c.Timeout <= 0 {
		return nil, fmt.Errorf("dlq: transactional writer needs an ID, a topic and a timeout (got %q, %q, %v)", c.ID, c.Topic, c.Timeout)
	}
	opts := append(slices.Clip(c.Opts),
		kgo.SeedBrokers(c.Brokers...),
		kgo.TransactionalID(c.ID),
		kgo.TransactionTimeout(c.Timeout),
		kgo.DefaultProduceTopic(c.Topic),
		kgo.ProducerLinger(0),                                // writes are synchronous: do not wait for company
		kgo.RecordPartitioner(kgo.StickyKeyPartitioner(nil)), // keep a key's records together
	)
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return nil, fmt.Errorf("dlq: transactional writer %s: %w", c.ID, err)
	}
	if _, _, err := cl.ProducerID(ctx); err != nil {
		cl.Close()
		return nil, fmt.Errorf("dlq: register transactional ID %s: %w", c.ID, classify(err))
	}
	return &TxnWriter{cl: cl, timeout: c.Timeout}, nil
}

// Write publishes msgs (their Key, Value, Headers and Time) in one
// transaction and commits it. An error wraps ErrFenced when a newer writer
// took over; after any error the writer is unusable, and whether the records
// were committed is unknown unless the error is ErrFenced (then they were
// not).
func (w *TxnWriter) Write(ctx context.Context, msgs []kafka.Message) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.broken != nil {
		return w.broken
	}
	err := w.write(ctx, msgs)
	if err != nil {
		w.broken = fmt.Errorf("%w (%w)", errBroken, err)
	}
	return err
}

func (w *TxnWriter) write(ctx context.Context, msgs []kafka.Message) error {
	ctx, cancel := context.WithTimeout(ctx, w.timeout)
	defer cancel()
	if err := w.cl.BeginTransaction(); err != nil {
		return fmt.Errorf("dlq: begin transaction: %w", classify(err))
	}
	recs := make([]*kgo.Record, len(msgs))
	for i, m := range msgs {
		recs[i] = toRecord(m)
	}
	res := w.cl.ProduceSync(ctx, recs...)
	if err := res.FirstErr(); err != nil {
		err = classify(err)
		if !errors.Is(err, ErrFenced) {
			w.abort()
		}
		return fmt.Errorf("dlq: produce in transaction: %w", err)
	}
	if err := w.awaitPartitionsKnown(ctx, res); err != nil {
		return err
	}
	if err := w.cl.EndTransaction(ctx, kgo.TryCommit); err != nil {
		return fmt.Errorf("dlq: commit transaction: %w", classify(err))
	}
	return nil
}

// awaitPartitionsKnown waits until the client lists, among the partitions it
// produces to, every partition res was written to. EndTransaction commits
// the partitions of that list only, and the first records produced to a topic
// can be acknowledged before their partitions are in it (franz-go v1.22.3,
// seen about once in two hundred fresh writers on a loaded machine). Finding
// nothing to commit, EndTransaction then skips the commit (or, with KIP-890
// brokers, aborts) and reports success: a dead-letter record acknowledged and
// never visible. The first write of every writer, which a new generation
// opens, is that case.
func (w *TxnWriter) awaitPartitionsKnown(ctx context.Context, res kgo.ProduceResults) error {
	for _, r := range res {
		for {
			if leader, _, _ := w.cl.PartitionLeader(r.Record.Topic, r.Record.Partition); leader >= 0 {
				break
			}
			select {
			case <-ctx.Done():
				return fmt.Errorf("dlq: partition %s/%d unknown to the producer after its write: %w", r.Record.Topic, r.Record.Partition, ctx.Err())
			case <-time.After(time.Millisecond):
			}
		}
	}
	return nil
}

// abort ends the open transaction after a failed produce, best effort and
// briefly: left open, it would hold back every read_committed reader of its
// partitions until the writer's replacement or the broker aborts it.
func (w *TxnWriter) abort() {
	ctx, cancel := context.WithTimeout(context.Background(), min(w.timeout, 2*time.Second))
	defer cancel()
	if err := w.cl.AbortBufferedRecords(ctx); err != nil {
		return
	}
	_ = w.cl.EndTransaction(ctx, kgo.TryAbort) // a failure leaves it to the replacement writer
}

// Close releases the writer's connections. A transaction it left open is
// aborted by the broker at its timeout, or at once by the next writer of the
// same ID. Close may be called while a Write runs: the Write then fails.
func (w *TxnWriter) Close() {
	w.cl.Close()
}

// classify marks the broker's fencing answers with ErrFenced.
func classify(err error) error {
	if errors.Is(err, kerr.ProducerFenced) || errors.Is(err, kerr.InvalidProducerEpoch) {
		return fmt.Errorf("%w: %w", ErrFenced, err)
	}
	return err
}

func toRecord(m kafka.Message) *kgo.Record {
	r := &kgo.Record{Key: m.Key, Value: m.Value, Timestamp: m.Time}
	if len(m.Headers) > 0 {
		r.Headers = make([]kgo.RecordHeader, len(m.Headers))
		for i, h := range m.Headers {
			r.Headers[i] = kgo.RecordHeader{Key: h.Key, Value: h.Value}
		}
	}
	return r
}

func fromRecord(r *kgo.Record) kafka.Message {
	m := kafka.Message{
		Topic: r.Topic, Partition: int(r.Partition), Offset: r.Offset,
		Key: r.Key, Value: r.Value, Time: r.Timestamp,
	}
	if len(r.Headers) > 0 {
		m.Headers = make([]kafka.Header, len(r.Headers))
		for i, h := range r.Headers {
			m.Headers[i] = kafka.Header{Key: h.Key, Value: h.Value}
		}
	}
	return m
}
