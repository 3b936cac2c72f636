//go:build !unix

package dlq

// lockFile is a no-op where flock is not available: one replay per progress
// file is then the operator's responsibility.
func lockFile(string) (func() error, error) {
	return func() error { return nil }, nil
}
