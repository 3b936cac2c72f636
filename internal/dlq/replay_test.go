package dlq

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"
)

func (c *cluster) options(t *testing.T) ReplayOptions {
	return ReplayOptions{DLQTopic: c.dlqTopic, ProgressFile: filepath.Join(t.TempDir(), "progress.jsonl")}
}

func TestReplayFiltersSelectExactly(t *testing.T) {
	c := newCluster(t)
	at := c.seed(t, standardSeeds())
	now := baseTime.Add(2 * time.Hour)
	bound := func(s string) TimeBound {
		if d, err := time.ParseDuration(s); err == nil {
			return TimeBound{Spec: s, At: now.Add(-d)}
		}
		at, err := time.Parse(time.RFC3339, s)
		if err != nil {
			t.Fatal(err)
		}
		return TimeBound{Spec: s, At: at}
	}
	all := []string{"inv-m3", "conf-m1", "inv-nokey", "exh-m4-once", "ref-m2", "exh-m1"} // conf-m2-max is refused
	tests := []struct {
		name    string
		f       Filter
		limit   int
		send    []string
		refused []string
	}{
		{"everything", Filter{}, 0, all, []string{"conf-m2-max"}},
		{"class", Filter{Classes: []Class{ClassConflict}}, 0, []string{"conf-m1"}, []string{"conf-m2-max"}},
		{"two classes", Filter{Classes: []Class{ClassExhausted, ClassRefused}}, 0, []string{"exh-m4-once", "ref-m2", "exh-m1"}, nil},
		{"merchant", Filter{Merchants: []string{"m-1"}}, 0, []string{"conf-m1", "exh-m1"}, nil},
		{"merchant from key of malformed value", Filter{Merchants: []string{"m-3"}}, 0, []string{"inv-m3"}, nil},
		{"unknown merchant", Filter{Merchants: []string{UnknownMerchant}}, 0, []string{"inv-nokey"}, nil},
		{"event ids", Filter{EventIDs: []string{"evt-2", "evt-bad", "evt-nope"}}, 0, []string{"inv-m3", "ref-m2"}, nil},
		{"since absolute", Filter{Since: bound("2026-11-29T07:30:00Z")}, 0, []string{"inv-nokey", "exh-m4-once", "exh-m1"}, []string{"conf-m2-max"}},
		{"until ago", Filter{Until: bound("100m")}, 0, []string{"inv-m3", "conf-m1"}, nil}, // before 07:20, exclusive
		{"window", Filter{Since: bound("2026-11-29T07:10:00Z"), Until: bound("2026-11-29T07:40:00Z")}, 0, []string{"conf-m1", "ref-m2", "exh-m1"}, nil},
		{"partition", Filter{Partitions: []int{1}}, 0, []string{"ref-m2", "exh-m1"}, []string{"conf-m2-max"}},
		{"offsets", Filter{OffsetFrom: 1, OffsetEnd: 3}, 0, []string{"conf-m1", "inv-nokey", "exh-m1"}, []string{"conf-m2-max"}},
		{"combined", Filter{Classes: []Class{ClassExhausted}, Merchants: []string{"m-1", "m-4"}, Partitions: []int{0}}, 0, []string{"exh-m4-once"}, nil},
		{"limit", Filter{}, 2, []string{"inv-m3", "conf-m1"}, nil},
		{"nothing", Filter{Merchants: []string{"m-404"}}, 0, nil, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := c.options(t)
			o.Filter, o.DryRun, o.Limit = tt.f, true, tt.limit
			var rec recorder
			rep, err := c.c.Replay(ctxFor(t), o, &rec)
			if err != nil {
				t.Fatal(err)
			}
			if got := rec.names(ActionSend, at); !slices.Equal(got, tt.send) {
				t.Errorf("would send %v, want %v", got, tt.send)
			}
			if got := rec.names(ActionRefuse, at); !slices.Equal(got, tt.refused) {
				t.Errorf("refused %v, want %v", got, tt.refused)
			}
			if rep.Sent != len(tt.send) || len(rep.Refused) != len(tt.refused) || rep.LimitReached != (tt.limit > 0) {
				t.Errorf("report %+v", rep)
			}
		})
	}
	// Dry runs send nothing and record nothing.
	if msgs := c.readAll(t, c.orig); len(msgs) != 0 {
		t.Errorf("dry runs sent %d message(s) to %s", len(msgs), c.orig)
	}
}

func TestReplayDryRunReportsWhatWouldBeSent(t *testing.T) {
	c := newCluster(t)
	c.seed(t, standardSeeds())
	o := c.options(t)
	o.DryRun, o.JobID = true, "job-dry"
	var rec recorder
	if _, err := c.c.Replay(ctxFor(t), o, &rec); err != nil {
		t.Fatal(err)
	}
	var planned []kafka.Message
	for _, s := range rec.steps {
		if s.Action == ActionSend {
			planned = append(planned, s.Message)
		}
	}
	if len(planned) != 6 {
		t.Fatalf("planned %d, want 6", len(planned))
	}
	p := planned[0]
	if p.Topic != c.orig || p.Partition != 0 || string(p.Key) != "m-3" || len(p.Value) == 0 {
		t.Errorf("first planned %+v", p)
	}
	want := []kafka.Header{{Key: "trace", Value: []byte("trace-inv-m3")}, {Key: HeaderReplayJob, Value: []byte("job-dry")}, {Key: HeaderReplayCount, Value: []byte("1")}, {Key: HeaderReplayOrigin, Value: []byte(c.orig + "/0/10")}}
	if !slices.EqualFunc(p.Headers, want, func(a, b kafka.Header) bool { return a.Key == b.Key && string(a.Value) == string(b.Value) }) {
		t.Errorf("headers %v, want %v", p.Headers, want)
	}
	if msgs := c.readAll(t, c.orig); len(msgs) != 0 {
		t.Errorf("dry run sent %d message(s)", len(msgs))
	}
	if _, err := os.Stat(o.ProgressFile); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("dry run wrote the progress file (stat: %v)", err)
	}
}

func TestReplaySendsOriginalsThenNothing(t *testing.T) {
	c := newCluster(t)
	seeds := standardSeeds()
	c.seed(t, seeds)
	o := c.options(t)
	o.JobID = "job-1"
	rep, err := c.c.Replay(ctxFor(t), o, nil)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Sent != 6 || len(rep.Refused) != 1 || !rep.Done || rep.Resumed {
		t.Fatalf("report %+v", rep)
	}
	got := c.readAll(t, c.orig)
	if len(got) != 6 {
		t.Fatalf("%s holds %d messages, want 6", c.orig, len(got))
	}
	byTrace := map[string]kafka.Message{}
	for _, m := range got {
		tr, _ := header(m, "trace")
		byTrace[tr] = m
	}
	for _, s := range seeds {
		if s.replays >= DefaultMaxReplays {
			continue
		}
		m, ok := byTrace["trace-"+s.name]
		if !ok {
			t.Errorf("%s not replayed", s.name)
			continue
		}
		orig := c.origMessage(s)
		if string(m.Key) != string(orig.Key) || string(m.Value) != string(orig.Value) || m.Partition != s.origPart {
			t.Errorf("%s: key %q value %q partition %d; want %q %q %d", s.name, m.Key, m.Value, m.Partition, orig.Key, orig.Value, s.origPart)
		}
		job, _ := header(m, HeaderReplayJob)
		count, _ := header(m, HeaderReplayCount)
		origin, _ := header(m, HeaderReplayOrigin)
		if job != "job-1" || count != strconv.Itoa(s.replays+1) || origin != c.orig+"/"+strconv.Itoa(s.origPart)+"/"+strconv.FormatInt(s.origOffset, 10) || len(m.Headers) != 4 {
			t.Errorf("%s: headers %v; want trace, job-1, count %d, origin", s.name, m.Headers, s.replays+1)
		}
	}

	// A second run sends nothing; the record at the limit is refused again.
	var second recorder
	rep, err = c.c.Replay(ctxFor(t), o, &second)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Sent != 0 || len(rep.Refused) != 1 || rep.Matched != 1 || !rep.Resumed || rep.JobID != "job-1" || len(second.steps) != 7 {
		t.Errorf("second run %+v", rep)
	}
	for _, s := range second.steps {
		if s.Action != ActionSent && s.Action != ActionRefuse {
			t.Errorf("second run: %d/%d %s", s.Entry.Partition, s.Entry.Offset, s.Action)
		}
	}
	// A record dead-lettered later is all a third run sends, under the same job.
	more := c.seed(t, []seed{{name: "late", dlqPartition: 1, origPart: 2, origOffset: 99, key: "m-7", value: validValue("evt-9", "m-7", 1), class: ClassRefused, at: baseTime}})
	var rec recorder
	o.JobID = ""
	rep, err = c.c.Replay(ctxFor(t), o, &rec)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Sent != 1 || rep.JobID != "job-1" || rec.names(ActionSend, more)[0] != "late" {
		t.Errorf("third run %+v", rep)
	}
	if n := len(c.readAll(t, c.orig)); n != 7 {
		t.Errorf("%s holds %d messages, want 7", c.orig, n)
	}
}

func TestReplayToTopic(t *testing.T) {
	c := newCluster(t)
	c.seed(t, standardSeeds())
	other := c.k.Topic(t, 1)
	c.freshClient(t) // a transport whose metadata cache knows the new topic
	o := c.options(t)
	o.ToTopic, o.Filter = other, Filter{Merchants: []string{"m-1"}}
	rep, err := c.c.Replay(ctxFor(t), o, nil)
	if err != nil || rep.Sent != 2 {
		t.Fatalf("rep %+v err %v", rep, err)
	}
	if n := len(c.readAll(t, other)); n != 2 {
		t.Errorf("%s holds %d, want 2", other, n)
	}
	if n := len(c.readAll(t, c.orig)); n != 0 {
		t.Errorf("original topic got %d", n)
	}
	o.ToTopic = c.dlqTopic
	if _, err := c.c.Replay(ctxFor(t), o, nil); err == nil {
		t.Error("replay into the DLQ itself accepted")
	}
}

func TestReplayMaxReplays(t *testing.T) {
	c := newCluster(t)
	at := c.seed(t, standardSeeds())
	o := c.options(t)
	o.MaxReplays = 1
	var rec recorder
	rep, err := c.c.Replay(ctxFor(t), o, &rec)
	if err != nil {
		t.Fatal(err)
	}
	if got := rec.names(ActionRefuse, at); !slices.Equal(got, []string{"exh-m4-once", "conf-m2-max"}) {
		t.Errorf("refused %v", got)
	}
	if rep.Sent != 5 || len(rep.Refused) != 2 || rep.Refused[1].ReplayCount != 3 {
		t.Errorf("report %+v", rep)
	}
	for _, m := range c.readAll(t, c.orig) {
		if tr, _ := header(m, "trace"); tr == "trace-exh-m4-once" || tr == "trace-conf-m2-max" {
			t.Errorf("refused record %s was sent", tr)
		}
	}
}

// Interrupted runs resume with neither duplicates nor gaps, whether the
// interrupt lands between batches or in the middle of collecting one.
func TestReplayResumesAfterInterrupt(t *testing.T) {
	for _, mode := range []string{"after ack", "mid batch"} {
		t.Run(mode, func(t *testing.T) {
			c := newCluster(t)
			var seeds []seed
			for i := range 30 {
				seeds = append(seeds, seed{name: fmt.Sprint("s", i), dlqPartition: i % 2, origPart: i % 3, origOffset: int64(i),
					key: fmt.Sprint("m-", i%5), value: validValue(fmt.Sprint("evt-", i), fmt.Sprint("m-", i%5), 1), class: ClassExhausted, at: baseTime})
			}
			c.seed(t, seeds)
			o := c.options(t)
			o.BatchSize = 4
			var jobs []string
			for run := 0; ; run++ {
				if run > 10 {
					t.Fatal("did not finish in 10 runs")
				}
				ctx, cancel := context.WithCancel(ctxFor(t))
				rec := &recorder{}
				switch mode {
				case "after ack":
					rec.onAck = func(int) { cancel() }
				case "mid batch":
					rec.onStp = func(n int) {
						if n == 6 {
							cancel()
						}
					}
				}
				rep, err := c.c.Replay(ctx, o, rec)
				cancel()
				jobs = append(jobs, rep.JobID)
				if err == nil {
					if !rep.Done {
						t.Fatalf("run %d: no error but not done: %+v", run, rep)
					}
					break
				}
				if !errors.Is(err, context.Canceled) {
					t.Fatalf("run %d: %v", run, err)
				}
			}
			if len(jobs) < 3 {
				t.Errorf("only %d runs: the interrupts did not bite", len(jobs))
			}
			seen := map[string]int{}
			for _, m := range c.readAll(t, c.orig) {
				tr, _ := header(m, "trace")
				seen[tr]++
				if j, _ := header(m, HeaderReplayJob); j != jobs[0] {
					t.Errorf("%s sent under job %s, want the first run's %s", tr, j, jobs[0])
				}
			}
			for _, s := range seeds {
				if n := seen["trace-"+s.name]; n != 1 {
					t.Errorf("%s sent %d times", s.name, n)
				}
			}
			if len(seen) != len(seeds) {
				t.Errorf("%d distinct messages, want %d", len(seen), len(seeds))
			}
		})
	}
}

func TestReplayLimitContinues(t *testing.T) {
	c := newCluster(t)
	c.seed(t, standardSeeds())
	o := c.options(t)
	o.Limit = 4
	rep, err := c.c.Replay(ctxFor(t), o, nil)
	if err != nil || rep.Sent != 4 || !rep.LimitReached || rep.Done {
		t.Fatalf("first %+v %v", rep, err)
	}
	rep, err = c.c.Replay(ctxFor(t), o, nil)
	if err != nil || rep.Sent != 2 || rep.LimitReached || !rep.Done {
		t.Fatalf("second %+v %v", rep, err)
	}
	if n := len(c.readAll(t, c.orig)); n != 6 {
		t.Errorf("sent %d in all, want 6", n)
	}
}

func TestReplayJobMismatchAndRestart(t *testing.T) {
	c := newCluster(t)
	c.seed(t, standardSeeds())
	o := c.options(t)
	o.JobID, o.Filter = "job-a", Filter{Merchants: []string{"m-1"}}
	if _, err := c.c.Replay(ctxFor(t), o, nil); err != nil {
		t.Fatal(err)
	}
	o.JobID = "job-b"
	if _, err := c.c.Replay(ctxFor(t), o, nil); !errors.Is(err, ErrJobMismatch) {
		t.Fatalf("err %v, want ErrJobMismatch", err)
	}
	o.Restart = true
	rep, err := c.c.Replay(ctxFor(t), o, nil)
	if err != nil || rep.Sent != 2 || rep.JobID != "job-b" {
		t.Fatalf("restart %+v %v", rep, err)
	}
	// Another selection in the same file keeps its own progress.
	o.Restart, o.JobID, o.Filter = false, "", Filter{Merchants: []string{"m-2"}}
	rep, err = c.c.Replay(ctxFor(t), o, nil)
	if err != nil || rep.Sent != 1 || rep.Resumed {
		t.Fatalf("other selection %+v %v", rep, err)
	}
	for _, f := range []Filter{{Merchants: []string{"m-1"}}, {Merchants: []string{"m-2"}}} {
		o.Filter = f
		if p, err := openProgress(o.ProgressFile, o.Selection(), false); err != nil || p.job == "" || len(p.sent) == 0 {
			t.Fatalf("progress of %s: %+v %v", o.Selection(), p, err)
		}
	}
}

// The one timing assertion the issue demands: 40 messages at --rate 20 take
// about two seconds.
func TestReplayRate(t *testing.T) {
	c := newCluster(t)
	var seeds []seed
	for i := range 40 {
		seeds = append(seeds, seed{name: fmt.Sprint("r", i), dlqPartition: i % 2, origPart: i % 3, origOffset: int64(i),
			key: "m-1", value: validValue(fmt.Sprint("evt-", i), "m-1", 1), class: ClassExhausted, at: baseTime})
	}
	c.seed(t, seeds)
	o := c.options(t)
	o.Rate = 20
	start := time.Now()
	rep, err := c.c.Replay(ctxFor(t), o, nil)
	elapsed := time.Since(start)
	if err != nil || rep.Sent != 40 {
		t.Fatalf("%+v %v", rep, err)
	}
	t.Logf("40 messages at --rate 20: %s (%.1f msg/s)", elapsed, 40/elapsed.Seconds())
	if elapsed < 1800*time.Millisecond || elapsed > 2600*time.Millisecond {
		t.Errorf("took %s, want 1.8s..2.6s", elapsed)
	}
}
