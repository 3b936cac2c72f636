package idgen

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"

	"github.com/quotaflow/billing/internal/testenv"
)

var (
	holderA = Holder{Pod: "billing-worker-0", IP: "10.0.0.1", Since: time.Date(2026, 11, 29, 6, 0, 0, 0, time.UTC)}
	holderB = Holder{Pod: "billing-worker-0-new", IP: "10.0.0.2", Since: time.Date(2026, 11, 29, 7, 0, 0, 0, time.UTC)}
)

func acquire(t *testing.T, r *testenv.Redis, worker int, h Holder, opts LeaseOptions) *Lease {
	t.Helper()
	l, err := AcquireLease(context.Background(), r.Client, r.Keys, worker, h, zaptest.NewLogger(t), opts)
	if err != nil {
		t.Fatalf("AcquireLease(%s): %v", h.Pod, err)
	}
	return l
}

// runLease runs l.Run in a goroutine the test owns and awaits.
func runLease(t *testing.T, l *Lease) (stop func() error) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- l.Run(ctx) }()
	var once sync.Once
	var err error
	stop = func() error {
		once.Do(func() { cancel(); err = <-done })
		return err
	}
	t.Cleanup(func() { _ = stop() })
	return stop
}

// eventually polls cond every 10ms until it holds or timeout passes.
func eventually(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("not within %v: %s", timeout, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func hwmOf(t *testing.T, r *testenv.Redis, worker int) (ms int64, token string) {
	t.Helper()
	v, err := r.Client.HGetAll(context.Background(), hwmKeyOf(r.Keys.WorkerLease(worker))).Result()
	if err != nil {
		t.Fatal(err)
	}
	ms, _ = replyInt(v["ms"])
	return ms, v["token"]
}

func unixMsOf(id ID) int64 { return int64(id)>>timeShift + EpochUnixMilli }

func TestHWMKeySharesTheLeaseSlot(t *testing.T) {
	lease := "t_x:idgen:worker:5"
	k := hwmKeyOf(lease)
	open := strings.IndexByte(k, '{')
	end := strings.IndexByte(k[open+1:], '}')
	if !strings.HasPrefix(k, lease) || open < 0 || end <= 0 || k[open+1:open+1+end] != lease {
		t.Fatalf("hwm key %q: hash tag is not the lease key %q", k, lease)
	}
}

// A nil logger means zap.NewNop(), as in lock.Options: acquiring and
// releasing a lease log nothing and do not panic.
func TestLeaseNilLogger(t *testing.T) {
	r := testenv.NewRedis(t)
	l, err := AcquireLease(context.Background(), r.Client, r.Keys, 4, holderA, nil, LeaseOptions{TTL: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Release(context.Background()); err != nil {
		t.Fatal(err)
	}
}

func TestLeaseTakeoverRefused(t *testing.T) {
	r := testenv.NewRedis(t)
	a := acquire(t, r, 5, holderA, LeaseOptions{TTL: 5 * time.Second})
	before, _ := r.Client.Get(context.Background(), r.Keys.WorkerLease(5)).Result()

	_, err := AcquireLease(context.Background(), r.Client, r.Keys, 5, holderB, zap.NewNop(), LeaseOptions{TTL: 5 * time.Second})
	var held *HeldError
	if !errors.Is(err, ErrWorkerHeld) || !errors.As(err, &held) {
		t.Fatalf("second AcquireLease = %v, want *HeldError", err)
	}
	if held.Holder.Pod != holderA.Pod || held.Holder.IP != holderA.IP || !held.Holder.Since.Equal(holderA.Since) || held.ExpiresIn <= 0 {
		t.Fatalf("HeldError names %+v (expires in %v), want %+v", held.Holder, held.ExpiresIn, holderA)
	}
	for _, want := range []string{"billing-worker-0", "10.0.0.1", "2026-11-29T06:00:00Z"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not name %s", err, want)
		}
	}
	after, _ := r.Client.Get(context.Background(), r.Keys.WorkerLease(5)).Result()
	if before != after || !a.Valid() {
		t.Fatalf("refused start changed the lease: %q -> %q, valid %v", before, after, a.Valid())
	}
	if !strings.Contains(after, `"token":`) || !strings.Contains(after, `"pod":"billing-worker-0"`) {
		t.Fatalf("lease value %q is not the holder JSON", after)
	}
	// Another worker ID is free.
	acquire(t, r, 6, holderB, LeaseOptions{TTL: 5 * time.Second})
}

// TestLeaseLossStopsIssuanceAndRunReacquires: the key is deleted and taken by
// another holder; Run notices at its next renewal and issuance stops; when
// the other holder releases, Run re-acquires and issuance resumes, after the
// other holder's IDs.
func TestLeaseLossStopsIssuanceAndRunReacquires(t *testing.T) {
	r := testenv.NewRedis(t)
	ctx := context.Background()
	m, _ := NewMetrics(nil)
	const ttl = 1500 * time.Millisecond
	a := acquire(t, r, 7, holderA, LeaseOptions{TTL: ttl, Metrics: m})
	ga := newTestGenerator(t, 7, Options{Lease: a})
	stopA := runLease(t, a)

	// Renewals keep it valid well past one TTL.
	var aBefore ID
	for end := time.Now().Add(3 * ttl / 2); time.Now().Before(end); time.Sleep(20 * time.Millisecond) {
		aBefore = mustNext(t, ga)
	}

	// Delete the key and let B take the free ID. (Should A's Run re-acquire
	// in between, delete again.) A's mark is up to one TTL ahead: B waits past it.
	var b *Lease
	for attempt := 0; b == nil; attempt++ {
		if err := r.Client.Del(ctx, r.Keys.WorkerLease(7)).Err(); err != nil {
			t.Fatal(err)
		}
		var err error
		b, err = AcquireLease(ctx, r.Client, r.Keys, 7, holderB, zap.NewNop(), LeaseOptions{TTL: ttl})
		if err != nil && (!errors.Is(err, ErrWorkerHeld) || attempt == 5) {
			t.Fatal(err)
		}
	}
	gb := newTestGenerator(t, 7, Options{Lease: b})
	bID := mustNext(t, gb)
	if bID <= aBefore {
		t.Fatalf("B's ID %d not after A's %d", bID, aBefore)
	}

	eventually(t, 3*ttl, "A stops issuing after losing the lease", func() bool {
		_, err := ga.NextID()
		return errors.Is(err, ErrLeaseNotValid)
	})
	if counterValue(m.renewLost) < 1 {
		t.Fatal("loss not counted")
	}
	if a.Valid() {
		t.Fatal("A still reports a valid lease")
	}

	bLast := mustNext(t, gb)
	if err := b.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := gb.NextID(); !errors.Is(err, ErrLeaseNotValid) {
		t.Fatalf("B issues after Release: %v", err)
	}
	var aAfter ID
	eventually(t, 3*ttl, "A re-acquires and issues again", func() bool {
		id, err := ga.NextID()
		aAfter = id
		return err == nil
	})
	if aAfter <= bLast {
		t.Fatalf("A's ID %d after re-acquiring is not after B's last %d", aAfter, bLast)
	}
	if err := stopA(); err != nil {
		t.Fatalf("Run: %v", err)
	}
	if n, _ := r.Client.Exists(ctx, r.Keys.WorkerLease(7)).Result(); n != 0 {
		t.Fatal("Run did not release on exit")
	}
	if _, err := ga.NextID(); !errors.Is(err, ErrLeaseNotValid) {
		t.Fatalf("A issues after Run ended: %v", err)
	}
}

// TestLeaseReacquireOwnMarkNoWait: when the key vanishes and nobody else
// took it, Run re-acquires and the mark (ours) does not block issuance.
func TestLeaseReacquireOwnMarkNoWait(t *testing.T) {
	r := testenv.NewRedis(t)
	m, _ := NewMetrics(nil)
	a := acquire(t, r, 8, holderA, LeaseOptions{TTL: 3 * time.Second, Metrics: m})
	ga := newTestGenerator(t, 8, Options{Lease: a})
	runLease(t, a)
	first := mustNext(t, ga)
	if err := r.Client.Del(context.Background(), r.Keys.WorkerLease(8)).Err(); err != nil {
		t.Fatal(err)
	}
	eventually(t, 5*time.Second, "Run re-acquires", func() bool { return counterValue(m.leaseAcquired) == 2 })
	// Our own mark is a TTL ahead; waiting for it would refuse for ~3s.
	if id, err := ga.NextID(); err != nil || id <= first {
		t.Fatalf("after re-acquiring our own lease: %d, %v", id, err)
	}
}

// TestLeaseExpiryStopsIssuance: without renewal the lease lapses locally
// (before Redis expires it); the next holder starts after the first one's IDs.
func TestLeaseExpiryStopsIssuance(t *testing.T) {
	r := testenv.NewRedis(t)
	const ttl = 400 * time.Millisecond
	a := acquire(t, r, 9, holderA, LeaseOptions{TTL: ttl})
	ga := newTestGenerator(t, 9, Options{Lease: a})
	aLast := mustNext(t, ga)
	eventually(t, 2*ttl, "the unrenewed lease stops issuance", func() bool {
		id, err := ga.NextID()
		if err == nil {
			aLast = id
		}
		return errors.Is(err, ErrLeaseNotValid)
	})
	var b *Lease
	eventually(t, 3*ttl, "the expired ID becomes free", func() bool {
		var err error
		b, err = AcquireLease(context.Background(), r.Client, r.Keys, 9, holderB, zap.NewNop(), LeaseOptions{TTL: ttl})
		return err == nil
	})
	gb := newTestGenerator(t, 9, Options{Lease: b})
	if id := mustNext(t, gb); id <= aLast {
		t.Fatalf("B's first ID %d not after A's last %d", id, aLast)
	}
}

// TestLeaseRestartWaitsPastHighWater: the old holder's clock ran 1.5s ahead
// (or the new one's is set back): after a clean release the new holder waits
// until its clock passes the mark, and its IDs follow the old ones.
func TestLeaseRestartWaitsPastHighWater(t *testing.T) {
	r := testenv.NewRedis(t)
	ctx := context.Background()
	a := acquire(t, r, 10, holderA, LeaseOptions{TTL: 2 * time.Second, Clock: offsetClock{1500 * time.Millisecond}})
	ga := newTestGenerator(t, 10, Options{Lease: a})
	batch := make([]ID, 5000)
	if err := ga.NextIDs(batch); err != nil {
		t.Fatal(err)
	}
	aLast := batch[len(batch)-1]
	if err := a.Release(ctx); err != nil {
		t.Fatal(err)
	}
	// Release lowered the mark from about now+1.5s+TTL to the newest
	// millisecond actually used.
	if ms, _ := hwmOf(t, r, 10); ms != unixMsOf(aLast) {
		t.Fatalf("mark after release = %d, want A's last millisecond %d", ms, unixMsOf(aLast))
	}
	if err := a.Release(ctx); err != nil {
		t.Fatalf("second Release: %v", err)
	}

	b := acquire(t, r, 10, holderB, LeaseOptions{TTL: 2 * time.Second})
	gb := newTestGenerator(t, 10, Options{Lease: b})
	bFirst := mustNext(t, gb)
	if bFirst <= aLast || decode(bFirst).Time.Compare(decode(aLast).Time) <= 0 {
		t.Fatalf("B's first ID %d (%v) not in a later millisecond than A's last %d (%v)",
			bFirst, decode(bFirst).Time, aLast, decode(aLast).Time)
	}
}

// TestLeaseCrashRestartWaitsPastHighWater: the old holder never releases; its
// lease expires and the new holder, whose clock is 1s behind, still starts
// after everything the old one could have issued.
func TestLeaseCrashRestartWaitsPastHighWater(t *testing.T) {
	r := testenv.NewRedis(t)
	const ttl = 500 * time.Millisecond
	a := acquire(t, r, 11, holderA, LeaseOptions{TTL: ttl, Clock: offsetClock{time.Second}})
	ga := newTestGenerator(t, 11, Options{Lease: a})
	var aLast ID
	for {
		id, err := ga.NextID()
		if err != nil {
			break // lapsed: A has "crashed" (no Run)
		}
		aLast = id
	}
	var b *Lease
	eventually(t, 4*ttl, "the crashed holder's lease expires", func() bool {
		var err error
		b, err = AcquireLease(context.Background(), r.Client, r.Keys, 11, holderB, zap.NewNop(), LeaseOptions{TTL: ttl})
		if err != nil && !errors.Is(err, ErrWorkerHeld) {
			t.Fatal(err)
		}
		return err == nil
	})
	gb := newTestGenerator(t, 11, Options{Lease: b})
	if id := mustNext(t, gb); id <= aLast {
		t.Fatalf("B's first ID %d not after A's last %d", id, aLast)
	}
}

// TestLeaseRestartClockFarBackRefused: a mark an hour ahead is not waited
// for: the start fails naming it, and leaves the lease free and the mark as it was.
func TestLeaseRestartClockFarBackRefused(t *testing.T) {
	r := testenv.NewRedis(t)
	ctx := context.Background()
	a := acquire(t, r, 12, holderA, LeaseOptions{TTL: time.Second, Clock: offsetClock{time.Hour}})
	ga := newTestGenerator(t, 12, Options{Lease: a})
	aLast := mustNext(t, ga)
	if err := a.Release(ctx); err != nil {
		t.Fatal(err)
	}
	markBefore, _ := hwmOf(t, r, 12)

	_, err := AcquireLease(ctx, r.Client, r.Keys, 12, holderB, zap.NewNop(), LeaseOptions{TTL: time.Second})
	var sw *StartWaitError
	if !errors.Is(err, ErrStartWaitTooLong) || !errors.As(err, &sw) {
		t.Fatalf("AcquireLease = %v, want *StartWaitError", err)
	}
	if sw.HighWater.UnixMilli() != unixMsOf(aLast) || sw.Wait < 59*time.Minute || !strings.Contains(err.Error(), "high-water mark") {
		t.Fatalf("StartWaitError %+v (%v) does not name the mark of %d", sw, err, unixMsOf(aLast))
	}
	if n, _ := r.Client.Exists(ctx, r.Keys.WorkerLease(12)).Result(); n != 0 {
		t.Fatal("refused start left the lease held")
	}
	if markAfter, _ := hwmOf(t, r, 12); markAfter != markBefore {
		t.Fatalf("refused start moved the mark %d -> %d", markBefore, markAfter)
	}
}

// TestLeaseCapsTimestampsAtMark: a clock that jumps forward past the mark the
// lease covers is refused until a renewal raises the mark.
func TestLeaseCapsTimestampsAtMark(t *testing.T) {
	r := testenv.NewRedis(t)
	fc := newFakeClock(time.Now())
	a := acquire(t, r, 13, holderA, LeaseOptions{TTL: time.Second, Clock: fc})
	g := newTestGenerator(t, 13, Options{Lease: a})
	mustNext(t, g)
	fc.Add(2 * time.Second) // past the deadline and the mark
	if _, err := g.NextID(); !errors.Is(err, ErrLeaseNotValid) {
		t.Fatalf("NextID beyond the lease = %v", err)
	}
	// Deadline still ahead (a fresh window), timestamp beyond the mark.
	a.mu.Lock()
	w := *a.window.Load()
	a.mu.Unlock()
	w.validUntil = fc.Now().Add(time.Hour)
	a.window.Store(&w)
	_, err := g.NextID()
	if !errors.Is(err, ErrLeaseNotValid) || !strings.Contains(err.Error(), "past the high-water mark") {
		t.Fatalf("NextID beyond the mark = %v", err)
	}
	a.mu.Lock()
	lost, err := a.renewLocked(context.Background())
	a.mu.Unlock()
	if lost || err != nil {
		t.Fatalf("renew: lost %v, %v", lost, err)
	}
	mustNext(t, g)
}

func TestLeaseOptionsValidated(t *testing.T) {
	r := testenv.NewRedis(t)
	ctx := context.Background()
	for name, tc := range map[string]struct {
		rdb    redis.Scripter
		worker int
		opts   LeaseOptions
	}{
		"nil client":    {nil, 1, LeaseOptions{}},
		"worker range":  {r.Client, 1024, LeaseOptions{}},
		"ttl too short": {r.Client, 1, LeaseOptions{TTL: 10 * time.Millisecond}},
	} {
		if _, err := AcquireLease(ctx, tc.rdb, r.Keys, tc.worker, holderA, nil, tc.opts); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

func TestLeaseRunOnlyOnceAndStopsOnRelease(t *testing.T) {
	r := testenv.NewRedis(t)
	a := acquire(t, r, 14, holderA, LeaseOptions{TTL: time.Second})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	eventually(t, time.Second, "Run is running", a.running.Load)
	if err := a.Run(ctx); err == nil {
		t.Fatal("second Run accepted")
	}
	if err := a.Release(context.Background()); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Run after Release: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Run did not stop on Release")
	}
}
