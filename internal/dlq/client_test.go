package dlq

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"
)

func TestWatermarksAndScanRange(t *testing.T) {
	c := newCluster(t)
	c.seed(t, standardSeeds()) // 4 records on partition 0, 3 on partition 1
	rs, err := c.c.watermarks(ctxFor(t), c.dlqTopic)
	if err != nil {
		t.Fatal(err)
	}
	if want := []Range{{0, 0, 4}, {1, 0, 3}}; len(rs) != 2 || rs[0] != want[0] || rs[1] != want[1] {
		t.Fatalf("watermarks %v, want %v", rs, want)
	}
	var got []string
	err = c.c.scan(ctxFor(t), c.dlqTopic, []Range{{1, 1, 3}, {0, 2, 3}}, func(m kafka.Message) error {
		got = append(got, fmt.Sprintf("%d/%d", m.Partition, m.Offset))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(got, " ") != "1/1 1/2 0/2" {
		t.Fatalf("scanned %v", got)
	}
	if _, err := c.c.watermarks(ctxFor(t), "no-such-topic"); err == nil {
		t.Fatal("watermarks of a missing topic")
	}
	recs, err := c.c.Records(ctxFor(t), c.dlqTopic)
	if err != nil || len(recs) != 7 || recs[0].Partition != 0 || recs[6].Partition != 1 || recs[0].OriginalTopic != c.orig {
		t.Fatalf("Records: %d records, err %v", len(recs), err)
	}
}

// Offsets that never arrive fail the scan instead of passing for an empty
// partition: an unreachable broker must not look like the end of the DLQ.
func TestScanStallFails(t *testing.T) {
	c := newCluster(t)
	c.seed(t, standardSeeds()[:1])
	c.c.pollWait, c.c.stall = 100*time.Millisecond, 500*time.Millisecond
	n := 0
	err := c.c.scan(ctxFor(t), c.dlqTopic, []Range{{0, 0, 5}}, func(kafka.Message) error { n++; return nil })
	if err == nil || !strings.Contains(err.Error(), "delivered nothing") || n != 1 {
		t.Fatalf("err %v after %d message(s), want a stall error after 1", err, n)
	}
}
