package dlq

import (
	"slices"
	"testing"
)

// Resolved messages leave the listing and every later replay, for every
// reader of the topic; a dry run marks nothing; Records skips the marks.
func TestResolveTakesMessagesOut(t *testing.T) {
	c := newCluster(t)
	c.seed(t, standardSeeds())
	f := Filter{Merchants: []string{"m-1"}}
	if got, err := c.c.Resolve(ctxFor(t), c.dlqTopic, f, "", true); err != nil || len(got) != 2 {
		t.Fatalf("dry run: %d %v, want 2", len(got), err)
	}
	got, err := c.c.Resolve(ctxFor(t), c.dlqTopic, f, "refunded by hand", false)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range got {
		names = append(names, e.EventID)
	}
	if slices.Sort(names); !slices.Equal(names, []string{"evt-1", "evt-3"}) {
		t.Fatalf("resolved %v, want evt-1 and evt-3", names)
	}
	c.freshClient(t)
	s, err := c.c.Summarize(ctxFor(t), c.dlqTopic, Filter{}, nil)
	if err != nil || s.Total != 5 || s.Resolved != 2 || s.ByMerchant["m-1"] != 0 {
		t.Fatalf("summary %+v %v, want 5 listed and 2 resolved", s, err)
	}
	if again, err := c.c.Resolve(ctxFor(t), c.dlqTopic, f, "", false); err != nil || len(again) != 0 {
		t.Errorf("resolving again: %d %v, want nothing left to resolve", len(again), err)
	}
	rep, err := c.c.Replay(ctxFor(t), c.options(t), nil)
	if err != nil || rep.Sent != 4 || rep.Resolved != 2 {
		t.Errorf("replay %+v %v, want 4 sent and 2 resolved", rep, err)
	}
	if recs, err := c.c.Records(ctxFor(t), c.dlqTopic); err != nil || len(recs) != 7 {
		t.Errorf("records %d %v, want the 7 without the marks", len(recs), err)
	}
}
