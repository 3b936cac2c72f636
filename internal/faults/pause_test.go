package faults

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/quotaflow/billing/internal/testenv"
	"github.com/quotaflow/billing/internal/workload"
)

// fencedMetric counts the fenced script calls a worker's token check refused.
const fencedMetric = "billing_deduct_fenced_total"

// notFenced starts the failure of fencing rounds that saw no refusal by a
// script of mustRefuse.
const notFenced = "no write of the thawed worker was refused by the token check of"

// A worker process is frozen with SIGSTOP (a long GC pause, a stalled VM)
// while it holds merchant locks mid-batch. Two faults, each with its proof:
//
//  1. fencing (at least size(2, 6) rounds): the worker's MySQL traffic is
//     held (a paused proxy), so its locked batches wait between two fenced
//     scripts; it is frozen just after its watchdog renewed, and its locks
//     change hands (as when they expire or a failover loses them: the frozen
//     watchdog has not seen it). Thawed, its batch's next script carries the
//     old token and must be refused (billing_deduct_fenced_total{script}):
//     rounds go on, at most maxFenceRounds, until deduct.lua, settle.lua and
//     hydrate.lua have each been refused. A watchdog that gets there first (renewal due
//     in TTL/3 = 667ms) only makes a round refuse nothing.
//  2. a freeze past the lock TTL and the group session: a second worker takes
//     over its partitions and merchants, then the first is thawed and carries
//     on with locks it no longer holds. The invariants must hold; what it
//     dead-letters again is a copy of a record of the same provenance.
//
// TestUnfencedScriptsFailThePausedWorker runs this with one script at a time
// without its token check and expects the fencing rounds to fail.
func TestPausedWorkerIsFenced(t *testing.T) {
	t.Parallel()
	p := newPlan(t)
	ctx, cancel := context.WithTimeout(context.Background(), size(3*time.Minute, 15*time.Minute))
	defer cancel()
	g := newRig(t, rigOptions{partitions: 4})
	p.use(g)
	cfg := mixedLoad("pause-")
	cfg.Skew = workload.Skew{Kind: workload.Hot, Param: 0.4} // one merchant nearly always locked
	// 30s of load in CI: the fencing rounds take about 2s each (up to 12 of
	// them), the freeze about 10s (a 6s session, then the locks' 2s TTL twice).
	tr := traffic(t, p.seed(), cfg, size(7500, 30000), 5)
	g.grantTraffic(ctx, tr.Merchants(), 10000)
	sql := testenv.NewProxy(t, g.dbAddr())
	a := g.startProc(1, map[string]string{"MYSQL_DSN": g.dsnVia(sql.Addr())})
	load := p.startLoad(ctx, tr.Messages, size(250, 500))
	if err := waitCounter(ctx, a, `billing_events_total{outcome="applied"}`, 50, 30*time.Second); err != nil {
		t.Fatal(err)
	}

	// Which script a round's batch meets first after the thaw depends on where
	// MySQL held it (see holdMySQL): the rounds go on until each script in
	// mustRefuse was refused at least once, so that a mutant without the
	// check of any one of them fails here.
	refused := map[string]float64{}
	rounds := 0
	for ; rounds < size(2, 6) || unrefused(refused) != ""; rounds++ {
		if rounds == maxFenceRounds {
			t.Fatalf("%s %s.lua in %d fencing rounds (refused by script: %v)", notFenced, unrefused(refused), rounds, refused)
		}
		p.await(ctx, between(p.rng, 200*time.Millisecond, time.Second))
		p.fired(ctx, "fence", a.name, "")
		for script, n := range g.fenceRound(ctx, a, sql, unrefused(refused)) {
			refused[script] += n
		}
	}
	t.Logf("%d fencing round(s); refused by script: %v", rounds, refused)

	p.await(ctx, between(p.rng, 200*time.Millisecond, time.Second))
	held := g.freezeHolding(ctx, a, nil)
	p.fired(ctx, "pause", a.name, fmt.Sprintf("holding %d lock(s) %s", len(held), names(held)))
	paused := time.Now()
	b := g.startProc(2, nil)
	// The second worker gets the partitions once the frozen one's session has
	// expired, and the frozen one's locks expire or are taken over. It may
	// apply nothing yet: frozen mid-transaction, the first worker holds
	// merchant_balance rows, which InnoDB makes the second wait for (up to
	// its 50s lock wait timeout) until the thaw ends that transaction.
	if err := waitCounter(ctx, b, "billing_consumer_messages_total", 1, 45*time.Second); err != nil {
		t.Fatalf("the second worker never took over: %v", err)
	}
	for {
		now := g.lockHolders(ctx)
		still := 0
		for k, tok := range held {
			if now[k] == tok {
				still++
			}
		}
		if still == 0 && time.Since(paused) > 2*lockTTL {
			break
		}
		if time.Since(paused) > 45*time.Second {
			t.Fatalf("%d lock(s) of the frozen worker still held after 45s", still)
		}
		time.Sleep(100 * time.Millisecond)
	}
	time.Sleep(between(p.rng, 0, 2*time.Second)) // the other worker keeps going on the same merchants
	if !load.running() {
		t.Errorf("the load ended while %s was frozen: lengthen it", a.name)
	}
	a.Resume()
	t.Logf("SIGCONT %s after %v frozen (lock TTL %v, session %v)", a.name, time.Since(paused).Round(time.Millisecond), lockTTL, sessionTimeout)

	if err := load.wait(); err != nil {
		t.Fatal(err)
	}
	g.drain(ctx, 90*time.Second)
	am, bm := a.Total(ctx), b.Total(ctx)
	t.Logf("drained; the thawed worker: %.0f fenced script call(s) refused, lock lost in %.0f batch(es), %.0f batch failure(s); the group re-processed %.0f duplicate(s); dead letters published: %s %.0f, %s %.0f",
		am.Sum(fencedMetric), am.Sum("billing_deduct_lock_lost_total"), am.Sum("billing_deduct_batch_failures_total"),
		outcome(am, "duplicate")+outcome(bm, "duplicate"), a.name, am.Sum("billing_dlq_published_total"), b.name, bm.Sum("billing_dlq_published_total"))
	p.expect("fence", size(2, 6))
	p.expect("pause", 1)
	a.Stop()
	b.Stop()
	g.settle(ctx, newTruth(tr).produced)
}

// fencedScripts are the scripts with a token check, as
// billing_deduct_fenced_total labels them.
var fencedScripts = []string{"deduct", "settle", "hydrate", "drop"}

// mustRefuse are those the fencing rounds reach: a batch held by MySQL waits
// before its deduction (the existing-events query), its hydration (the
// balances query, after a missing cache) or its settle (the ledger commit).
// drop.lua runs only after MySQL refused what Redis allowed, which the rounds
// cannot cause; TestDropIsFenced in the deduct package refuses it.
var mustRefuse = []string{"deduct", "settle", "hydrate"}

// maxFenceRounds bounds the fencing rounds: holding MySQL at random, 6 runs
// had deduct.lua and settle.lua both refused after 2 to 7 rounds, settle.lua
// the rare one; aimed (holdMySQL), settle.lua and hydrate.lua were refused in
// the first round aimed at each. 12 leaves room; a mutant run costs all 12.
const maxFenceRounds = 12

// unrefused is the first script of mustRefuse not refused yet, or "".
func unrefused(refused map[string]float64) string {
	for _, s := range mustRefuse {
		if refused[s] == 0 {
			return s
		}
	}
	return ""
}

// holdMySQL pauses the worker's MySQL proxy so that a locked batch's next
// script is next: settle.lua as it begins its ledger transaction, hydrate.lua
// as it reads the balances of the quota hashes just deleted here. deduct.lua
// follows the existing-events query, a prepared statement with no text to
// wait for: the proxy is paused wherever the batches are.
func (g *rig) holdMySQL(ctx context.Context, sql *testenv.Proxy, next string) {
	var at string
	switch next {
	case "settle":
		at = "START TRANSACTION"
	case "hydrate":
		at = "SELECT /* balances */"
		iter := g.rdb.Scan(ctx, 0, g.keys.Prefix()+"quota:*", 1000).Iterator()
		for iter.Next(ctx) { // a cache loss: the invariants allow a missing hash
			g.rdb.Del(ctx, iter.Val())
		}
	default:
		sql.Pause() // w's locked batches wait on MySQL, between two fenced scripts
		return
	}
	select {
	case <-sql.PauseAt([]byte(at)):
	case <-time.After(5 * time.Second):
		g.t.Logf("no %q sent in 5s; holding MySQL wherever it is", at)
		sql.Pause()
	}
}

// fenceRound is fault 1 of TestPausedWorkerIsFenced; it returns how many
// calls of each fenced script of w refused the old token. A round in which
// w's watchdog noticed the loss before its batch wrote refuses none.
func (g *rig) fenceRound(ctx context.Context, w *proc, sql *testenv.Proxy, next string) map[string]float64 {
	g.t.Helper()
	const taken = "taken-while-frozen"
	before := w.Total(ctx)
	g.holdMySQL(ctx, sql, next)
	held := g.freezeHolding(ctx, w, sql)
	for k := range held {
		if err := g.rdb.Set(ctx, k, taken, 10*lockTTL).Err(); err != nil {
			g.t.Fatal(err)
		}
	}
	sql.Resume() // the answers wait in w's sockets
	w.Resume()
	after := before
	deadline := time.Now().Add(5 * time.Second) // the write follows the thaw within milliseconds
	for after.Sum(fencedMetric) <= before.Sum(fencedMetric) && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
		after = w.Total(ctx)
	}
	for k := range held { // the other holder is done: w's batches may lock again
		g.rdb.Eval(ctx, "if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end return 0", []string{k}, taken)
	}
	refused := map[string]float64{}
	for _, s := range fencedScripts {
		key := fmt.Sprintf("%s{script=%q}", fencedMetric, s)
		if n := after[key] - before[key]; n > 0 {
			refused[s] = n
		}
	}
	g.t.Logf("fencing round: %s froze holding %s; thawed, its writes refused by a token check: %v", w.name, names(held), refused)
	return refused
}

// freezeHolding freezes w (SIGSTOP) at a moment it holds merchant locks, just
// after its watchdog renewed one when sql is set (w's MySQL is then paused:
// its locked batches wait there), and returns them. Only w may hold locks.
func (g *rig) freezeHolding(ctx context.Context, w *proc, sql *testenv.Proxy) map[string]string {
	g.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		held := g.lockHolders(ctx)
		if len(held) == 0 {
			time.Sleep(5 * time.Millisecond)
			continue
		}
		if sql != nil && !g.renewedNow(ctx, held) {
			continue
		}
		w.Pause()
		if held = g.lockHolders(ctx); len(held) > 0 {
			return held
		}
		w.Resume()
	}
	g.t.Fatalf("%s never held a merchant lock in 30s", w.name)
	return nil
}

// renewedNow waits up to a renewal period (TTL/3) for a watchdog to renew one
// of held (its PTTL jumps back up) and reports whether one did.
func (g *rig) renewedNow(ctx context.Context, held map[string]string) bool {
	var key string
	for k := range held {
		key = k
		break
	}
	last := g.rdb.PTTL(ctx, key).Val()
	for end := time.Now().Add(lockTTL / 2); time.Now().Before(end); {
		time.Sleep(2 * time.Millisecond)
		ttl := g.rdb.PTTL(ctx, key).Val()
		if ttl <= 0 {
			return false // released
		}
		if ttl > last {
			return true
		}
		last = ttl
	}
	return false
}

// dbAddr is the host:port of the rig's MySQL server.
func (g *rig) dbAddr() string {
	g.t.Helper()
	cfg, err := mysql.ParseDSN(g.db.DSN)
	if err != nil {
		g.t.Fatal(err)
	}
	return cfg.Addr
}

// dsnVia is the rig's MySQL DSN through addr (a proxy).
func (g *rig) dsnVia(addr string) string {
	g.t.Helper()
	cfg, err := mysql.ParseDSN(g.db.DSN)
	if err != nil {
		g.t.Fatal(err)
	}
	cfg.Addr = addr
	return cfg.FormatDSN()
}

// The suite's power over fencing, measured in every run: for each script of
// mustRefuse, TestPausedWorkerIsFenced is run again in a child process whose
// workers are built with the unfenced tag and that script without its token
// check, and must fail naming it. The child stops at its fencing rounds, so
// each costs about their length.
func TestUnfencedScriptsFailThePausedWorker(t *testing.T) {
	t.Parallel()
	if *unfencedFlag != "" || *replayFlag != "" {
		t.Skip("this is a mutant or a replay run")
	}
	for _, script := range mustRefuse {
		t.Run(script, func(t *testing.T) { unfencedRun(t, script) })
	}
}

// unfencedRun runs the paused-worker scenario with script unfenced and
// checks that it failed on fencing and left its schedule.
func unfencedRun(t *testing.T, script string) {
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	dir := t.TempDir()
	args := []string{"-test.run=^TestPausedWorkerIsFenced$", "-test.count=1", "-test.v", "-faults.unfenced=" + script,
		"-faults.schedules=" + dir, fmt.Sprintf("-faults.long=%v", *longFlag)}
	if *seedFlag != 0 {
		args = append(args, fmt.Sprintf("-faults.seed=%d", *seedFlag))
	}
	out, err := exec.CommandContext(ctx, os.Args[0], args...).CombinedOutput()
	var exit *exec.ExitError
	if !errors.As(err, &exit) {
		t.Fatalf("the paused-worker scenario passed (%v) without the token check of %s.lua: it cannot tell fenced from unfenced\n%s", err, script, lastLines(string(out), 60))
	}
	want := notFenced + " " + script + ".lua"
	var found []string
	for line := range strings.Lines(string(out)) {
		if strings.Contains(line, want) {
			found = append(found, strings.TrimSpace(line))
		}
	}
	if len(found) == 0 {
		t.Fatalf("the scenario failed without the token check of %s.lua (%v), but not on %q:\n%s", script, err, want, lastLines(string(out), 80))
	}
	t.Logf("without the token check of %s.lua the scenario failed as it must:\n%s", script, strings.Join(found, "\n"))
	// The failed run left its schedule for a replay.
	files, err := filepath.Glob(filepath.Join(dir, "TestPausedWorkerIsFenced-*.json"))
	if err != nil || len(files) != 1 {
		t.Fatalf("the failed run wrote %v as its schedule (%v), want one file", files, err)
	}
	s, err := readSchedule(files[0])
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Steps) == 0 || s.Steps[0].Fault != "fence" || s.Test != "TestPausedWorkerIsFenced" {
		t.Errorf("the failed run's schedule %+v does not start with its fencing round", s)
	}
}

// The scripts the paused worker cannot reach (see mustRefuse) are measured
// the same way on their package tests: each built without that script's
// token check must fail.
func TestUnfencedScriptsFailTheirPackageTests(t *testing.T) {
	t.Parallel()
	if *unfencedFlag != "" || *replayFlag != "" {
		t.Skip("this is a mutant or a replay run")
	}
	for _, c := range []struct{ script, pkg, test, want string }{
		{"drop", "./internal/deduct", "TestDropIsFenced", "want ErrLockLost"},
		// The rebalance's and the reconciler's shard rewrite: reached by a
		// sharded merchant only, which the paused worker has none of.
		{"rewrite", "./internal/quota", "TestRewriteIsFenced", "want ErrNotHeld"},
	} {
		t.Run(c.script, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
			defer cancel()
			args := append([]string{"test", "-count=1"}, unfencedArgs(c.script)...)
			cmd := exec.CommandContext(ctx, testenv.GoTool(), append(args, "-run=^"+c.test+"$", c.pkg)...)
			cmd.Dir = "../.."
			out, err := cmd.CombinedOutput()
			var exit *exec.ExitError
			if !errors.As(err, &exit) || !strings.Contains(string(out), c.want) {
				t.Fatalf("%s passed or failed otherwise (%v) without the token check of %s.lua, want %q:\n%s", c.test, err, c.script, c.want, lastLines(string(out), 40))
			}
		})
	}
}

// lockHolders returns every merchant lock key of the rig with its token.
func (g *rig) lockHolders(ctx context.Context) map[string]string {
	out := map[string]string{}
	iter := g.rdb.Scan(ctx, 0, g.keys.Prefix()+"lock:*", 1000).Iterator()
	for iter.Next(ctx) {
		if v, err := g.rdb.Get(ctx, iter.Val()).Result(); err == nil {
			out[iter.Val()] = v
		}
	}
	return out
}

func names(m map[string]string) string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k[strings.LastIndexByte(k, ':')+1:])
	}
	sort.Strings(ks)
	return strings.Join(ks, ",")
}

// waitCounter waits until a worker's counter (a sample, or a metric summed
// over its labels) reaches at least min.
func waitCounter(ctx context.Context, p *proc, key string, min float64, within time.Duration) error {
	deadline := time.Now().Add(within)
	var last float64
	for time.Now().Before(deadline) {
		if m, err := p.Scrape(ctx); err == nil {
			if last = m.Sum(key); last >= min {
				return nil
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	return fmt.Errorf("%s: %s = %v after %v, want >= %v", p.name, key, last, within, min)
}
