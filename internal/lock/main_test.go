package lock_test

import (
	"flag"
	"testing"

	"go.uber.org/goleak"
)

var totalCycles = flag.Int("lock.total", 10000,
	"obtain/release cycles of TestMutualExclusion, shared by its 64 goroutines (640000 = 64 x 10k each)")

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
