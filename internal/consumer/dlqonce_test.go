package consumer

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/quotaflow/billing/internal/dlq"
)

// origin is where a dead-lettered message came from.
type origin struct {
	partition int
	offset    int64
}

// faultHooks returns the in-process broker, or skips loudly: only it takes
// injected faults.
func faultHooks(t *testing.T, c *cluster) *kfake.Cluster {
	t.Helper()
	if c.k.Cluster == nil {
		t.Skip("INTEGRATION TEST NOT RUN: broker fault injection needs the in-process kfake broker; KAFKA_BROKERS is set")
	}
	return c.k.Cluster
}

// refuseCommits makes the coordinator refuse every offset commit of group,
// as it refuses those of a generation that is over, until Remove: what is
// dead-lettered meanwhile stays uncommitted, as after a kill -9.
func refuseCommits(k *kfake.Cluster, group string) *kfake.FaultHandle {
	return k.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.OffsetCommit}, Group: group, Err: kerr.IllegalGeneration, Count: -1})
}

// withPoison inserts n undecodable messages into msgs, spread over keys and
// so partitions, and returns their values.
func withPoison(msgs []kafka.Message, n int) ([]kafka.Message, []string) {
	var values []string
	step := len(msgs) / (n + 1)
	for i := n; i >= 1; i-- {
		key := fmt.Sprintf("k-%d", i)
		v := fmt.Sprintf("%s:poison-%d", key, i)
		at := i * step
		msgs = append(msgs[:at], append([]kafka.Message{{Key: []byte(key), Value: []byte(v)}}, msgs[at:]...)...)
		values = append(values, v)
	}
	return msgs, values
}

// waitAllCommitted is waitCommittedEnd for a group that may not exist yet
// (no member joined, nothing committed).
func (c *cluster) waitAllCommitted(t *testing.T, group, topic string, partitions int) {
	t.Helper()
	_, end := c.offsets(t, topic, partitions)
	waitFor(t, 15*time.Second, "offsets committed to the end", func() bool {
		got, err := c.committedErr(group, topic, partitions)
		if err != nil {
			return false
		}
		for p, e := range end {
			if got[p] != e {
				return false
			}
		}
		return true
	})
}

// dlqRecords reads every committed record of every partition of a
// dead-letter topic, as a read_committed consumer sees them.
func (c *cluster) dlqRecords(t *testing.T, topic string, partitions int) []dlq.Record {
	t.Helper()
	first, end := c.offsets(t, topic, partitions)
	var out []dlq.Record
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	rc := dlq.ReadConfig{Brokers: c.k.Brokers, Topic: topic, PollWait: 100 * time.Millisecond, Stall: 15 * time.Second}
	for p := 0; p < partitions; p++ {
		err := dlq.ReadCommitted(ctx, rc, dlq.Range{Partition: p, From: first[p], To: end[p]}, func(m kafka.Message) error {
			rec, err := dlq.FromMessage(m)
			if err != nil {
				return fmt.Errorf("DLQ record at %d/%d: %w", p, m.Offset, err)
			}
			out = append(out, rec)
			return nil
		})
		if err != nil {
			t.Fatalf("read DLQ: %v", err)
		}
	}
	return out
}

// dlqSize is how many committed records a dead-letter topic holds (its
// offsets also count transaction markers).
func (c *cluster) dlqSize(t *testing.T, topic string, partitions int) int64 {
	t.Helper()
	return int64(len(c.dlqRecords(t, topic, partitions)))
}

// checkDeadLetteredTimes asserts the DLQ holds each poison value exactly
// want times, each time for the same original message, and nothing else.
func (c *cluster) checkDeadLetteredTimes(t *testing.T, topic, dlqTopic string, dlqParts int, poison []string, want int) {
	t.Helper()
	times := map[origin]int{}
	values := map[string]origin{}
	for _, rec := range c.dlqRecords(t, dlqTopic, dlqParts) {
		o := origin{rec.OriginalPartition, rec.OriginalOffset}
		if prev, ok := values[string(rec.Value)]; ok && prev != o {
			t.Errorf("%s dead-lettered from %v and %v", rec.Value, prev, o)
		}
		if rec.OriginalTopic != topic {
			t.Errorf("%s: original topic %s", rec.Value, rec.OriginalTopic)
		}
		values[string(rec.Value)] = o
		times[o]++
	}
	for _, v := range poison {
		o, ok := values[v]
		if !ok {
			t.Errorf("%s never dead-lettered", v)
			continue
		}
		if times[o] != want {
			t.Errorf("message %s/%d@%d (%s) dead-lettered %d times, want %d", topic, o.partition, o.offset, v, times[o], want)
		}
	}
	if len(values) != len(poison) {
		t.Errorf("DLQ holds %d distinct messages, want the %d poison ones", len(values), len(poison))
	}
}

// A consumer dead-letters poison messages, then dies before any commit goes
// through (the coordinator refuses them all, its final one included); a
// second consumer in the same group re-reads everything. With the scan the
// DLQ holds each poison message once, the second consumer skipping them all;
// with DisableDLQScan (the old, at-least-once behaviour) twice.
func TestDeadLetterOnceAfterCrash(t *testing.T) {
	for _, tt := range []struct {
		name   string
		window int
		want   int
	}{
		{"scan", 0, 1},
		{"scan disabled", DisableDLQScan, 2},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c := newCluster(t)
			kf := faultHooks(t, c)
			const parts, dlqParts, n = 3, 2, 600
			topic, dlqTopic := c.k.Topic(t, parts), c.k.Topic(t, dlqParts)
			valid, _ := events(n, 20)
			msgs, poison := withPoison(valid, 6)
			c.produce(t, topic, msgs)
			cfg := c.config(topic, dlqTopic)
			cfg.DLQScanWindow = tt.window

			refused := refuseCommits(kf, cfg.Group)
			rec := newRecorder()
			a := start(t, cfg, rec.handler(0), nil)
			waitFor(t, 15*time.Second, "poison dead-lettered", func() bool { return c.dlqSize(t, dlqTopic, dlqParts) >= int64(len(poison)) })
			waitFor(t, 15*time.Second, "all handled", func() bool { return rec.distinct() == n })
			waitFor(t, 5*time.Second, "a commit refused", func() bool { return value(t, a.m.commits.WithLabelValues("error")) > 0 })
			a.stop(t) // its final commit is refused too
			committed, err := c.committedErr(cfg.Group, topic, parts)
			if err != nil && !errors.Is(err, kafka.GroupIdNotFound) { // an empty group may be gone
				t.Fatal(err)
			}
			for p, off := range committed {
				if off >= 0 {
					t.Fatalf("partition %d committed at %d: the crash left nothing uncommitted", p, off)
				}
			}
			refused.Remove()

			b := start(t, cfg, rec.handler(0), nil)
			c.waitAllCommitted(t, cfg.Group, topic, parts)
			b.stop(t)
			c.checkDeadLetteredTimes(t, topic, dlqTopic, dlqParts, poison, tt.want)
			wantSkipped := float64(len(poison))
			if tt.want != 1 {
				wantSkipped = 0
			}
			if got := value(t, b.m.dlqSkipped); got != wantSkipped {
				t.Errorf("second consumer skipped %v, want %v", got, wantSkipped)
			}
			if got, want := value(t, b.m.dlqPublished), float64(len(poison))-wantSkipped; got != want {
				t.Errorf("second consumer published %v, want %v", got, want)
			}
		})
	}
}

// A second member joins while nothing dead-lettered by the first is
// committed, then the first leaves, its final commit refused: both
// rebalances hand poison messages already in the DLQ to a new generation,
// which skips them. The DLQ holds each once.
func TestDeadLetterOnceAcrossRebalances(t *testing.T) {
	c := newCluster(t)
	kf := faultHooks(t, c)
	const parts, dlqParts, n = 4, 2, 800
	topic, dlqTopic := c.k.Topic(t, parts), c.k.Topic(t, dlqParts)
	valid, _ := events(n, 40)
	msgs, poison := withPoison(valid, 8)
	c.produce(t, topic, msgs)
	cfg := c.config(topic, dlqTopic)

	refused := refuseCommits(kf, cfg.Group)
	defer refused.Remove()
	rec := newRecorder()
	a := start(t, cfg, rec.handler(0), nil)
	waitFor(t, 15*time.Second, "poison dead-lettered", func() bool { return c.dlqSize(t, dlqTopic, dlqParts) >= int64(len(poison)) })
	waitFor(t, 15*time.Second, "all handled", func() bool { return rec.distinct() == n })

	// Join: both members re-read their partitions from the start.
	b := start(t, cfg, rec.handler(0), nil)
	skipped := func() float64 { return value(t, a.m.dlqSkipped) + value(t, b.m.dlqSkipped) }
	waitFor(t, 15*time.Second, "poison skipped after the join", func() bool { return skipped() == float64(len(poison)) })
	if value(t, b.m.generations) < 1 || value(t, a.m.generations) < 2 {
		t.Fatalf("generations a=%v b=%v, want a rebalance", value(t, a.m.generations), value(t, b.m.generations))
	}

	// Leave: the remaining member re-reads every partition from the start.
	bSkipped := value(t, b.m.dlqSkipped)
	a.stop(t)
	waitFor(t, 15*time.Second, "poison skipped after the leave", func() bool { return value(t, b.m.dlqSkipped) == bSkipped+float64(len(poison)) })
	refused.Remove()
	c.waitAllCommitted(t, cfg.Group, topic, parts)
	b.stop(t)

	c.checkDeadLetteredTimes(t, topic, dlqTopic, dlqParts, poison, 1)
	if got := value(t, a.m.dlqPublished) + value(t, b.m.dlqPublished); got != float64(len(poison)) {
		t.Errorf("published %v, want %d", got, len(poison))
	}
}

// While the dead-letter topic's tail cannot be read, nothing is
// dead-lettered nor committed past a poison message, handling goes on, and
// Ready says why; once the scan works the poison message lands, once.
func TestDeadLetterScanRetried(t *testing.T) {
	c := newCluster(t)
	kf := faultHooks(t, c)
	const parts, n = 2, 200
	topic, dlqTopic := c.k.Topic(t, parts), c.k.Topic(t, 1)
	valid, _ := events(n, 10)
	msgs, poison := withPoison(valid, 1)
	c.produce(t, topic, msgs)
	first, _ := c.offsets(t, topic, parts)

	broken := kf.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.ListOffsets}, Topic: dlqTopic, Err: kerr.NotLeaderForPartition, Count: -1})
	defer broken.Remove()
	rec := newRecorder()
	cfg := c.config(topic, dlqTopic)
	r := start(t, cfg, rec.handler(0), nil)
	waitFor(t, 10*time.Second, "scan retried", func() bool { return value(t, r.m.retries.WithLabelValues(retryScan)) >= 2 })
	waitFor(t, 10*time.Second, "handling goes on", func() bool { return rec.distinct() > 0 })
	if err := r.c.Ready(context.Background()); err == nil || !strings.Contains(err.Error(), "scan dead-letter topic "+dlqTopic) {
		t.Fatalf("Ready while the scan fails = %v", err)
	}
	if got := value(t, r.m.dlqPublished); got != 0 { // the DLQ's offsets cannot be listed now
		t.Fatalf("%v records dead-lettered before the scan", got)
	}
	committed := c.committed(t, cfg.Group, topic, parts)
	if err := rec.unhandledBelow(committed, first); err != nil {
		t.Fatal(err)
	}
	_, end := c.offsets(t, topic, parts)
	var done, total int64
	for p := range end {
		done += max(committed[p]-first[p], 0)
		total += end[p] - first[p]
	}
	if done >= total {
		t.Fatalf("everything committed (%d of %d) while the poison message waits for the scan", done, total)
	}

	broken.Remove()
	c.waitAllCommitted(t, cfg.Group, topic, parts)
	waitFor(t, 5*time.Second, "ready", func() bool { return r.c.Ready(context.Background()) == nil })
	r.stop(t)
	c.checkDeadLetteredTimes(t, topic, dlqTopic, 1, poison, 1)
}

// A dead-letter publish is committed at once, not at the next
// CommitInterval (here an hour away).
func TestDeadLetterCommitsAtOnce(t *testing.T) {
	c := newCluster(t)
	topic, dlqTopic := c.k.Topic(t, 1), c.k.Topic(t, 1)
	var msgs []kafka.Message
	for i := range 3 {
		msgs = append(msgs, kafka.Message{Key: []byte("k"), Value: []byte(fmt.Sprintf("k:poison-%d", i))})
	}
	c.produce(t, topic, msgs)
	cfg := c.config(topic, dlqTopic)
	cfg.CommitInterval = time.Hour
	r := start(t, cfg, newRecorder().handler(0), nil)
	waitFor(t, 10*time.Second, "dead-lettered", func() bool { return c.dlqSize(t, dlqTopic, 1) >= 3 })
	c.waitAllCommitted(t, cfg.Group, topic, 1) // before Run's final commit
	r.stop(t)
	if got := c.dlqSize(t, dlqTopic, 1); got != 3 {
		t.Errorf("DLQ holds %d records, want 3", got)
	}
}

// The scan keeps, from the last DLQScanWindow records of every dead-letter
// partition, those this group wrote for the consumed topic's assigned
// partitions at or after their start offsets, and ignores anything else.
func TestDLQScanKeepsOnlyOurs(t *testing.T) {
	c := newCluster(t)
	const dlqParts = 2
	dlqTopic := c.k.Topic(t, dlqParts)
	cfg := c.config("billing-in", dlqTopic)
	cfg.setDefaults()
	at := time.UnixMilli(1_700_000_000_123)
	// record is a dead-letter record bound for DLQ partition to.
	record := func(to int, topic, group string, partition int, offset int64) kafka.Message {
		m := kafka.Message{Topic: topic, Partition: partition, Offset: offset, Time: at, Key: []byte{byte('0' + to)}, Value: []byte("x")}
		return dlq.FromFailure(m, group, dlq.ClassInvalid, fmt.Errorf("bad"), 1, at, at).KafkaMessage()
	}
	var msgs []kafka.Message
	for i := range 30 { // pushed out of the window by what follows
		msgs = append(msgs, record(0, cfg.Topic, cfg.Group, 0, int64(1000+i)))
	}
	msgs = append(msgs,
		record(0, cfg.Topic, cfg.Group, 0, 5),     // kept
		record(0, cfg.Topic, cfg.Group, 0, 3),     // below partition 0's start
		record(0, cfg.Topic, cfg.Group, 2, 8),     // partition not assigned
		record(0, "other-topic", cfg.Group, 0, 6), // another topic
		record(0, cfg.Topic, "other-group", 1, 9), // another group
		kafka.Message{Key: []byte("0"), Value: []byte("not a dead-letter record")},
		record(0, cfg.Topic, cfg.Group, 1, 7),  // kept
		record(1, cfg.Topic, cfg.Group, 1, 12), // kept, from the other DLQ partition
	)
	w := &kafka.Writer{Addr: kafka.TCP(c.k.Brokers...), Topic: dlqTopic, Transport: c.tr, BatchTimeout: time.Millisecond, RequiredAcks: kafka.RequireAll,
		Balancer: kafka.BalancerFunc(func(m kafka.Message, _ ...int) int { return int(m.Key[0] - '0') })}
	if err := w.WriteMessages(context.Background(), msgs...); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}

	cfg.DLQScanWindow = 7
	s := &dlqScan{cfg: cfg, rt: c.tr, log: testLogger(t), starts: map[int]int64{0: 4, 1: 0}}
	found, st, err := s.run(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	want := map[int][]int64{0: {5}, 1: {7, 12}}
	for p, offs := range want {
		for _, off := range offs {
			if got, ok := found[p][off]; !ok || !got.Equal(at) {
				t.Errorf("partition %d offset %d: found %v %v, want %v", p, off, ok, got, at)
			}
		}
	}
	if st != (scanStats{read: 8, found: 3, foreign: 1}) {
		t.Errorf("stats %+v, want 8 read, 3 kept, 1 not a record (found %v)", st, found)
	}

	if st.absent {
		t.Error("an existing topic scanned as absent")
	}

	seen := newDeadLettered()
	seen.invalidate() // as at a generation's start or after a failed publish
	if err := seen.recheck(context.Background(), s, &atomic.Uint64{}, 0); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		m    kafka.Message
		want bool
	}{
		{kafka.Message{Partition: 0, Offset: 5, Time: at}, true},
		{kafka.Message{Partition: 0, Offset: 5, Time: at.Add(time.Millisecond)}, false}, // a recreated topic
		{kafka.Message{Partition: 1, Offset: 5, Time: at}, false},
		{kafka.Message{Partition: 3, Offset: 7, Time: at}, false},
	} {
		if got := seen.holds(tt.m); got != tt.want {
			t.Errorf("holds(%d@%d %v) = %v, want %v", tt.m.Partition, tt.m.Offset, tt.m.Time, got, tt.want)
		}
	}

	// A dead-letter topic that does not exist holds nothing.
	cfg.DLQTopic = dlqTopic + "-missing"
	s = &dlqScan{cfg: cfg, rt: c.tr, log: testLogger(t), starts: map[int]int64{0: 0}}
	if found, st, err := s.run(context.Background()); err != nil || len(found) != 0 || !st.absent {
		t.Errorf("missing topic: found %v, absent %v, err %v", found, st.absent, err)
	}
	// ...and is not trusted: a publish waits until a scan finds the topic.
	seen.invalidate()
	if err := seen.recheck(context.Background(), s, &atomic.Uint64{}, 0); !errors.Is(err, errDLQAbsent) {
		t.Errorf("recheck of a missing topic: %v, want errDLQAbsent", err)
	}
}

// Dead-letter writes that fail: a produce answered with an error after the
// append (NOT_ENOUGH_REPLICAS_AFTER_APPEND, or a timeout on a real broker),
// which the transactional producer retries without writing twice; and a
// refused transaction commit, after which the writer is replaced (aborting
// the open transaction) and the records written again. Either way the DLQ
// holds each message once.
func TestDeadLetterOnceAfterFailedWrites(t *testing.T) {
	for _, tt := range []struct {
		name      string
		fault     func(dlqTopic string) kfake.Fault
		rewritten bool // the consumer saw the failure and wrote again
	}{
		{"produce answered after append", func(dlqTopic string) kfake.Fault {
			return kfake.Fault{Keys: []kmsg.Key{kmsg.Produce}, Topic: dlqTopic, Err: kerr.NotEnoughReplicasAfterAppend, Count: 2}
		}, false},
		{"commit refused", func(string) kfake.Fault {
			return kfake.Fault{Keys: []kmsg.Key{kmsg.EndTxn}, Err: kerr.UnknownServerError, Count: 2}
		}, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c := newCluster(t)
			kf := faultHooks(t, c)
			const parts, n = 2, 100
			topic, dlqTopic := c.k.Topic(t, parts), c.k.Topic(t, 1)
			valid, _ := events(n, 10)
			msgs, poison := withPoison(valid, 2)
			c.produce(t, topic, msgs)

			fault := kf.Fault(tt.fault(dlqTopic))
			defer fault.Remove()
			cfg := c.config(topic, dlqTopic)
			r := start(t, cfg, newRecorder().handler(0), nil)
			c.waitAllCommitted(t, cfg.Group, topic, parts)
			r.stop(t)
			if fault.Hits() == 0 {
				t.Fatal("no write failed")
			}
			c.checkDeadLetteredTimes(t, topic, dlqTopic, 1, poison, 1)
			if got := value(t, r.m.retries.WithLabelValues(retryDLQ)); tt.rewritten != (got > 0) {
				t.Errorf("dead-letter retries %v, want them only when the commit was refused", got)
			}
		})
	}
}

// A member's dead-letter write is in flight when the partition's next owner
// opens its writer, as when a member frozen mid-publish past its session
// wakes up after the rebalance. The next owner's opening aborts the write's
// transaction and fences the member's writer; the member, its generation
// refused by the coordinator, gives up without writing again. The next owner
// then dead-letters the message: the DLQ holds it once, never the copy.
func TestDeadLetterFencedByNextOwner(t *testing.T) {
	c := newCluster(t)
	kf := faultHooks(t, c)
	topic, dlqTopic := c.k.Topic(t, 1), c.k.Topic(t, 1)
	valid, _ := events(50, 5)
	msgs, poison := withPoison(valid, 1)
	c.produce(t, topic, msgs)
	cfg := c.config(topic, dlqTopic)

	// Hold the first transactional produce (the member's dead-letter write)
	// until released.
	inFlight, release := make(chan struct{}), make(chan struct{})
	kf.ControlKey(int16(kmsg.Produce), func(req kmsg.Request) (kmsg.Response, error, bool) {
		if req.(*kmsg.ProduceRequest).TransactionID == nil {
			return nil, nil, false
		}
		kf.DropControl()
		close(inFlight)
		kf.SleepControl(func() { <-release })
		return nil, nil, false
	})
	a := start(t, cfg, newRecorder().handler(0), nil)
	select {
	case <-inFlight:
	case <-time.After(15 * time.Second):
		t.Fatal("no dead-letter write")
	}
	refused := refuseCommits(kf, cfg.Group)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	next, err := dlq.OpenTxnWriter(ctx, dlq.TxnConfig{Brokers: c.k.Brokers, Topic: dlqTopic, ID: transactionalID(cfg, 0), Timeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	next.Close()
	close(release)
	waitFor(t, 15*time.Second, "the member fenced off", func() bool { return value(t, a.m.dlqFenced) == 1 })
	a.stop(t)
	refused.Remove()
	if got := value(t, a.m.dlqPublished); got != 0 {
		t.Errorf("the fenced member counted %v publishes", got)
	}
	if got := c.dlqSize(t, dlqTopic, 1); got != 0 {
		t.Fatalf("the fenced write is visible: the DLQ holds %d record(s)", got)
	}

	b := start(t, cfg, newRecorder().handler(0), nil)
	c.waitAllCommitted(t, cfg.Group, topic, 1)
	b.stop(t)
	c.checkDeadLetteredTimes(t, topic, dlqTopic, 1, poison, 1)
}
