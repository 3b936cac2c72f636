package stepaside

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"go.uber.org/zap"
)

// Monitor probes a generator and gates the worker's parts by Decide: Admit
// (the consumer's Gate) and While (any Run(ctx) part) hold them out while
// the worker has stepped aside. Run it for as long as the parts run.
type Monitor struct {
	check func() error
	after time.Duration
	every time.Duration
	log   *zap.Logger
	m     *Metrics

	mu    sync.Mutex
	state State
	cause error              // the latest refusal
	serve context.Context    // ends when the worker steps aside
	stop  context.CancelFunc // ends serve
	back  chan struct{}      // closed when the worker rejoins
}

// New returns a Monitor of check (the generator's Check: nil while it would
// issue) that steps aside after refusals lasting longer than after. m may be
// nil (then metrics are kept but not registered).
func New(check func() error, after time.Duration, log *zap.Logger, m *Metrics) (*Monitor, error) {
	switch {
	case check == nil:
		return nil, errors.New("stepaside: nil check")
	case after <= 0:
		return nil, fmt.Errorf("stepaside: bound %v, want > 0", after)
	case log == nil:
		return nil, errors.New("stepaside: nil logger")
	}
	if m == nil {
		m, _ = NewMetrics(nil)
	}
	mon := &Monitor{check: check, after: after, every: probeEvery(after), log: log, m: m}
	mon.serve, mon.stop = context.WithCancel(context.Background())
	return mon, nil
}

// probeEvery is a tenth of the bound, so a step aside comes at most a tenth
// late, within 10ms..1s: a probe is an atomic load and a clock read.
func probeEvery(after time.Duration) time.Duration {
	return min(max(after/10, 10*time.Millisecond), time.Second)
}

// Run probes until ctx ends; it returns nil then.
func (m *Monitor) Run(ctx context.Context) error {
	t := time.NewTicker(m.every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
			m.probe(time.Now())
		}
	}
}

// probe asks the generator once and acts on the decision.
func (m *Monitor) probe(now time.Time) {
	err := m.check()
	m.mu.Lock()
	defer m.mu.Unlock()
	prev := m.state
	var action Action
	m.state, action = Decide(m.state, now, err != nil, m.after)
	if err != nil {
		m.cause = err
	}
	switch {
	case action == StepAside:
		m.stop()
		m.back = make(chan struct{})
		m.m.aside.Set(1)
		m.m.stepAsides.Inc()
		m.log.Error("stepping aside: the Snowflake generator has refused for longer than IDGEN_STEP_ASIDE_AFTER; "+
			"leaving the consumer groups and the relay until it issues again",
			zap.Time("refusing_since", m.state.Since), zap.Duration("after", m.after), zap.Error(err))
	case action == Rejoin:
		m.serve, m.stop = context.WithCancel(context.Background())
		close(m.back)
		m.m.aside.Set(0)
		m.log.Info("the Snowflake generator issues again; rejoining the consumer groups and the relay",
			zap.Duration("aside_for", now.Sub(prev.Since)), zap.NamedError("last_refusal", m.cause))
		m.cause = nil
	case err != nil && prev.Since.IsZero():
		m.log.Warn("the Snowflake generator refuses; stepping aside if it still does after IDGEN_STEP_ASIDE_AFTER",
			zap.Duration("after", m.after), zap.Error(err))
	}
}

// Admit blocks until the worker takes part and returns a context, derived
// from ctx, that ends when it steps aside; release frees it.
func (m *Monitor) Admit(ctx context.Context) (context.Context, context.CancelFunc, error) {
	for {
		m.mu.Lock()
		serve, back, aside := m.serve, m.back, m.state.Aside
		m.mu.Unlock()
		if !aside {
			member, cancel := context.WithCancel(ctx)
			stop := context.AfterFunc(serve, cancel)
			return member, func() { stop(); cancel() }, nil
		}
		select {
		case <-back:
		case <-ctx.Done():
			return nil, nil, ctx.Err()
		}
	}
}

// While runs run while the worker takes part: it cancels run's context when
// the worker steps aside, waits for it to return, and runs it again after
// the rejoin, until ctx ends. run must return nil when its context ends; an
// error of run ends While with it.
func (m *Monitor) While(ctx context.Context, run func(context.Context) error) error {
	for {
		member, release, err := m.Admit(ctx)
		if err != nil {
			return nil // ctx ended
		}
		err = run(member)
		release()
		if err != nil || ctx.Err() != nil {
			return err
		}
	}
}

// ErrSteppedAside is what Ready reports while the worker stands aside.
var ErrSteppedAside = errors.New("stepaside: stepped aside from the consumer groups and the relay")

// Ready is nil unless the worker has stepped aside; then it says since when
// and the generator's latest refusal (for /readyz).
func (m *Monitor) Ready(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if !m.state.Aside {
		return nil
	}
	return fmt.Errorf("%w: the Snowflake generator has refused since %s (over IDGEN_STEP_ASIDE_AFTER=%v): %w",
		ErrSteppedAside, m.state.Since.UTC().Format(time.RFC3339), m.after, m.cause)
}
