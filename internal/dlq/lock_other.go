//go:build !unix

package dlq

import "os"

// lockFile opens path for appending, creating it. Without flock one replay
// per progress file is the operator's responsibility.
func lockFile(path string) (*os.File, error) {
	return os.OpenFile(path, os.O_CREATE|os.O_RDWR|os.O_APPEND, 0o644)
}
