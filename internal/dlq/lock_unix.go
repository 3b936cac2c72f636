//go:build unix

package dlq

import (
	"errors"
	"fmt"
	"os"
	"syscall"
)

// lockFile opens path for appending, creating it, and takes an exclusive,
// non-blocking flock on it. The kernel drops the lock when the process dies,
// so a killed replay leaves no stale lock behind.
func lockFile(path string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		_ = f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, ErrProgressLocked
		}
		return nil, fmt.Errorf("lock: %w", err)
	}
	return f, nil // closing it releases the lock
}
