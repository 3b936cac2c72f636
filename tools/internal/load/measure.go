package load

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/go-sql-driver/mysql"
)

const procRoot = "/proc"

// meter reads the CPU time of the measured processes, and of the whole
// machine, at the start and the end of the window, and of the servers over a
// quiet second before it: other work on a shared server shows there.
type meter struct {
	procs        []*metered
	busy, busyAt time.Duration // the machine's busy CPU time at the start, then at the end
}

type metered struct {
	name, note string
	pid        int
	err        error // not measured, and why
	idle       time.Duration
	quietEnd   time.Duration // the end of the quiet second (restart moves before on)
	before     time.Duration
	after      time.Duration
}

// quiet is the window before the run in which the servers' background load is read.
const quiet = time.Second

// newMeter finds the servers' processes, reads their CPU time over a quiet
// second, and starts the window. The workers are added as they start (a
// process starts at zero).
func newMeter(ctx context.Context, o Options, st *stage) (*meter, error) {
	m := &meter{}
	m.add("mariadbd", mysqlAddr(o.MySQLDSN), "mariadbd", "mysqld")
	redisAddr := ""
	if len(o.RedisAddrs) == 1 {
		redisAddr = o.RedisAddrs[0]
	}
	m.add("redis-server", redisAddr, "redis-server")
	self := &metered{name: "billing-sim", pid: os.Getpid(), note: "this process: the load tool (producer, polls)"}
	if st.Cluster != nil {
		self.name, self.note = "broker", "billing-sim with the embedded broker (and the producer, polls)"
	}
	m.procs = append(m.procs, self)
	m.readAll(func(p *metered) *time.Duration { return &p.idle })
	t := time.NewTimer(quiet)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-t.C:
	}
	m.readAll(func(p *metered) *time.Duration { return &p.before })
	for _, p := range m.procs {
		p.quietEnd = p.before
	}
	m.busy, _ = machineBusy(procRoot) // unreadable: the machine's figure stays 0
	return m, nil
}

func (m *meter) add(name, addr string, comms ...string) {
	p := &metered{name: name}
	m.procs = append(m.procs, p)
	if addr == "" {
		p.err = fmt.Errorf("%w: no single TCP address", errNotLocal)
		return
	}
	p.pid, p.err = serverPID(procRoot, addr, comms...)
}

func (m *meter) readAll(into func(*metered) *time.Duration) {
	for _, p := range m.procs {
		if p.err == nil {
			*into(p), p.err = cpuTime(procRoot, p.pid)
		}
	}
}

func (m *meter) addWorker(w *workerProc) {
	m.procs = append(m.procs, &metered{name: fmt.Sprintf("worker-%d", w.id), pid: w.Pid()})
}

// restart starts the window again, now (the workers' start-up left out).
func (m *meter) restart() {
	m.readAll(func(p *metered) *time.Duration { return &p.before })
	if m.busy > 0 {
		m.busy, _ = machineBusy(procRoot)
	}
}

// read takes the end readings, while every process still runs.
func (m *meter) read() {
	m.readAll(func(p *metered) *time.Duration { return &p.after })
	if m.busy > 0 {
		m.busyAt, _ = machineBusy(procRoot)
	}
}

// results per process over events and the window's wall time; the workers +
// mariadbd + redis-server total per event (0 if one is missing); and the
// machine's load in the window.
func (m *meter) results(events int, window time.Duration) ([]ProcessCPU, float64, Machine) {
	var out []ProcessCPU
	var system, ours time.Duration
	complete := true
	server := func(p *metered) bool { return p.name == "mariadbd" || p.name == "redis-server" }
	for _, p := range m.procs {
		c := ProcessCPU{Name: p.name, PID: p.pid, Note: p.note}
		tool := p.name == "billing-sim" || p.name == "broker"
		if p.err != nil {
			c.PID, c.Note = 0, "n/a: "+p.err.Error()
			complete = complete && tool
			out = append(out, c)
			continue
		}
		d := p.after - p.before
		c.Measured = true
		c.CPUSeconds = d.Seconds()
		if events > 0 {
			c.USPerEvent = float64(d.Microseconds()) / float64(events)
		}
		c.Cores = d.Seconds() / window.Seconds()
		if server(p) {
			c.QuietCores = (p.quietEnd - p.idle).Seconds() / quiet.Seconds()
		}
		if !tool {
			system += d
		}
		ours += d
		out = append(out, c)
	}
	var mach Machine
	if m.busyAt > 0 {
		mach.BusyCores = (m.busyAt - m.busy).Seconds() / window.Seconds()
		mach.OursCores = ours.Seconds() / window.Seconds()
		mach.OtherCores = max(0, mach.BusyCores-mach.OursCores)
	}
	if !complete || events == 0 {
		return out, 0, mach
	}
	return out, float64(system.Microseconds()) / float64(events), mach
}

func mysqlAddr(dsn string) string {
	cfg, err := mysql.ParseDSN(dsn)
	if err != nil || cfg.Net != "tcp" {
		return ""
	}
	return cfg.Addr
}

// sampler reads the workers' memory every interval until stopped.
type sampler struct {
	workers []*workerProc
	start   time.Time
	samples [][]Sample
	stop    context.CancelFunc
	done    chan struct{}
	// finished: the closing sample is taken (finish may run twice).
	finished bool
}

func startSampler(ctx context.Context, workers []*workerProc, start time.Time, every time.Duration) *sampler {
	ctx, cancel := context.WithCancel(ctx)
	s := &sampler{workers: workers, start: start, samples: make([][]Sample, len(workers)),
		stop: cancel, done: make(chan struct{})}
	go func() {
		defer close(s.done)
		// The first sample waits an interval: a process just started says nothing.
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			s.sample(ctx)
		}
	}()
	return s
}

func (s *sampler) sample(ctx context.Context) {
	for i, w := range s.workers {
		bytes, err := rss(procRoot, w.Pid())
		if err != nil {
			continue // exited: the run reports that
		}
		smp := Sample{AtS: time.Since(s.start).Seconds(), RSSMiB: mib(float64(bytes))}
		if m, err := scrape(ctx, w.Addr); err == nil { // not yet listening: RSS only
			smp.HeapMiB, smp.Goroutines = mib(m.heapBytes), m.goroutines
			smp.Batches, smp.BatchEvents, smp.tx, smp.retries = m.batches, m.batchEvents, m.tx, m.retries
		}
		s.samples[i] = append(s.samples[i], smp)
	}
}

// finish stops the sampler, waits for it and summarizes.
func (s *sampler) finish() []Memory {
	s.stop()
	<-s.done
	if !s.finished {
		s.finished = true
		s.sample(context.Background()) // the batch counts up to the end
	}
	out := make([]Memory, len(s.workers))
	for i, w := range s.workers {
		m := Memory{Worker: w.id, Samples: s.samples[i], HeapMissing: true}
		for j, smp := range m.Samples {
			if j == 0 || smp.RSSMiB < m.RSSMinMiB {
				m.RSSMinMiB = smp.RSSMiB
			}
			m.RSSMaxMiB = max(m.RSSMaxMiB, smp.RSSMiB)
			if smp.HeapMiB > 0 && (m.HeapMissing || smp.HeapMiB < m.HeapMinMiB) {
				m.HeapMinMiB, m.HeapMissing = smp.HeapMiB, false
			}
			m.HeapMaxMiB = max(m.HeapMaxMiB, smp.HeapMiB)
			if smp.Batches > 0 {
				m.Batches, m.MeanBatch = int(smp.Batches), smp.BatchEvents/smp.Batches
			}
		}
		out[i] = m
	}
	return out
}

func mib(bytes float64) float64 { return bytes / (1 << 20) }
