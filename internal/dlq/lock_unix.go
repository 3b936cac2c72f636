//go:build unix

package dlq

import (
	"errors"
	"fmt"
	"os"
	"syscall"
)

// lockFile takes an exclusive, non-blocking flock on path. The kernel drops it
// when the process dies, so a killed replay leaves no stale lock behind.
func lockFile(path string) (func() error, error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, fmt.Errorf("dlq: lock progress: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		_ = f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("%w (%s)", ErrProgressLocked, path)
		}
		return nil, fmt.Errorf("dlq: lock progress: %w", err)
	}
	return f.Close, nil // closing the descriptor releases the lock
}
