package dlq

import (
	"errors"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"
)

// The worker side of the loop: a replayed message that fails again goes back
// to the DLQ through FromFailure with its replay count raised and its origin
// named. It is a copy of its original: a second run of the job sends nothing,
// the listing shows one message, and only a new job (Restart) sends it again,
// until the count reaches --max-replays and the replay refuses it. The worker
// is played by FromFailure on the message read back from the original topic,
// exactly what internal/consumer does with a message that fails.
func TestReplayedRecordFailingAgainReturnsRaised(t *testing.T) {
	c := newCluster(t)
	c.seed(t, []seed{{name: "loop", dlqPartition: 1, origPart: 2, origOffset: 5, key: "m-1", value: validValue("evt-loop", "m-1", 4), class: ClassRefused, at: baseTime}})
	o := ReplayOptions{DLQTopic: c.dlqTopic, ProgressFile: filepath.Join(t.TempDir(), "p.jsonl"), JobID: "job-loop"}
	seen := c.ends(t, c.orig)
	for round := 1; round <= DefaultMaxReplays+1; round++ {
		o.Restart = round > 1 // the operator chose to send it again
		rep, err := c.c.Replay(ctxFor(t), o, nil)
		if err != nil {
			t.Fatal(err)
		}
		if round > DefaultMaxReplays {
			if rep.Sent != 0 || len(rep.Refused) != 1 || rep.Refused[0].ReplayCount != DefaultMaxReplays {
				t.Fatalf("round %d: %+v, want the record refused at count %d", round, rep, DefaultMaxReplays)
			}
			break
		}
		if rep.Sent != 1 {
			t.Fatalf("round %d: sent %d, want 1", round, rep.Sent)
		}
		// The worker consumes the replayed message and it fails again.
		fresh := c.readSince(t, c.orig, seen)
		if len(fresh) != 1 {
			t.Fatalf("round %d: %d new message(s) on %s, want 1", round, len(fresh), c.orig)
		}
		m := fresh[0]
		seen[m.Partition] = m.Offset + 1
		if n, _ := header(m, HeaderReplayCount); n != strconv.Itoa(round) {
			t.Fatalf("round %d: replay.count %q", round, n)
		}
		rec := FromFailure(m, "billing-worker", ClassRefused, errors.New("still refused"), 1, time.Now(), time.Now())
		if rec.ReplayCount != round || rec.ReplayJob != "job-loop" || rec.Root() != c.orig+"/2/5" {
			t.Fatalf("round %d: FromFailure kept count %d job %q root %s", round, rec.ReplayCount, rec.ReplayJob, rec.Root())
		}
		dm := rec.KafkaMessage()
		dm.Topic, dm.Partition = c.dlqTopic, 1 // keyed by its root: the original's partition
		c.write(t, dm)
		// The same job again: the copy was sent already, as its original.
		o.Restart = false
		if rep, err := c.c.Replay(ctxFor(t), o, nil); err != nil || rep.Sent != 0 || rep.Copies != round {
			t.Fatalf("round %d, run again: %+v %v, want nothing sent and %d copies", round, rep, err, round)
		}
	}
	s, err := c.c.Summarize(ctxFor(t), c.dlqTopic, Filter{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if s.Total != 1 || s.Copies != DefaultMaxReplays || s.Replayed != 1 {
		t.Errorf("DLQ total %d copies %d replayed %d, want one message with %d copies", s.Total, s.Copies, s.Replayed, DefaultMaxReplays)
	}
}

// readSince reads topic from the given next offsets to the end.
func (c *cluster) readSince(t *testing.T, topic string, from map[int]int64) []kafka.Message {
	t.Helper()
	rs, err := c.c.watermarks(ctxFor(t), topic)
	if err != nil {
		t.Fatal(err)
	}
	for i := range rs {
		rs[i].From = max(rs[i].From, from[rs[i].Partition])
	}
	var out []kafka.Message
	if err := c.c.scan(ctxFor(t), topic, rs, func(m kafka.Message) error { out = append(out, m); return nil }); err != nil {
		t.Fatal(err)
	}
	return out
}
