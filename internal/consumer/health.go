package consumer

import (
	"errors"
	"fmt"
	"sync"
	"time"
)

// Readiness states reported by Ready besides failing dependencies.
var (
	ErrJoining = errors.New("consumer: joining the group, no assignment yet")
	ErrStopped = errors.New("consumer: stopped")
	// ErrLeft: the Gate closed; out of the group until it admits again.
	ErrLeft = errors.New("consumer: left the group, waiting for its gate to admit it again")
)

// health is what Ready reports: an overall state (joining, stopped) and the
// failures currently being retried, each under a key (a lane, a partition,
// the group) with the time it started failing. It is touched on state changes
// and failures only, never per message.
type health struct {
	mu      sync.Mutex
	state   error
	failing map[string]failing
}

type failing struct {
	err   error
	since time.Time
}

func newHealth() *health {
	return &health{state: ErrJoining, failing: make(map[string]failing)}
}

func (h *health) setState(err error) {
	h.mu.Lock()
	h.state = err
	h.mu.Unlock()
}

// fail records that key is retrying after err; since stays at the first failure.
func (h *health) fail(key string, err error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	f, ok := h.failing[key]
	if !ok {
		f.since = time.Now()
	}
	f.err = err
	h.failing[key] = f
}

// ok clears key.
func (h *health) ok(key string) {
	h.mu.Lock()
	delete(h.failing, key)
	h.mu.Unlock()
}

// err returns nil when ready; else ErrStopped, the longest-running failure,
// or the state (joining), in that order.
func (h *health) err() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if errors.Is(h.state, ErrStopped) {
		return h.state
	}
	var oldest failing
	for _, f := range h.failing {
		if oldest.err == nil || f.since.Before(oldest.since) {
			oldest = f
		}
	}
	if oldest.err == nil {
		return h.state
	}
	return fmt.Errorf("%w, retrying since %s", oldest.err, oldest.since.Format("15:04:05"))
}
