package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/quotaflow/billing/internal/cli"
	"github.com/quotaflow/billing/tools/internal/load"
)

type loadFlags struct {
	o        load.Options
	worker   string
	brokers  string
	redis    string
	rate     rateFlag
	soak     time.Duration
	jsonFile string
	output   string
	// versus runs this many rounds of a uniform run and then the configured
	// one, alternately, and compares them (hot merchants: shards vs uniform).
	versus int
	// versusNone: rounds of the run without refunds and with them, alternately.
	versusNone   int
	refundsOrder string
	vary         string // a sweep: KEY=v1,v2,...
	plot         string // an SVG of the run's own data
}

const loadUsage = `billing-sim load: measure the billing-worker binary black-box

  billing-sim load [--workers N] [--events N] [--ledger-rows N] [--rate N | --soak 10m] [--json-file F] [--output text|json] ...
  billing-sim load --hot 0.9 --shards 8 --versus-uniform 2
  billing-sim load --refunds 0.1 --versus-no-refunds 2 [--refunds-order racing]
  billing-sim load --vary WORKER_BATCH_SIZE=256,1024,2048 --plot batch.svg
  billing-sim load --rate 5000 --plot latency.svg
  billing-sim load --rate 0 --soak 60s        # idle: the cores no traffic costs

Runs the real billing-worker processes against a broker, the local MariaDB and
Redis, on a database, key prefix and topics of its own, and reports (with
--output json: the result as JSON; --json-file also writes it to a file).
Deadlocks are the server's Innodb_deadlocks in the measured window (server-wide:
other sessions' deadlocks count too) and, the workers' own, the ledger
transactions they retried. Exit codes: 0 measured, 1 failed, 2 bad command
line or environment.
`

func parseLoadFlags(args []string, d deps) (loadFlags, error) {
	f := loadFlags{o: load.Options{MySQLDSN: d.cfg.MySQL.DSN}}
	o := &f.o
	fs := d.flags("load", loadUsage)
	fs.StringVar(&f.worker, "worker", "", "billing-worker executable (default: billing-worker next to this program, else on PATH)")
	fs.IntVar(&o.Workers, "workers", 1, "billing-worker processes in one consumer group")
	fs.Func("worker-env", "KEY=VALUE for the workers, after the run's own (repeatable), e.g. WORKER_BATCH_SIZE=512",
		func(s string) error { o.WorkerEnv = append(o.WorkerEnv, s); return nil })
	fs.StringVar(&o.WorkerLogLevel, "worker-log-level", "warn", "LOG_LEVEL of the workers")
	fs.StringVar(&f.brokers, "brokers", "", "use this Kafka (comma list) instead of the embedded broker; the run's topics are created there and deleted")
	fs.StringVar(&f.redis, "redis", strings.Join(d.cfg.Redis.Addrs, ","), "Redis address(es) (default REDIS_ADDR)")
	fs.IntVar(&o.Partitions, "partitions", load.DefaultPartitions, "partitions of the payment topic")
	fs.IntVar(&o.Merchants, "merchants", load.DefaultMerchants, "merchants")
	fs.Float64Var(&o.Hot, "hot", 0.2, "share of the events of one hot merchant (m-000000); 0 = uniform")
	fs.IntVar(&o.Shards, "shards", 1, "quota shards of the hot merchant, 1..64")
	fs.IntVar(&f.versus, "versus-uniform", 0, "run N rounds of a uniform run (--hot 0, one shard) then this one, alternately, and print each hot/uniform ratio")
	fs.Float64Var(&o.Refunds, "refunds", 0, "share of the events that are refunds of the run's payments (partial, whole, over-refunded, ahead of their payment, sent again), 0..0.5; preloaded runs only, in --refunds-order")
	fs.StringVar(&f.refundsOrder, "refunds-order", string(load.RefundsAfter), "with --refunds: after (the payments preloaded, their refunds produced once they are recorded: the usual order) or racing (preloaded with the payments: nearly every refund waits for its payment)")
	fs.IntVar(&f.versusNone, "versus-no-refunds", 0, "with --refunds: run N rounds of the run without refunds then with them, alternately, and print each CPU-per-event ratio")
	fs.IntVar(&o.Events, "events", load.DefaultEvents, "events (preloaded, or produced at --rate)")
	fs.Uint64Var(&o.Seed, "seed", 1, "workload seed")
	fs.IntVar(&o.LedgerRows, "ledger-rows", 0, "pre-fill quota_ledger with this many rows first (bulk INSERTs of 4,000): the growth figure")
	fs.BoolVar(&o.OrderedIDs, "ordered-ids", false, "with --ledger-rows: pre-filled event_ids ascend and sort before the run's (ids that grow with time); default: scattered among them (random ids)")
	fs.Var(&f.rate, "rate", "produce at N events/s on an absolute schedule while the workers run, and measure produce->ledger latency (0: preload)")
	fs.DurationVar(&o.Warmup, "warmup", 2*time.Second, "with --rate: events due in this first part count for throughput, not latency")
	fs.DurationVar(&f.soak, "soak", 0, "with --rate (default 5000/s): produce for this long (sets --events) and report worker memory over time; with --rate 0: no traffic for this long, and the cores the workers, mariadbd and redis-server keep busy")
	fs.IntVar(&o.BaselineEvents, "baseline-events", load.DefaultBaselineEvents, "events of the rowlock baseline (internal/bench) in the same run; 0 skips it")
	fs.DurationVar(&o.SampleEvery, "sample", time.Second, "interval of the workers' memory samples")
	fs.DurationVar(&o.Stall, "stall", time.Minute, "fail when the ledger does not move for this long")
	fs.DurationVar(&o.Timeout, "timeout", 30*time.Minute, "bound on the whole run")
	fs.StringVar(&f.jsonFile, "json-file", "", "also write the result as JSON to this file")
	fs.StringVar(&f.vary, "vary", "", "a sweep: one run per value of a worker variable (WORKER_BATCH_SIZE=256,1024, WORKER_LATENCY_BUDGET=10ms,50ms) or of ledger-rows=0,1000000")
	fs.StringVar(&f.plot, "plot", "", "write an SVG: events/s against the --vary values (paced: CPU per event against p99, by value), or a paced run's (--rate) latency distribution")
	output := fs.Output()
	if err := fs.Parse(args); err != nil {
		return f, err
	}
	f.output, o.Rate = *output, float64(f.rate)
	if f.vary != "" {
		if _, err := load.ParseVary(f.vary); err != nil {
			return f, fs.Fail("%v", err)
		}
	} else if f.plot != "" && o.Rate == 0 {
		return f, fs.Fail("--plot draws a sweep (--vary) or a paced run's latency (--rate)")
	}
	if f.versusNone > 0 && (o.Refunds == 0 || f.versus > 0) {
		return f, fs.Fail("--versus-no-refunds needs --refunds, and not --versus-uniform")
	}
	given := map[string]bool{}
	fs.Visit(func(fl *flag.Flag) { given[fl.Name] = true })
	switch o.RefundsOrder = load.RefundsOrder(f.refundsOrder); {
	case o.RefundsOrder != load.RefundsAfter && o.RefundsOrder != load.RefundsRacing:
		return f, fs.Fail("--refunds-order %q: after or racing", f.refundsOrder)
	case given["refunds-order"] && o.Refunds == 0:
		return f, fs.Fail("--refunds-order needs --refunds")
	}
	if f.soak > 0 && given["rate"] && o.Rate == 0 {
		if f.vary != "" || f.versus > 0 || f.plot != "" {
			return f, fs.Fail("--rate 0 --soak (idle) measures one run: no --vary, --versus-uniform or --plot")
		}
		o.Idle = f.soak
		o.Timeout = max(o.Timeout, f.soak+10*time.Minute)
		return f, nil
	}
	if f.soak > 0 {
		if o.Rate == 0 {
			o.Rate = 5000
		}
		o.Events = int(o.Rate * f.soak.Seconds())
		o.Timeout = max(o.Timeout, f.soak+10*time.Minute)
	}
	return f, nil
}

// workerBinary is the billing-worker to measure: the one given, else the one
// built beside this program (go build -o bin/ ./cmd/billing-worker in the
// root, go build -C tools -o ../bin/ ./cmd/billing-sim), else the one on PATH. The load tool builds nothing: it measures the binary you would ship,
// with the flags you built it with.
func workerBinary(given string) (string, error) {
	if given != "" {
		return given, nil
	}
	if self, err := os.Executable(); err == nil {
		beside := filepath.Join(filepath.Dir(self), "billing-worker")
		if _, err := os.Stat(beside); err == nil {
			return beside, nil
		}
	}
	if p, err := exec.LookPath("billing-worker"); err == nil {
		return p, nil
	}
	return "", errors.New("load: no billing-worker binary beside billing-sim or on PATH: go build -o bin/ ./cmd/billing-worker && go build -C tools -o ../bin/ ./cmd/billing-sim, then run bin/billing-sim load (or pass --worker PATH)")
}

func runLoad(ctx context.Context, args []string, d deps) error {
	f, err := parseLoadFlags(args, d)
	if err != nil {
		return err
	}
	o := f.o
	if o.WorkerBinary, err = workerBinary(f.worker); err != nil {
		return err
	}
	if f.brokers != "" {
		o.Brokers = strings.Split(f.brokers, ",")
	}
	if o.Redis, o.RedisAddrs, err = dialRedis(d, f.redis); err != nil {
		return err
	}
	defer o.Redis.Close()
	o.BaseEnv = os.Environ() // TLS, passwords and tuning reach the workers as they reach this program
	o.Log = d.log
	if f.versus > 0 {
		return versusUniform(ctx, d.stdout, o, f.versus)
	}
	if f.versusNone > 0 {
		return versusNoRefunds(ctx, d.stdout, o, f.versusNone)
	}
	if f.vary != "" {
		return sweep(ctx, d.stdout, o, f)
	}
	res, err := load.Run(ctx, o)
	if f.plot != "" && err == nil {
		err = writePlot(f.plot, func(w io.Writer) error { return load.PlotLatency(w, res) })
	}
	switch {
	case res.Idle != nil && f.output == cli.JSON:
		err = errors.Join(err, printJSON(d.stdout, res))
	case res.Idle != nil:
		writeIdle(d.stdout, res)
	case res.EventsPerSec <= 0:
	case f.output == cli.JSON:
		err = errors.Join(err, printJSON(d.stdout, res))
	default:
		writeLoad(d.stdout, res, f.soak > 0)
	}
	if f.jsonFile != "" && (res.EventsPerSec > 0 || res.Idle != nil) {
		err = errors.Join(err, writeJSON(f.jsonFile, res))
	}
	if b := res.Baseline; err == nil && b != nil && b.Error != "" {
		err = errors.New("load: the rowlock baseline failed (see above)")
	}
	return err
}

// versusUniform runs rounds of a uniform run and the configured one,
// alternately (the machine's load drifts), prints each, and compares them:
// events/s and the CPU of the worker(s), mariadbd and redis-server per event.
func versusUniform(ctx context.Context, w io.Writer, o load.Options, rounds int) error {
	uniform := o
	uniform.Hot, uniform.Shards = 0, 1
	return alternate(ctx, w, uniform, o, rounds, func(round int, a, b load.Result) string {
		return fmt.Sprintf("round %d     uniform %.0f/s (%.1f µs/event), hot %.2g with %d shard(s) %.0f/s (%.1f µs/event): %.2fx",
			round, a.EventsPerSec, serverCPU(a), o.Hot, o.Shards, b.EventsPerSec, serverCPU(b), b.EventsPerSec/a.EventsPerSec)
	})
}

// versusNoRefunds runs rounds of the run without refunds and with them,
// alternately, and compares the CPU per event of the worker(s), mariadbd
// and redis-server.
func versusNoRefunds(ctx context.Context, w io.Writer, o load.Options, rounds int) error {
	none := o
	none.Refunds = 0
	return alternate(ctx, w, none, o, rounds, func(round int, a, b load.Result) string {
		return fmt.Sprintf("round %d     no refunds %.0f/s (%.1f µs/event), %.0f%% refunds (%s) %.0f/s (%.1f µs/event): CPU per event %.2fx",
			round, a.EventsPerSec, serverCPU(a), 100*o.Refunds, o.RefundsOrder, b.EventsPerSec, serverCPU(b), serverCPU(b)/serverCPU(a))
	})
}

// alternate runs rounds of a then b (the machine's load drifts), prints
// each run, then a line per round comparing them.
func alternate(ctx context.Context, w io.Writer, a, b load.Options, rounds int, line func(round int, a, b load.Result) string) error {
	a.BaselineEvents, b.BaselineEvents = 0, 0
	var lines []string
	for round := 1; round <= rounds; round++ {
		var got [2]load.Result
		for k, opts := range []load.Options{a, b} {
			res, err := load.Run(ctx, opts)
			if err != nil {
				return err
			}
			writeLoad(w, res, false)
			fmt.Fprintln(w)
			got[k] = res
		}
		lines = append(lines, line(round, got[0], got[1]))
	}
	for _, l := range lines {
		fmt.Fprintln(w, l)
	}
	return nil
}

// sweep runs one load per --vary value, prints each, and plots events/s
// against the values.
func sweep(ctx context.Context, w io.Writer, o load.Options, f loadFlags) error {
	v, _ := load.ParseVary(f.vary) // parsed with the flags
	results, err := load.Sweep(ctx, o, v, func(r load.Result) { writeLoad(w, r, false); fmt.Fprintln(w) })
	for i, r := range results {
		p99 := ""
		if p := r.Paced; p != nil {
			p99 = fmt.Sprintf(", p99 %.1f ms, %.0f events per batch", p.Latency.P99MS, meanBatch(r))
		}
		fmt.Fprintf(w, "sweep       %s=%s: %.0f events/s, %.1f µs/event%s\n", v.Key, v.Values[i], r.EventsPerSec, serverCPU(r), p99)
	}
	if err == nil && f.plot != "" {
		err = writePlot(f.plot, func(w io.Writer) error { return load.PlotSweep(w, v, results) })
	}
	return err
}

func writePlot(path string, draw func(io.Writer) error) error {
	file, err := os.Create(path)
	if err != nil {
		return err
	}
	return errors.Join(draw(file), file.Close())
}

// meanBatch is the events per handler call over the workers.
func meanBatch(r load.Result) float64 {
	var calls, events float64
	for _, m := range r.Memory {
		calls += float64(m.Batches)
		events += float64(m.Batches) * m.MeanBatch
	}
	if calls == 0 {
		return 0
	}
	return events / calls
}

// serverCPU is the CPU per event of the worker(s), mariadbd and redis-server.
func serverCPU(r load.Result) float64 {
	var us float64
	for _, c := range r.CPU {
		if c.Measured && (strings.HasPrefix(c.Name, "worker-") || c.Name == "mariadbd" || c.Name == "redis-server") {
			us += c.USPerEvent
		}
	}
	return us
}

// writeLoad prints the result for a person.
func writeLoad(w io.Writer, r load.Result, series bool) {
	s := r.Setup
	broker := "embedded broker"
	if !s.Embedded {
		broker = "brokers " + strings.Join(s.Brokers, ",")
	}
	refunds := ""
	if s.Refunds > 0 {
		refunds = fmt.Sprintf(" (%.0f%% refunds, %s their payments)", 100*s.Refunds, s.RefundsOrder)
	}
	fmt.Fprintf(w, "load        %d events%s, %d merchants (hot %.2g, %d shard(s)), %d worker(s), %d partitions, %s; ledger rows before: %d\n",
		r.Events, refunds, s.Merchants, s.Hot, s.Shards, s.Workers, s.Partitions, broker, s.LedgerRows)
	redo := "unknown"
	if r.Host.RedoLogBytes > 0 {
		redo = fmt.Sprintf("%d MiB", r.Host.RedoLogBytes>>20)
	}
	fmt.Fprintf(w, "host        %d CPUs, %s (buffer pool %d MiB, redo log %s, flush_log_at_trx_commit=%d), redis %s\n",
		r.Host.CPUs, r.Host.MySQL, r.Host.BufferPoolBytes>>20, redo, r.Host.FlushLogAtTrxCommit, r.Host.Redis)
	if s.Rate == 0 {
		fmt.Fprintf(w, "setup       grant+pre-fill %.1fs, preload %.1fs\n", r.FillS, r.PreloadS)
		fmt.Fprintf(w, "throughput  %.0f events/s (%.2fs from the workers' start to the last ledger row; first row after %.2fs, %.0f/s from there)\n",
			r.EventsPerSec, r.ElapsedS, r.FirstRowS, r.SteadyPerSec)
	} else {
		fmt.Fprintf(w, "setup       grant+pre-fill %.1fs\n", r.FillS)
	}
	if p := r.Paced; p != nil {
		verdict := "kept up"
		if !p.KeptUp {
			verdict = "DID NOT keep up"
		}
		fmt.Fprintf(w, "paced       %.0f events/s for %.1fs: %s (last row %.0f ms after the last event was due)\n",
			p.Rate, p.ScheduleS, verdict, p.DrainMS)
		late := ""
		if p.ProducerLagMS > 20 {
			late = ": the producer itself was late (a busy machine); the latencies include it"
		}
		fmt.Fprintf(w, "producer    handed events over at most %.1f ms after they were due%s\n", p.ProducerLagMS, late)
		l := p.Latency
		fmt.Fprintf(w, "latency     produce->ledger p50 %.1f ms, p99 %.1f ms, p99.9 %.1f ms, max %.1f ms (%d events; %d in the warm-up not counted)\n",
			l.P50MS, l.P99MS, l.P999MS, l.MaxMS, l.Count, l.WarmupSkipped)
		a := p.Ack
		fmt.Fprintf(w, "            of which produce->broker ack p50 %.1f ms, p99 %.1f ms, p99.9 %.1f ms, max %.1f ms\n", a.P50MS, a.P99MS, a.P999MS, a.MaxMS)
		a = p.AfterAck
		fmt.Fprintf(w, "            broker ack->ledger p50 %.1f ms, p99 %.1f ms, p99.9 %.1f ms, max %.1f ms\n", a.P50MS, a.P99MS, a.P999MS, a.MaxMS)
		if tx := p.LedgerTx; tx != nil {
			fmt.Fprintf(w, "            then the ledger transaction, at whose COMMIT a row is visible: p50 %.1f ms, p99 %.1f ms (%d attempts, the workers' billing_ledger_transaction_seconds)\n",
				tx.P50MS, tx.P99MS, tx.Count)
		}
	}
	writeCPU(w, r)
	i := r.InnoDB
	fmt.Fprintf(w, "innodb      per event %.2f buffer pool disk reads, %.1f read requests, %.2f pages written back, %.0f redo bytes, %.3f fsyncs (server-wide); ledger ~%d rows: data %d MiB, indexes %d MiB\n",
		i.DiskReadsPerEvent, i.ReadRequestsPerEvent, i.PagesFlushedPerEvent, i.RedoBytesPerEvent, i.FsyncsPerEvent, i.LedgerRows, i.LedgerDataBytes>>20, i.LedgerIndexBytes>>20)
	fmt.Fprintf(w, "deadlocks   %s; the workers retried %d ledger transactions (billing_ledger_deadlock_retries_total: after a deadlock or a lock wait timeout)\n",
		deadlocks(i.Deadlocks), r.LedgerRetries)
	if bp := r.Host.BufferPoolBytes; bp > 0 && i.LedgerIndexBytes > bp {
		fmt.Fprintf(w, "            the ledger's indexes (%d MiB) exceed the buffer pool (%d MiB): unless event_ids grow with time, the unique check reads from disk\n",
			i.LedgerIndexBytes>>20, bp>>20)
	}
	if b := r.Baseline; b != nil {
		switch {
		case b.Error != "":
			fmt.Fprintf(w, "baseline    rowlock FAILED: %s\n", b.Error)
		case b.Ratio > 0:
			fmt.Fprintf(w, "baseline    rowlock %.0f events/s (%d events): the workers are %.1fx\n", b.EventsPerSec, b.Events, b.Ratio)
		default:
			fmt.Fprintf(w, "baseline    rowlock %.0f events/s (%d events)\n", b.EventsPerSec, b.Events)
		}
	}
	for _, m := range r.Memory {
		heap := "heap n/a"
		if !m.HeapMissing {
			heap = fmt.Sprintf("heap in use %.0f-%.0f MiB", m.HeapMinMiB, m.HeapMaxMiB)
		}
		fmt.Fprintf(w, "memory      worker-%d RSS %.0f-%.0f MiB, %s (%d samples)\n", m.Worker, m.RSSMinMiB, m.RSSMaxMiB, heap, len(m.Samples))
		if m.Batches > 0 {
			fmt.Fprintf(w, "batches     worker-%d %d handler calls, %.0f events each on average\n", m.Worker, m.Batches, m.MeanBatch)
		}
		if series {
			writeSeries(w, m.Samples)
		}
	}
}

// writeIdle prints an idle run (--rate 0 --soak D) for a person.
func writeIdle(w io.Writer, r load.Result) {
	s, i := r.Setup, r.Idle
	broker := "embedded broker"
	if !s.Embedded {
		broker = "brokers " + strings.Join(s.Brokers, ",")
	}
	fmt.Fprintf(w, "load        idle, %d worker(s), %d partitions, %s\n", s.Workers, s.Partitions, broker)
	fmt.Fprintf(w, "idle        %.1fs with no traffic (after %.0fs to settle): workers+mariadbd+redis kept %.4f cores busy\n",
		i.WindowS, i.SettleS, i.Cores)
	fmt.Fprintf(w, "wake        one event after it: %.1f ms from its produce to its ledger row (the producer's linger, the fetch, the lane's hold of WORKER_LATENCY_BUDGET, the batch)\n", i.WakeMS)
	writeCPU(w, r)
}

// writeCPU prints the processes' CPU (per event unless idle) and the machine's load.
func writeCPU(w io.Writer, r load.Result) {
	idle := r.Idle != nil
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	perEvent, quiet := "µs/event\t", "the run"
	if idle {
		perEvent, quiet = "", "the workers started"
	}
	fmt.Fprintf(tw, "cpu\tprocess\tpid\tcpu s\t%scores\t\n", perEvent)
	for _, c := range r.CPU {
		if !c.Measured {
			fmt.Fprintf(tw, "\t%s\t\t\tn/a\t\t  %s\n", c.Name, strings.TrimPrefix(c.Note, "n/a: "))
			continue
		}
		note := c.Note
		if c.Name == "mariadbd" || c.Name == "redis-server" {
			note = fmt.Sprintf("%.3f cores in the second before %s (other clients)", c.QuietCores, quiet)
		}
		if idle {
			fmt.Fprintf(tw, "\t%s\t%d\t%.3f\t%.4f\t  %s\n", c.Name, c.PID, c.CPUSeconds, c.Cores, note)
		} else {
			fmt.Fprintf(tw, "\t%s\t%d\t%.2f\t%.1f\t%.2f\t  %s\n", c.Name, c.PID, c.CPUSeconds, c.USPerEvent, c.Cores, note)
		}
	}
	if r.SystemUSPerEvent > 0 {
		fmt.Fprintf(tw, "\tworkers+mariadbd+redis\t\t\t%.1f\t%.2f\t  events/s = these cores / this CPU per event\n", r.SystemUSPerEvent, r.SystemCores())
	}
	tw.Flush()
	if m := r.Machine; m.BusyCores > 0 {
		fmt.Fprintf(w, "machine     %.2f of %d cores busy in the window: %.2f the processes above, %.2f other programs\n",
			m.BusyCores, r.Host.CPUs, m.OursCores, m.OtherCores)
	}
}

// writeSeries prints about ten samples spread over the run.
func writeSeries(w io.Writer, samples []load.Sample) {
	step := max(1, len(samples)/10)
	for i := 0; i < len(samples); i += step {
		s := samples[i]
		fmt.Fprintf(w, "              %6.0fs  RSS %6.1f MiB  heap %6.1f MiB  goroutines %d\n", s.AtS, s.RSSMiB, s.HeapMiB, s.Goroutines)
	}
}
