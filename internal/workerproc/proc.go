// Package workerproc runs billing-worker processes and reads their /metrics:
// the one harness of the fault suite and the load tool. It builds the binary
// once, starts it with an environment and an HTTP address of its own, waits
// for it to answer, and ends it by signal with a bound.
package workerproc

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"
)

// Errors of End.
var (
	ErrExited  = errors.New("workerproc: exited before it was signalled")
	ErrTimeout = errors.New("workerproc: still running after the signal: killed")
)

// Build builds cmd/billing-worker into dir with goTool and the build flags.
func Build(ctx context.Context, goTool, dir string, flags ...string) (string, error) {
	bin := filepath.Join(dir, "billing-worker")
	args := append(append([]string{"build", "-o", bin}, flags...), "github.com/quotaflow/billing/cmd/billing-worker")
	if out, err := exec.CommandContext(ctx, goTool, args...).CombinedOutput(); err != nil {
		return "", fmt.Errorf("workerproc: build billing-worker: %w\n%s", err, out)
	}
	return bin, nil
}

// FreeAddr is a loopback address with a port free right now.
func FreeAddr() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", fmt.Errorf("workerproc: find a free port: %w", err)
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}

// Proc is one running process and the goroutine awaiting it.
type Proc struct {
	Addr string // its HTTP_ADDR
	cmd  *exec.Cmd
	done chan struct{} // closed when it has exited; then err is set
	err  error
}

// Start runs bin with env and HTTP_ADDR=addr (last, so it wins: os/exec
// keeps the last of a duplicate key); stdout and stderr go to out. The
// process is killed when ctx ends.
func Start(ctx context.Context, bin, addr string, env []string, out io.Writer) (*Proc, error) {
	p := &Proc{Addr: addr, cmd: exec.CommandContext(ctx, bin), done: make(chan struct{})}
	p.cmd.Env = append(append([]string(nil), env...), "HTTP_ADDR="+addr)
	p.cmd.Stdout, p.cmd.Stderr = out, out
	if err := p.cmd.Start(); err != nil {
		return nil, fmt.Errorf("workerproc: start %s: %w", bin, err)
	}
	go func() {
		defer close(p.done)
		p.err = p.cmd.Wait()
	}()
	return p, nil
}

// Pid is the process id.
func (p *Proc) Pid() int { return p.cmd.Process.Pid }

// Exited reports whether the process has exited, and how.
func (p *Proc) Exited() (bool, error) {
	select {
	case <-p.done:
		return true, p.err
	default:
		return false, nil
	}
}

// Signal sends sig; a process that has exited ignores it.
func (p *Proc) Signal(sig os.Signal) { _ = p.cmd.Process.Signal(sig) }

// End sends sig (after SIGCONT: a stopped process must run to die of it) and
// waits up to timeout for the exit, then kills the process. It returns the
// exit error (nil for a clean exit; a death by signal is one), ErrExited if
// the process had exited before, or ErrTimeout.
func (p *Proc) End(sig os.Signal, timeout time.Duration) error {
	if gone, err := p.Exited(); gone {
		return fmt.Errorf("%w (%v)", ErrExited, err)
	}
	p.Signal(syscall.SIGCONT)
	p.Signal(sig)
	select {
	case <-p.done:
		return p.err
	case <-time.After(timeout):
		_ = p.cmd.Process.Kill()
		<-p.done
		return fmt.Errorf("%w after %v of %v", ErrTimeout, timeout, sig)
	}
}
