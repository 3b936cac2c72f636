package consumer

import (
	"errors"
	"strings"
	"testing"
	"time"
)

func TestHealth(t *testing.T) {
	h := newHealth()
	if err := h.err(); !errors.Is(err, ErrJoining) {
		t.Fatalf("new health = %v, want ErrJoining", err)
	}
	h.setState(nil)
	if err := h.err(); err != nil {
		t.Fatalf("joined = %v, want nil", err)
	}
	redis := errors.New("redis: connection refused")
	h.fail("lane/1", redis)
	time.Sleep(2 * time.Millisecond)
	h.fail("fetch/0", errors.New("kafka: broker unreachable"))
	h.fail("lane/1", errors.New("redis: connection reset")) // keeps its first failure time
	err := h.err()
	if err == nil || !strings.HasPrefix(err.Error(), "redis: connection reset, retrying since ") {
		t.Fatalf("err = %v, want the longest failure first", err)
	}
	h.ok("lane/1")
	if err := h.err(); err == nil || !strings.Contains(err.Error(), "broker unreachable") {
		t.Fatalf("err = %v, want the remaining failure", err)
	}
	h.ok("fetch/0")
	if err := h.err(); err != nil {
		t.Fatalf("all recovered = %v", err)
	}
	h.setState(ErrStopped)
	if err := h.err(); !errors.Is(err, ErrStopped) {
		t.Fatalf("stopped = %v", err)
	}
}
