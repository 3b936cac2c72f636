package dlq

import (
	"maps"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"
)

func TestSummarize(t *testing.T) {
	c := newCluster(t)
	at := c.seed(t, standardSeeds())
	// A message someone else put on the DLQ: no dead-letter headers.
	c.write(t, kafka.Message{Topic: c.dlqTopic, Partition: 1, Key: []byte("m-9"), Value: []byte("stray"), Time: baseTime.Add(90 * time.Minute)})

	var listed []Entry
	s, err := c.c.Summarize(ctxFor(t), c.dlqTopic, Filter{}, func(e Entry) error { listed = append(listed, e); return nil })
	if err != nil {
		t.Fatal(err)
	}
	if s.Total != 8 || s.Unreadable != 1 || s.Replayed != 2 {
		t.Errorf("total %d unreadable %d replayed %d, want 8 1 2", s.Total, s.Unreadable, s.Replayed)
	}
	wantClass := map[Class]int{ClassInvalid: 2, ClassConflict: 2, ClassRefused: 1, ClassExhausted: 2}
	if !maps.Equal(s.ByClass, wantClass) {
		t.Errorf("by class %v, want %v", s.ByClass, wantClass)
	}
	if want := map[string]int{c.orig: 7}; !maps.Equal(s.ByTopic, want) {
		t.Errorf("by topic %v, want %v", s.ByTopic, want)
	}
	// m-3: malformed value, merchant from the key; "?": malformed and no key; m-9: the stray's key.
	wantMerchant := map[string]int{"m-1": 2, "m-2": 2, "m-3": 1, "m-4": 1, UnknownMerchant: 1, "m-9": 1}
	if !maps.Equal(s.ByMerchant, wantMerchant) {
		t.Errorf("by merchant %v, want %v", s.ByMerchant, wantMerchant)
	}
	if !s.Oldest.Equal(baseTime) || !s.Newest.Equal(baseTime.Add(90*time.Minute)) {
		t.Errorf("oldest %v newest %v", s.Oldest, s.Newest)
	}

	// The list: every record once, partition then offset order, fields decoded.
	if len(listed) != 8 {
		t.Fatalf("listed %d entries, want 8", len(listed))
	}
	for i := 1; i < len(listed); i++ {
		a, b := listed[i-1], listed[i]
		if a.Partition > b.Partition || (a.Partition == b.Partition && a.Offset >= b.Offset) {
			t.Fatalf("list out of order at %d: %d/%d then %d/%d", i, a.Partition, a.Offset, b.Partition, b.Offset)
		}
	}
	byPos := map[pos]Entry{}
	for _, e := range listed {
		byPos[pos{e.Partition, e.Offset}] = e
	}
	checks := []struct {
		name, eventID, merchant string
		class                   Class
		replays                 int
	}{
		{"inv-m3", "evt-bad", "m-3", ClassInvalid, 0},
		{"conf-m1", "evt-1", "m-1", ClassConflict, 0},
		{"inv-nokey", "", UnknownMerchant, ClassInvalid, 0},
		{"conf-m2-max", "evt-4", "m-2", ClassConflict, 3},
		{"exh-m4-once", "evt-5", "m-4", ClassExhausted, 1},
	}
	for _, ck := range checks {
		e := byPos[at[ck.name]]
		if e.EventID != ck.eventID || e.Merchant != ck.merchant || e.Class != ck.class || e.ReplayCount != ck.replays || e.Err != nil {
			t.Errorf("%s: got event %q merchant %q class %q replays %d err %v", ck.name, e.EventID, e.Merchant, e.Class, e.ReplayCount, e.Err)
		}
		if e.Message != "boom: "+ck.name || e.OriginalTopic != c.orig {
			t.Errorf("%s: message %q original topic %q", ck.name, e.Message, e.OriginalTopic)
		}
	}
}

// The scan stops at the high watermark captured at the start, joins no group,
// and leaves nothing behind on the broker.
func TestSummarizeIsBoundedAndJoinsNoGroup(t *testing.T) {
	c := newCluster(t)
	c.seed(t, standardSeeds())
	var n int
	s, err := c.c.Summarize(ctxFor(t), c.dlqTopic, Filter{}, func(e Entry) error {
		if n++; n == 1 { // the DLQ grows while we read it
			c.seed(t, standardSeeds()[:3])
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if s.Total != 7 || n != 7 {
		t.Errorf("total %d, callbacks %d; want the 7 records present at the start", s.Total, n)
	}
	admin := &kafka.Client{Addr: kafka.TCP(c.k.Brokers...), Transport: c.tr, Timeout: 10 * time.Second}
	groups, err := admin.ListGroups(ctxFor(t), &kafka.ListGroupsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if len(groups.Groups) != 0 {
		t.Errorf("consumer groups on the broker after ls: %+v", groups.Groups)
	}
}
