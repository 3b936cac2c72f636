package dlq

import (
	"testing"
	"time"
)

// copyOf is a second dead-lettering of s's message: same provenance, written
// later after more attempts, as by a partition's next owner after a crash
// between the first write and its commit.
func copyOf(s seed) seed {
	s.at = s.at.Add(time.Minute)
	return s
}

// Two copies of one message are one entry with Copies 2; the summary counts
// the message once and the extra record apart.
func TestSummarizeFoldsCopies(t *testing.T) {
	c := newCluster(t)
	seeds := standardSeeds()
	c.seed(t, seeds)
	c.seed(t, []seed{copyOf(seeds[1])}) // conf-m1, on DLQ partition 0
	var listed []Entry
	s, err := c.c.Summarize(ctxFor(t), c.dlqTopic, Filter{}, func(e Entry) error { listed = append(listed, e); return nil })
	if err != nil {
		t.Fatal(err)
	}
	if s.Total != 7 || s.Copies != 1 || s.ByClass[ClassConflict] != 2 || len(listed) != 7 {
		t.Fatalf("summary total %d copies %d conflicts %d, %d listed; want 7 1 2 7", s.Total, s.Copies, s.ByClass[ClassConflict], len(listed))
	}
	for _, e := range listed {
		want := 1
		if e.Provenance() == c.origMessage(seeds[1]).Topic+"/1/11" {
			want = 2
			if !e.Time.Equal(seeds[1].at) {
				t.Errorf("the listed copy is the one of %v, want the first (%v)", e.Time, seeds[1].at)
			}
		}
		if e.Copies != want {
			t.Errorf("%s: copies %d, want %d", e.Provenance(), e.Copies, want)
		}
	}
}

// A replay sends a message once however many copies the DLQ holds: a copy
// read in the same run, and a copy that lands after the run and survives
// compaction of the first one, are not sent again.
func TestReplaySendsCopiesOnce(t *testing.T) {
	c := newCluster(t)
	seeds := standardSeeds()
	c.seed(t, seeds)
	c.seed(t, []seed{copyOf(seeds[1])})
	o := c.options(t)
	var rec recorder
	rep, err := c.c.Replay(ctxFor(t), o, &rec)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Sent != 6 || rep.Copies != 1 || rep.Examined != 8 {
		t.Fatalf("report %+v, want 6 sent and 1 copy of 8 records", rep)
	}

	// Later copies of two sent messages, then compaction: the DLQ keeps
	// only the newest record of each provenance.
	late := seed{name: "late", dlqPartition: 0, origPart: 2, origOffset: 99, key: "m-7", value: validValue("evt-9", "m-7", 1), class: ClassRefused, at: baseTime}
	c.seed(t, []seed{copyOf(copyOf(seeds[1])), copyOf(seeds[0]), late})
	if c.k.Cluster == nil {
		t.Log("KAFKA_BROKERS is set: no compaction on demand; the copies stay")
	} else {
		c.k.Cluster.Compact()
		if s, err := c.c.Summarize(ctxFor(t), c.dlqTopic, Filter{}, nil); err != nil || s.Copies != 0 || s.Total != 8 {
			t.Fatalf("after compaction: %+v %v, want 8 messages and no copies", s, err)
		}
	}
	rep, err = c.c.Replay(ctxFor(t), o, nil)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Sent != 1 || !rep.Resumed {
		t.Fatalf("second run %+v, want only the late record sent", rep)
	}
	seen := map[string]int{}
	for _, m := range c.readAll(t, c.orig) {
		tr, _ := header(m, "trace")
		seen[tr]++
	}
	for tr, n := range seen {
		if n != 1 {
			t.Errorf("%s sent %d times", tr, n)
		}
	}
	if len(seen) != 7 {
		t.Errorf("%d messages sent, want 7", len(seen))
	}
}
