package demo

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"
	"go.uber.org/goleak"

	"github.com/quotaflow/billing/internal/quotaevent"
	"github.com/quotaflow/billing/internal/testenv"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// The demo end to end on the local services, small: every check it prints must
// hold, and the story must be told.
func TestDemoSmall(t *testing.T) {
	// Borrow testenv's discovery so the test skips or fails like every integration test.
	db := testenv.NewEmptyMySQL(t)
	r := testenv.NewRedis(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var out bytes.Buffer
	sum, err := Run(ctx, Options{
		MySQLDSN: db.DSN, RedisAddrs: []string{r.Addr}, Partitions: 3,
		Merchants: 40, Events: 2000, Hot: 0.2, Duplicates: 0.03, Malformed: 0.02, Conflicts: 4, Refunds: 0.1, Seed: 5,
		Out: &out,
	})
	t.Log(out.String())
	if err != nil {
		t.Fatal(err)
	}
	// The corrupted missing key, and the merchants granted midway or refunded with no event after.
	hydrated := int64(1 + sum.RoutineMissing())
	if sum.Restarts != 1 || sum.Reconcile.Repaired != 4 || sum.Reconcile.Hydrated != hydrated || sum.Reconcile.Drifted != 4 || len(sum.Recheck.Findings) != 0 || !sum.Invariants.OK() {
		t.Fatalf("summary %+v", sum)
	}
	if ev := sum.Events; len(ev.Mismatch) != 0 || ev.ByType[quotaevent.Depleted] == 0 || ev.ByType[quotaevent.Recovered] == 0 || ev.ByType[quotaevent.Low] == 0 {
		t.Errorf("balance events %+v: want low, depleted and recovered, each as the ledger implies", ev)
	}
	// Refunds ahead of their payment and after it, all applied as the reference says.
	if rf := sum.Refunds; len(rf.Mismatch) != 0 || rf.Early == 0 || rf.IDs <= rf.Early || rf.States["applied"] == 0 || rf.Beyond == 0 {
		t.Errorf("refunds %+v: want some ahead of their payment, some after, some beyond their debit, all as the reference says", rf)
	}
	for _, want := range []string{"RESULT       OK", "throughput", "dead letters", "orphan_pending=1", "ahead of their payment"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q", want)
		}
	}
	if sum.Outcomes["applied"] == 0 || sum.Outcomes["insufficient"] == 0 || sum.Outcomes["unknown_merchant"] == 0 {
		t.Errorf("outcomes %v: every outcome should show up", sum.Outcomes)
	}
	// The demo removes what it made.
	var n int
	if err := db.DB.Raw("SELECT COUNT(*) FROM information_schema.schemata WHERE schema_name = ?", sum.Database).Scan(&n).Error; err != nil || n != 0 {
		t.Errorf("demo database %s left behind (%d, %v)", sum.Database, n, err)
	}
	if keys, _ := r.Client.Keys(ctx, sum.Prefix+"*").Result(); len(keys) != 0 {
		t.Errorf("%d demo keys left in Redis", len(keys))
	}
}

func TestOptionsValidate(t *testing.T) {
	o := Options{Merchants: 5, Events: 10, Partitions: 0, Rate: -1, Conflicts: 50}
	err := o.Validate()
	for _, want := range []string{"--merchants", "--events", "--partitions", "--rate", "--conflicts"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Validate() = %v, want a problem with %s", err, want)
		}
	}
}

// --keep leaves the workers running after the summary, and the URLs it prints
// answer, the read API's with the token it prints; a grant command sent to
// the grants topic it created is applied; --hot 0 (uniform traffic) is a valid demo.
func TestDemoKeepServesPrintedURLs(t *testing.T) {
	db := testenv.NewEmptyMySQL(t)
	r := testenv.NewRedis(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	out := &lockedBuffer{}
	done := make(chan error, 1)
	go func() {
		_, err := Run(ctx, Options{MySQLDSN: db.DSN, RedisAddrs: []string{r.Addr}, Partitions: 2,
			Merchants: 20, Events: 500, Hot: 0, Conflicts: 2, Seed: 7, NoRestart: true, Keep: true, Out: out})
		done <- err
	}()
	var urls []string
	for urls == nil {
		select {
		case err := <-done:
			t.Fatalf("demo ended before the keep phase: %v\n%s", err, out.String())
		case <-time.After(50 * time.Millisecond):
		}
		if text := out.String(); strings.Contains(text, "--keep:") {
			urls = regexp.MustCompile(`http://\S+`).FindAllString(text, -1)
		}
	}
	if len(urls) < 2 {
		t.Fatalf("urls %v in\n%s", urls, out.String())
	}
	text := out.String()
	token := regexp.MustCompile(`Bearer (\w+)`).FindStringSubmatch(text)
	brokers := regexp.MustCompile(`KAFKA_BROKERS=(\S+)`).FindStringSubmatch(text)
	topic := regexp.MustCompile(`KAFKA_GRANTS_TOPIC=(\S+)`).FindStringSubmatch(text)
	if token == nil || brokers == nil || topic == nil {
		t.Fatalf("no read API token, brokers or grants topic in\n%s", text)
	}
	get := func(u string) string {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
		req.Header.Set("Authorization", "Bearer "+token[1])
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("GET %s: %v\n%s", u, err, out.String())
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Errorf("GET %s: %s\n%s", u, resp.Status, body)
		}
		return string(body)
	}
	var balance string
	for _, u := range urls {
		body := get(u)
		if strings.HasSuffix(u, "/metrics") && !strings.Contains(body, "billing_events_total") {
			t.Errorf("GET %s lacks billing_events_total", u)
		}
		if strings.HasSuffix(u, "/balance") {
			balance = u
		}
	}
	if balance == "" {
		t.Fatalf("no read API balance URL in %v", urls)
	}
	tr := &kafka.Transport{}
	defer tr.CloseIdleConnections()
	w := &kafka.Writer{Addr: kafka.TCP(strings.Split(brokers[1], ",")...), Topic: topic[1], Transport: tr}
	defer w.Close()
	if err := w.WriteMessages(ctx, kafka.Message{Key: []byte("m-000001"),
		Value: []byte(`{"grant_id":"keep-try","merchant_id":"m-000001","amount":1000,"source":"demo"}`)}); err != nil {
		t.Fatalf("produce a grant command to %s: %v", topic[1], err)
	}
	for !strings.Contains(get(balance), `"keep-try"`) {
		select {
		case err := <-done:
			t.Fatalf("demo ended before the grant was applied: %v", err)
		case <-ctx.Done():
			t.Fatalf("the grant command was not applied: %s", get(balance))
		case <-time.After(100 * time.Millisecond):
		}
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("demo: %v\n%s", err, out.String())
	}
	if !strings.Contains(out.String(), "RESULT       OK") {
		t.Fatalf("demo did not pass:\n%s", out.String())
	}
}

// lockedBuffer is written by the demo and read by the test at once.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
