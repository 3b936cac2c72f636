package workerproc

import (
	"fmt"
	"strings"
	"sync"
)

// Output collects a process's output, safe for a writer and readers; with
// Max > 0 it keeps only the last Max bytes.
type Output struct {
	Max int
	mu  sync.Mutex
	buf []byte
}

func (o *Output) Write(p []byte) (int, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.buf = append(o.buf, p...)
	if over := len(o.buf) - o.Max; o.Max > 0 && over > 0 {
		o.buf = append(o.buf[:0], o.buf[over:]...)
	}
	return len(p), nil
}

func (o *Output) String() string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return string(o.buf)
}

// LastLines is the last n lines of s, with a note of how many came before.
func LastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = append([]string{fmt.Sprintf("... %d earlier lines", len(lines)-n)}, lines[len(lines)-n:]...)
	}
	return strings.Join(lines, "\n")
}
