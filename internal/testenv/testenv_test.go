package testenv_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"
	"go.uber.org/goleak"

	"github.com/quotaflow/billing/internal/testenv"
)

// These tests would fail against a fake: they round-trip data through each real service.

func TestRedisRoundTrip(t *testing.T) {
	r := testenv.NewRedis(t)
	ctx := context.Background()
	key := r.Keys.Quota("m-1")
	if err := r.Client.HSet(ctx, key, "remain", 7).Err(); err != nil {
		t.Fatal(err)
	}
	got, err := r.Client.HGet(ctx, key, "remain").Int64()
	if err != nil || got != 7 {
		t.Fatalf("HGET = %d, %v; want 7", got, err)
	}
	info, err := r.Client.Info(ctx, "server").Result()
	if err != nil || len(info) == 0 {
		t.Fatalf("INFO server: %v", err)
	}
}

func TestMySQLIsMigratedAndOwn(t *testing.T) {
	a := testenv.NewMySQL(t)
	b := testenv.NewMySQL(t)
	if a.Name == b.Name {
		t.Fatalf("two tests share database %s", a.Name)
	}
	if err := a.DB.Exec("INSERT INTO merchant_balance (merchant_id, credited) VALUES ('m-1', 5)").Error; err != nil {
		t.Fatal(err)
	}
	var n int64
	if err := b.DB.Raw("SELECT COUNT(*) FROM merchant_balance").Scan(&n).Error; err != nil || n != 0 {
		t.Fatalf("other database sees %d rows (%v)", n, err)
	}
	var version string
	if err := a.DB.Raw("SELECT VERSION()").Scan(&version).Error; err != nil || version == "" {
		t.Fatalf("VERSION(): %q %v", version, err)
	}
	// The CHECK constraints are enforced by the server (the overdraft guard
	// is the ledger transaction's, per policy): a negative total cannot be stored.
	if err := a.DB.Exec("UPDATE merchant_balance SET debited = -1 WHERE merchant_id = 'm-1'").Error; err == nil {
		t.Fatal("server accepted a negative debited total")
	}
}

func TestKafkaRoundTrip(t *testing.T) {
	k := testenv.NewKafka(t)
	topic := k.Topic(t, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	w := &kafka.Writer{Addr: kafka.TCP(k.Brokers...), Topic: topic, RequiredAcks: kafka.RequireAll, Balancer: &kafka.Hash{}}
	defer w.Close()
	if err := w.WriteMessages(ctx, kafka.Message{Key: []byte("m-1"), Value: []byte("hello")}); err != nil {
		t.Fatal(err)
	}
	r := kafka.NewReader(kafka.ReaderConfig{Brokers: k.Brokers, Topic: topic, GroupID: topic + "-g", MaxWait: 100 * time.Millisecond})
	defer r.Close()
	m, err := r.ReadMessage(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if string(m.Value) != "hello" || string(m.Key) != "m-1" {
		t.Fatalf("got %q=%q", m.Key, m.Value)
	}
}

// The proxy holds bytes while paused, without closing anything, delivers them
// on Resume, and leaves no goroutine behind once closed.
func TestProxyPauseHoldsBytes(t *testing.T) {
	addr := testenv.NewRedis(t).Addr
	before := goleak.IgnoreCurrent()
	p := testenv.NewProxy(t, addr)
	c, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	read := func(within time.Duration) (string, error) {
		c.SetReadDeadline(time.Now().Add(within))
		buf := make([]byte, 64)
		n, err := c.Read(buf)
		return string(buf[:n]), err
	}
	if _, err := c.Write([]byte("PING\r\n")); err != nil {
		t.Fatal(err)
	}
	if got, err := read(5 * time.Second); got != "+PONG\r\n" {
		t.Fatalf("through the proxy: %q, %v", got, err)
	}
	p.Pause()
	if _, err := c.Write([]byte("PING\r\n")); err != nil {
		t.Fatal(err)
	}
	var ne net.Error
	if got, err := read(300 * time.Millisecond); !errors.As(err, &ne) || !ne.Timeout() {
		t.Fatalf("paused proxy answered: %q, %v", got, err)
	}
	p.Resume()
	if got, err := read(5 * time.Second); got != "+PONG\r\n" {
		t.Fatalf("after Resume: %q, %v; want the held PING answered", got, err)
	}
	p.Pause()
	p.Close() // also while paused
	if got, err := read(5 * time.Second); err == nil {
		t.Fatalf("connection open after Close: read %q", got)
	}
	goleak.VerifyNone(t, before)
}

// PauseAt holds the request that carries its pattern, and only from there.
func TestProxyPauseAtHoldsTheMatchingRequest(t *testing.T) {
	p := testenv.NewProxy(t, testenv.NewRedis(t).Addr)
	c, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ask := func(cmd string, within time.Duration) (string, error) {
		if _, err := c.Write([]byte(cmd)); err != nil {
			t.Fatal(err)
		}
		c.SetReadDeadline(time.Now().Add(within))
		buf := make([]byte, 64)
		n, err := c.Read(buf)
		return string(buf[:n]), err
	}
	hit := p.PauseAt([]byte("ECHO"))
	if got, err := ask("PING\r\n", 5*time.Second); got != "+PONG\r\n" {
		t.Fatalf("a request without the pattern: %q, %v", got, err)
	}
	var ne net.Error
	if got, err := ask("ECHO hi\r\n", 300*time.Millisecond); !errors.As(err, &ne) || !ne.Timeout() {
		t.Fatalf("the request with the pattern was answered: %q, %v", got, err)
	}
	select {
	case <-hit:
	default:
		t.Fatal("PauseAt's channel open after it paused")
	}
	p.Resume()
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	buf := make([]byte, 64)
	if n, err := c.Read(buf); string(buf[:n]) != "$2\r\nhi\r\n" {
		t.Fatalf("after Resume: %q, %v", buf[:n], err)
	}
}

// A test that needs the in-process broker's fault hooks, run against an
// external cluster, skips, and fails when integration is required (as in CI).
func TestFaultHooksWithoutInProcessBroker(t *testing.T) {
	external := &testenv.Kafka{Brokers: []string{"kafka:9092"}}
	for _, require := range []string{"", "1"} {
		t.Setenv(testenv.RequireEnv, require)
		r := &recorder{TB: t}
		if external.FaultHooks(r) != nil {
			t.Fatal("an external cluster has fault hooks")
		}
		const reason = "INTEGRATION TEST NOT RUN: broker fault injection needs the in-process kfake broker; KAFKA_BROKERS is set"
		switch {
		case require == "" && (r.failed != "" || r.skipped != reason):
			t.Errorf("%s unset: failed %q, skipped %q; want a skip only", testenv.RequireEnv, r.failed, r.skipped)
		case require == "1" && r.failed != reason+" ("+testenv.RequireEnv+"=1)":
			t.Errorf("%s=1: failed %q; want the reason", testenv.RequireEnv, r.failed)
		}
	}
}

// recorder notes a helper's Skip and Fatalf instead of ending the test.
type recorder struct {
	testing.TB
	skipped, failed string
}

func (r *recorder) Helper()                      {}
func (r *recorder) Skip(args ...any)             { r.skipped = fmt.Sprint(args...) }
func (r *recorder) Fatalf(f string, args ...any) { r.failed = fmt.Sprintf(f, args...) }
