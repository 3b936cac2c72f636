package dlq

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kgo"
)

// rawTxnClient is a bare franz-go transactional producer, for states our
// writer never leaves behind on purpose (an aborted or dangling transaction).
func rawTxnClient(t *testing.T, c *cluster, id string) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.k.Brokers...), kgo.TransactionalID(id), kgo.TransactionTimeout(time.Minute),
		kgo.DefaultProduceTopic(c.dlqTopic), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

func produceTxn(t *testing.T, cl *kgo.Client, commit bool, values ...string) {
	t.Helper()
	if err := cl.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	for _, v := range values {
		if err := cl.ProduceSync(ctxFor(t), &kgo.Record{Value: []byte(v), Partition: 0}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	if err := cl.EndTransaction(ctxFor(t), kgo.TransactionEndTry(commit)); err != nil {
		t.Fatal(err)
	}
}

// committedValues reads every partition of the DLQ topic up to its high
// watermark as of now.
func committedValues(t *testing.T, c *cluster) []string {
	t.Helper()
	rs, err := c.c.Watermarks(ctxFor(t), c.dlqTopic)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	rc := ReadConfig{Brokers: c.k.Brokers, Topic: c.dlqTopic, PollWait: 200 * time.Millisecond, Stall: 10 * time.Second}
	for _, rg := range rs {
		err := ReadCommitted(ctxFor(t), rc, rg, func(m kafka.Message) error {
			got = append(got, string(m.Value))
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	return got
}

// kafka-go's readers deliver aborted records and transaction markers as
// messages; ReadCommitted must not, also when the range ends in an aborted
// transaction (its marker, past the aborted record, ends the range).
func TestReadCommittedSkipsAbortedAndMarkers(t *testing.T) {
	c := newCluster(t)
	cl := rawTxnClient(t, c, c.dlqTopic+"-raw")
	produceTxn(t, cl, true, "a")
	produceTxn(t, cl, false, "b1", "b2")
	produceTxn(t, cl, true, "c")
	if got := committedValues(t, c); !slices.Equal(got, []string{"a", "c"}) {
		t.Fatalf("read %q, want [a c]", got)
	}
	produceTxn(t, cl, false, "d")
	if got := committedValues(t, c); !slices.Equal(got, []string{"a", "c"}) {
		t.Fatalf("after a trailing abort: read %q, want [a c]", got)
	}
}

// A writer opened under an ID fences the earlier one: the old writer's next
// write fails with ErrFenced and is not visible; the new one writes.
func TestTxnWriterFencesEarlierWriter(t *testing.T) {
	c := newCluster(t)
	cfg := TxnConfig{Brokers: c.k.Brokers, Topic: c.dlqTopic, ID: c.dlqTopic + "-p0", Timeout: 10 * time.Second}
	old, err := OpenTxnWriter(ctxFor(t), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer old.Close()
	msg := func(v string) []kafka.Message { return []kafka.Message{{Key: []byte("k"), Value: []byte(v)}} }
	if err := old.Write(ctxFor(t), msg("before")); err != nil {
		t.Fatal(err)
	}
	next, err := OpenTxnWriter(ctxFor(t), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer next.Close()
	if err := old.Write(ctxFor(t), msg("stale")); !errors.Is(err, ErrFenced) {
		t.Fatalf("write of the fenced writer: %v, want ErrFenced", err)
	}
	if err := old.Write(ctxFor(t), msg("stale again")); !errors.Is(err, errBroken) {
		t.Fatalf("write after a failed one: %v, want errBroken", err)
	}
	if err := next.Write(ctxFor(t), msg("after")); err != nil {
		t.Fatal(err)
	}
	if got := committedValues(t, c); !slices.Equal(got, []string{"before", "after"}) {
		t.Fatalf("read %q, want [before after]", got)
	}
}

// A transaction left open (a writer frozen or killed mid-write) holds back
// read_committed readers until the broker's timeout, here a minute; opening
// the next writer of its ID aborts it at once, so the read below, which
// gives up after 10s, completes, without the dangling record.
func TestOpenTxnWriterAbortsDanglingTransaction(t *testing.T) {
	c := newCluster(t)
	id := c.dlqTopic + "-p0"
	dangling := rawTxnClient(t, c, id)
	if err := dangling.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := dangling.ProduceSync(ctxFor(t), &kgo.Record{Value: []byte("dangling"), Partition: 0}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	w, err := OpenTxnWriter(ctxFor(t), TxnConfig{Brokers: c.k.Brokers, Topic: c.dlqTopic, ID: id, Timeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if err := w.Write(ctxFor(t), []kafka.Message{{Value: []byte("after")}}); err != nil {
		t.Fatal(err)
	}
	if got := committedValues(t, c); !slices.Equal(got, []string{"after"}) {
		t.Fatalf("read %q, want [after]", got)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := dangling.EndTransaction(ctx, kgo.TryCommit); err == nil {
		t.Fatal("the fenced producer committed its transaction")
	}
}

func TestOpenTxnWriterErrors(t *testing.T) {
	if _, err := OpenTxnWriter(context.Background(), TxnConfig{Topic: "t", ID: "x", Timeout: time.Second}); !errors.Is(err, ErrNoBrokers) {
		t.Fatalf("no brokers: %v", err)
	}
	if _, err := OpenTxnWriter(context.Background(), TxnConfig{Brokers: []string{"127.0.0.1:1"}, Topic: "t"}); err == nil {
		t.Fatal("no ID and no timeout accepted")
	}
}

// Every write a fresh writer reports committed is there for read_committed
// readers. A writer's first write, the first of every generation, is where
// the client can skip the commit and report success (see
// awaitPartitionsKnown); without that wait this test loses about one write
// in two hundred on a loaded machine, so it catches a regression often, not
// always.
func TestTxnWriterFirstWritesAllCommitted(t *testing.T) {
	c := newCluster(t)
	const writers = 200
	var want []string
	for i := range writers {
		cfg := TxnConfig{Brokers: c.k.Brokers, Topic: c.dlqTopic, ID: fmt.Sprintf("%s-%d", c.dlqTopic, i%8), Timeout: 10 * time.Second}
		w, err := OpenTxnWriter(ctxFor(t), cfg)
		if err != nil {
			t.Fatal(err)
		}
		v := fmt.Sprintf("v%03d", i)
		err = w.Write(ctxFor(t), []kafka.Message{{Key: []byte(v), Value: []byte(v)}})
		w.Close()
		if err != nil {
			t.Fatalf("write %d: %v", i, err)
		}
		want = append(want, v)
	}
	got := committedValues(t, c)
	slices.Sort(got)
	if !slices.Equal(got, want) {
		logProducersOf(t, c, missing(want, got))
		t.Fatalf("read %d committed records, want %d; missing %v", len(got), len(want), missing(want, got))
	}
}

// missing returns the values of want that got lacks.
func missing(want, got []string) []string {
	var out []string
	for _, v := range want {
		if !slices.Contains(got, v) {
			out = append(out, v)
		}
	}
	return out
}

// logProducersOf logs, for a failing test, every record and transaction
// marker in the DLQ topic (read_uncommitted) of the producers that wrote
// values: whether their transactions were committed or aborted.
func logProducersOf(t *testing.T, c *cluster, values []string) {
	t.Helper()
	for p := range int32(2) { // the DLQ topic's partitions (newCluster)
		cl, err := kgo.NewClient(kgo.SeedBrokers(c.k.Brokers...), kgo.FetchIsolationLevel(kgo.ReadUncommitted()), kgo.KeepControlRecords(),
			kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{c.dlqTopic: {p: kgo.NewOffset().AtStart()}}))
		if err != nil {
			t.Error(err)
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		pids := map[int64]bool{}
		var recs []*kgo.Record
		for ctx.Err() == nil {
			fs := cl.PollFetches(ctx)
			fs.EachRecord(func(r *kgo.Record) { recs = append(recs, r) })
		}
		for _, r := range recs {
			for _, v := range values {
				if string(r.Value) == v {
					pids[r.ProducerID] = true
				}
			}
		}
		for _, r := range recs {
			if pids[r.ProducerID] {
				t.Logf("partition %d offset %d producer %d epoch %d control %v key %x value %q", r.Partition, r.Offset, r.ProducerID, r.ProducerEpoch, r.Attrs.IsControl(), r.Key, r.Value)
			}
		}
		cancel()
		cl.Close()
	}
}
