package load

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
)

// The worker's consumer metrics carry a topic label (payments and grants):
// scrape sums a histogram's series, so the payments' batches still count.
func TestScrapeSumsLabelledSeries(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprint(w, "go_goroutines 12\ngo_memstats_heap_inuse_bytes 4096\n"+
			"billing_batch_size_count{topic=\"payment.succeeded\"} 7\nbilling_batch_size_count{topic=\"quota.grants\"} 0\n"+
			"billing_batch_size_sum{topic=\"payment.succeeded\"} 700\nbilling_batch_size_sum{topic=\"quota.grants\"} 0\n")
	}))
	defer srv.Close()
	got, err := (&workerProc{httpAddr: srv.Listener.Addr().String()}).scrape(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if got.goroutines != 12 || got.heapBytes != 4096 || got.batches != 7 || got.batchEvents != 700 {
		t.Errorf("scraped %+v", got)
	}
}
