package faults

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"encoding/json"
	"flag"
	"fmt"
	mrand "math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"
)

var (
	replayFlag   = flag.String("faults.replay", "", "drive the faults of the scenario -run selects from this schedule (one a failed run wrote): its seed, and each fault at its recorded ledger row count")
	schedulesDir = flag.String("faults.schedules", filepath.Join(os.TempDir(), "billing-faults"), "where a failed scenario writes its schedule")
)

// step is one fault as it happened: its kind, the worker it hit, and how
// many ledger rows there were and how many messages the load had produced
// when it fired (its trigger on replay: the row count alone stands still
// while a group rebalances, the produced count alone runs ahead of a
// stalled group).
type step struct {
	Fault    string `json:"fault"`
	Worker   string `json:"worker,omitempty"`
	After    int64  `json:"after_ledger_rows"`
	Produced int64  `json:"after_produced"`
	Detail   string `json:"detail,omitempty"`
}

// schedule is what a scenario did: the seed of its traffic and fault
// parameters, and its faults in order.
type schedule struct {
	Test  string `json:"test"`
	Seed  uint64 `json:"seed"`
	Long  bool   `json:"long"`
	Steps []step `json:"steps"`
}

// plan drives a scenario's faults. Live, each fault waits a seeded sleep;
// replaying a schedule, it waits until the ledger holds the row count the
// recorded fault fired at. Either way it records the faults as they fire and,
// when the test fails, writes them to a file its log names.
type plan struct {
	t      *testing.T
	rng    *mrand.Rand
	start  time.Time
	replay *schedule // nil when live
	done   schedule
	g      *rig  // counts ledger rows; set by use
	load   *load // set by startLoad
}

// newPlan starts a scenario's plan: from -faults.replay when it names this
// test's schedule, else live from -faults.seed or a fresh seed.
func newPlan(t *testing.T) *plan {
	t.Helper()
	if *replayFlag == "" {
		return startPlan(t, nil)
	}
	s, err := readSchedule(*replayFlag)
	if err != nil {
		t.Fatal(err)
	}
	if s.Test != t.Name() {
		t.Skipf("-faults.replay holds a schedule of %s", s.Test)
	}
	return startPlan(t, s)
}

// startPlan starts a plan that replays s, or a live one when s is nil.
func startPlan(t *testing.T, s *schedule) *plan {
	t.Helper()
	seed := *seedFlag
	if s != nil {
		if s.Long != *longFlag {
			t.Fatalf("the schedule was recorded with -faults.long=%v: replay it with the same", s.Long)
		}
		seed = s.Seed
	}
	if seed == 0 {
		var b [8]byte
		if _, err := rand.Read(b[:]); err != nil {
			t.Fatal(err)
		}
		seed = binary.LittleEndian.Uint64(b[:]) >> 1 // stays positive when printed as a signed flag value
	}
	t.Logf("seed=%d (replay with -faults.seed=%d)", seed, seed)
	p := &plan{t: t, rng: mrand.New(mrand.NewPCG(seed, seed^0x5eed)), start: time.Now(), replay: s,
		done: schedule{Test: t.Name(), Seed: seed, Long: *longFlag}}
	t.Cleanup(func() {
		if t.Failed() {
			p.write()
		}
	})
	return p
}

// seed is the seed of the scenario's traffic and fault parameters.
func (p *plan) seed() uint64 { return p.done.Seed }

// use counts the faults' trigger points in g's ledger.
func (p *plan) use(g *rig) { p.g = g }

// startLoad starts the scenario's load (see rig.startLoad), and every later
// fault checks that it is still producing: a fault after the load ended hits
// an idle group and proves nothing. Replaying, the load's last chunk waits
// until the scenario waits for the load (its faults are over), because a
// replayed fault waits for ledger rows: a group that rebalances slower than
// in the recorded run would otherwise see the load end first.
func (p *plan) startLoad(ctx context.Context, msgs []kafka.Message, rate int) *load {
	if p.replay != nil && len(p.replay.Steps) > 0 {
		p.load = p.g.startHeldLoad(ctx, msgs, rate)
	} else {
		p.load = p.g.startLoad(ctx, msgs, rate)
	}
	return p.load
}

// await waits before the next fault: live, d; replaying, until the ledger
// holds the recorded fault's row count and the load has produced its count.
func (p *plan) await(ctx context.Context, d time.Duration) {
	p.t.Helper()
	if p.replay == nil {
		sleepCtx(ctx, d)
		return
	}
	i := len(p.done.Steps)
	if i >= len(p.replay.Steps) {
		return // fired says so if a fault follows
	}
	want := p.replay.Steps[i]
	deadline := time.Now().Add(2 * time.Minute)
	for p.produced() < want.Produced || p.rows(ctx) < want.After {
		if p.load != nil && p.produced() < want.Produced && p.load.holding() {
			// The recorded fault came after the load's last chunk: this one
			// can only come as the load ends.
			p.load.release()
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			p.t.Fatalf("replay: fault %d (%s) waits for %d ledger rows and %d messages produced; there are %d and %d",
				i+1, want.Fault, want.After, want.Produced, p.rows(ctx), p.produced())
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// more says whether a scenario whose number of faults depends on time makes
// fault i: live, when live says so; replaying, while the schedule has one.
func (p *plan) more(i int, live bool) bool {
	if p.replay != nil {
		return i < len(p.replay.Steps)
	}
	return live
}

// fired records a fault about to be injected into worker (empty: the group
// or a service), checking it against the replayed schedule and the load.
func (p *plan) fired(ctx context.Context, fault, worker, detail string) {
	p.t.Helper()
	s := step{Fault: fault, Worker: worker, After: p.rows(ctx), Produced: p.produced(), Detail: detail}
	i := len(p.done.Steps)
	p.done.Steps = append(p.done.Steps, s)
	if p.replay != nil {
		if i >= len(p.replay.Steps) || p.replay.Steps[i].Fault != fault || p.replay.Steps[i].Worker != worker {
			p.t.Fatalf("replay: fault %d is %s on %q, the schedule has %v", i+1, fault, worker, p.replay.Steps[i:min(i+1, len(p.replay.Steps))])
		}
	}
	p.t.Logf("%5.1fs: fault %d: %s %s after %d ledger rows, %d messages produced %s",
		time.Since(p.start).Seconds(), i+1, fault, worker, s.After, s.Produced, detail)
	if p.load != nil && !p.load.running() {
		p.t.Errorf("fault %d (%s) came after the load had ended: lengthen the load or shorten the faults", i+1, fault)
	}
}

// expect fails the test unless at least floor faults of kind were injected.
func (p *plan) expect(fault string, floor int) {
	p.t.Helper()
	n := 0
	for _, s := range p.done.Steps {
		if s.Fault == fault {
			n++
		}
	}
	if n < floor {
		p.t.Errorf("%d %s fault(s) injected, want at least %d", n, fault, floor)
	}
}

// produced is how many messages the load has written (0 without one).
func (p *plan) produced() int64 {
	if p.load == nil {
		return 0
	}
	return p.load.sent.Load()
}

// rows is the ledger's row count, retried while the database is unreachable
// (a fault may have stopped it).
func (p *plan) rows(ctx context.Context) int64 {
	p.t.Helper()
	if p.g == nil {
		return 0
	}
	var n int64
	var err error
	for try := 0; try < 100; try++ {
		if err = p.g.db.SQL.QueryRowContext(ctx, "SELECT COUNT(*) FROM quota_ledger").Scan(&n); err == nil {
			return n
		}
		sleepCtx(ctx, 100*time.Millisecond)
	}
	p.t.Fatalf("count ledger rows: %v", err)
	return 0
}

// write saves the schedule where -faults.schedules says and logs how to replay it.
func (p *plan) write() {
	name := strings.NewReplacer("/", "_", " ", "_").Replace(p.t.Name())
	path := filepath.Join(*schedulesDir, fmt.Sprintf("%s-%d.json", name, p.done.Seed))
	if err := writeSchedule(path, p.done); err != nil {
		p.t.Logf("schedule not written: %v", err)
		return
	}
	p.t.Logf("schedule of this run in %s; replay it with: go test ./internal/faults -run '^%s$' -faults.replay=%s", path, p.t.Name(), path)
}

func writeSchedule(path string, s schedule) error {
	b, err := json.MarshalIndent(s, "", "  ")
	if err == nil {
		err = os.MkdirAll(filepath.Dir(path), 0o755)
	}
	if err == nil {
		err = os.WriteFile(path, b, 0o644)
	}
	return err
}

func readSchedule(path string) (*schedule, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("faults: -faults.replay: %w", err)
	}
	var s schedule
	if err := json.Unmarshal(b, &s); err != nil {
		return nil, fmt.Errorf("faults: -faults.replay %s: %w", path, err)
	}
	return &s, nil
}

// A recorded schedule replays: a short kill scenario runs live and writes its
// schedule; read back, it drives a second run, which must fire the same
// faults on the same workers in the same order, none before the ledger holds
// its recorded row count and the load has produced its recorded count, and
// the later of the two met within one poll: rows land in MySQL at most a
// whole uncommitted window at once (maxInFlight per partition, 4 partitions),
// the load writes 12 messages a tick.
func TestScheduleReplays(t *testing.T) {
	t.Parallel()
	if *replayFlag != "" {
		t.Skip("-faults.replay replays a schedule of its own")
	}
	// run runs a kill scenario (10s of load for 2 kills of at most 4s) that
	// replays s, or a live one when s is nil, and returns its schedule.
	run := func(name string, s *schedule) schedule {
		var done schedule
		if !t.Run(name, func(t *testing.T) {
			p := startPlan(t, s)
			killScenario(t, p, 2, 2500)
			done = p.done
		}) {
			t.FailNow()
		}
		return done
	}
	live := run("live", nil)
	path := filepath.Join(t.TempDir(), "schedule.json")
	if err := writeSchedule(path, live); err != nil {
		t.Fatal(err)
	}
	s, err := readSchedule(path)
	if err != nil {
		t.Fatal(err)
	}
	replayed := run("replay", s)
	if len(replayed.Steps) != len(live.Steps) {
		t.Fatalf("replay fired %d faults, the schedule has %d", len(replayed.Steps), len(live.Steps))
	}
	const late = maxInFlight * 4
	for i, want := range live.Steps {
		got := replayed.Steps[i]
		t.Logf("fault %d: %s on %s after %d rows and %d produced, replayed after %d and %d",
			i+1, want.Fault, want.Worker, want.After, want.Produced, got.After, got.Produced)
		if got.Fault != want.Fault || got.Worker != want.Worker || got.Detail != want.Detail {
			t.Errorf("fault %d: replayed %+v, recorded %+v", i+1, got, want)
		}
		if got.After < want.After || got.Produced < want.Produced {
			t.Errorf("fault %d fired before its trigger", i+1)
		}
		// It fires when the later of its two triggers is met: that one
		// within a poll.
		if min(got.After-want.After, got.Produced-want.Produced) > late {
			t.Errorf("fault %d fired more than %d rows or messages after its trigger", i+1, late)
		}
	}
}
