package workerproc

import (
	"context"
	"errors"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// script writes an executable shell script and returns its path.
func script(t *testing.T, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "worker")
	if err := os.WriteFile(p, []byte("#!/bin/sh\n"+body), 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestEndReportsHowTheProcessExited(t *testing.T) {
	tests := []struct {
		name, trap string
		sig        syscall.Signal
		timeout    time.Duration // long where the process ends on its own
		want       func(error) bool
	}{
		{"clean exit on SIGTERM", "trap 'exit 0' TERM", syscall.SIGTERM, time.Minute, func(err error) bool { return err == nil }},
		{"killed", "", syscall.SIGKILL, time.Minute, func(err error) bool {
			var ee *exec.ExitError
			return errors.As(err, &ee) && !errors.Is(err, ErrExited) && !errors.Is(err, ErrTimeout)
		}},
		{"ignores SIGTERM", "trap '' TERM", syscall.SIGTERM, 200 * time.Millisecond, func(err error) bool { return errors.Is(err, ErrTimeout) }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out := &started{ready: make(chan struct{})}
			p, err := Start(context.Background(), script(t, tt.trap+"\necho \"addr=$HTTP_ADDR\"\nwhile :; do sleep 0.05; done\n"), "127.0.0.1:1234", []string{"HTTP_ADDR=overridden"}, out)
			if err != nil {
				t.Fatal(err)
			}
			<-out.ready
			if err := p.End(tt.sig, tt.timeout); !tt.want(err) {
				t.Fatalf("End = %v", err)
			}
			if got := out.String(); got != "addr=127.0.0.1:1234\n" {
				t.Errorf("output %q: HTTP_ADDR must be the one given", got)
			}
		})
	}
}

// started closes ready at the first write: the script has set its trap.
type started struct {
	Output
	ready chan struct{}
	once  sync.Once
}

func (s *started) Write(p []byte) (int, error) {
	defer s.once.Do(func() { close(s.ready) })
	return s.Output.Write(p)
}

func TestEndAfterAnExitIsErrExited(t *testing.T) {
	p, err := Start(context.Background(), script(t, "exit 3\n"), "127.0.0.1:1", nil, &Output{})
	if err != nil {
		t.Fatal(err)
	}
	<-p.done
	if gone, err := p.Exited(); !gone || err == nil {
		t.Fatalf("Exited = %v, %v", gone, err)
	}
	if err := p.End(syscall.SIGTERM, time.Second); !errors.Is(err, ErrExited) {
		t.Fatalf("End = %v, want ErrExited", err)
	}
}

func TestOutputKeepsItsTail(t *testing.T) {
	o := &Output{Max: 4}
	o.Write([]byte("abc"))
	o.Write([]byte("def"))
	if o.String() != "cdef" {
		t.Fatalf("tail %q", o.String())
	}
	if got := LastLines("a\nb\nc\n", 2); got != "... 1 earlier lines\nb\nc" {
		t.Fatalf("LastLines = %q", got)
	}
}

func TestScrapeSumsSeriesAndBuckets(t *testing.T) {
	page := `# TYPE x counter
billing_events_total{outcome="applied"} 5
billing_events_total{outcome="duplicate"} 2
go_goroutines 12
h_bucket{topic="a",le="0.5"} 1
h_bucket{topic="b",le="0.5"} 2
h_bucket{topic="a",le="+Inf"} 4
h_bucket{topic="b",le="+Inf"} 3
h_bucket{topic="a",le="1"} 3
h_count 7
`
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/metrics" {
			http.NotFound(w, r)
			return
		}
		w.Write([]byte(page))
	}))
	defer srv.Close()
	addr := srv.Listener.Addr().String()
	m, err := Scrape(context.Background(), addr)
	if err != nil {
		t.Fatal(err)
	}
	if m.Sum("billing_events_total") != 7 || m[`billing_events_total{outcome="duplicate"}`] != 2 || m.Sum("go_goroutines") != 12 {
		t.Errorf("samples %v", m)
	}
	b := m.Buckets("h")
	if len(b) != 3 || b[0] != (Bucket{0.5, 3}) || b[1] != (Bucket{1, 3}) || !math.IsInf(b[2].UpperBound, 1) || b[2].Count != 7 {
		t.Errorf("buckets %v", b)
	}
	m.Add(m)
	if m.Sum("h_count") != 14 {
		t.Errorf("Add: %v", m)
	}
	if err := WaitOK(context.Background(), "http://"+addr+"/metrics", time.Minute); err != nil {
		t.Error(err)
	}
	if _, err := get(context.Background(), "http://"+addr+"/healthz", time.Minute); err == nil || !strings.Contains(err.Error(), "404") {
		t.Errorf("GET of a 404: %v", err)
	}
}
