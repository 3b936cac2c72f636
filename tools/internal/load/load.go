// Package load measures the billing system black-box: the real billing-worker
// binary as separate processes, fed from a broker (embedded kfake or a real
// one), against the local MariaDB and Redis, each run on a database, key
// prefix and topics of its own (removed afterwards).
//
// A run grants quota to the merchants (enough that nothing is rejected),
// optionally pre-fills the ledger, then either preloads every event and times
// the workers from their start to the last ledger row, or produces on an
// absolute schedule while they run and reads produce->ledger latency from
// the ledger. CPU per event comes from /proc/<pid>/stat of each process,
// memory from /proc/<pid>/status and the workers' /metrics; the row-lock
// baseline is internal/bench's rowlock strategy, in the same run.
package load

import (
	"cmp"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/redis/go-redis/v9"
	"go.uber.org/zap"

	"github.com/quotaflow/billing/internal/shard"
)

// Options of a load run.
type Options struct {
	WorkerBinary string // the billing-worker executable (required)
	Workers      int    // processes in one consumer group (default 1)
	// BaseEnv is the workers' environment before Run sets brokers, topics,
	// group, Redis, MySQL, HTTP_ADDR, IDGEN_WORKER_ID and LOG_LEVEL;
	// WorkerEnv (KEY=VALUE) comes after them and wins (tuning: WORKER_BATCH_SIZE=512).
	BaseEnv        []string
	WorkerEnv      []string
	WorkerLogLevel string // default warn

	MySQLDSN   string                // any DSN of the server: the run creates its own database
	Redis      redis.UniversalClient // required: the run's keys are deleted through it
	RedisAddrs []string              // REDIS_ADDR of the workers
	KeyPrefix  string                // start of the run's Redis prefix (default "load:")
	Brokers    []string              // empty: a broker embedded in this process
	Partitions int                   // of the payment topic (default 6)

	Merchants int     // default 1000
	Hot       float64 // share of the events of merchant m-000000; 0: uniform
	Shards    int     // quota shards of m-000000 (default 1: not sharded)
	Events    int     // default 200,000
	// Refunds is the share of the events that are refunds of the run's
	// payments (workload.DefaultRefundMix), on the refunds topic; preload
	// only, in RefundsOrder.
	Refunds      float64
	RefundsOrder RefundsOrder
	Seed         uint64
	// LedgerRows pre-fills quota_ledger with this many debit rows (and
	// merchant_balance to match) before the run: the growth figure.
	LedgerRows int
	// OrderedIDs gives the pre-filled rows event_ids that sort before the
	// run's, ascending (a producer whose ids grow with time, as ULIDs or
	// Snowflakes do); by default they interleave with the run's in a
	// scattered order (random ids, as UUIDs are).
	OrderedIDs bool
	// Rate, when positive, produces on an absolute schedule (events/s) while
	// the workers run, instead of preloading; latency is measured then.
	Rate float64
	// Idle, when positive, runs the workers with no traffic for this long
	// (after their group formed and they settled) and reports the cores
	// they, mariadbd and redis-server keep busy, then the wake of one event
	// (Result.Idle); Events is 1 then.
	Idle time.Duration
	// IdleSettle is how long the workers run after their group formed before
	// the idle window: their start-up work (schema check, first reads of
	// shards, periods and the outbox) is not idling. Default 5s.
	IdleSettle time.Duration
	// Warmup: events due in the first Warmup of a paced schedule count for
	// throughput but not for latency (cold caches, hydration). Default 2s.
	Warmup time.Duration
	// BaselineEvents for the rowlock baseline; 0 skips it.
	BaselineEvents int

	SampleEvery time.Duration // memory samples (default 1s)
	// Stall fails the run when the ledger does not move for this long while
	// events are outstanding (default 60s); Timeout bounds the whole run
	// (default 30m).
	Stall   time.Duration
	Timeout time.Duration
	Log     *zap.Logger // progress; default none
}

// RefundsOrder is when a run's refunds reach the broker.
type RefundsOrder string

// Refund orders.
const (
	// RefundsAfter preloads the payments alone and, once the workers have
	// recorded them, produces the refunds of the same stream: the usual
	// order, a refund coming hours or days after its payment.
	RefundsAfter RefundsOrder = "after"
	// RefundsRacing preloads the refunds with their payments: the refunds
	// consumer reads nearly every one before its payment is recorded, so
	// they wait as pending rows and settle in the payments' transactions.
	RefundsRacing RefundsOrder = "racing"
)

// refundsOrder is the run's RefundsOrder, "" when it has no refunds.
func (o Options) refundsOrder() RefundsOrder {
	if o.Refunds == 0 {
		return ""
	}
	return o.RefundsOrder
}

// Defaults of Options.
const (
	DefaultMerchants      = 1000
	DefaultEvents         = 200_000
	DefaultPartitions     = 6
	DefaultBaselineEvents = 20_000
)

func (o *Options) setDefaults() {
	o.Workers, o.WorkerLogLevel, o.KeyPrefix = cmp.Or(o.Workers, 1), cmp.Or(o.WorkerLogLevel, "warn"), cmp.Or(o.KeyPrefix, "load:")
	o.Partitions, o.Merchants, o.Events = cmp.Or(o.Partitions, DefaultPartitions), cmp.Or(o.Merchants, DefaultMerchants), cmp.Or(o.Events, DefaultEvents)
	o.Warmup, o.SampleEvery = cmp.Or(o.Warmup, 2*time.Second), cmp.Or(o.SampleEvery, time.Second)
	o.Stall, o.Timeout = cmp.Or(o.Stall, time.Minute), cmp.Or(o.Timeout, 30*time.Minute)
	o.Log = cmp.Or(o.Log, zap.NewNop())
	o.Shards, o.RefundsOrder = cmp.Or(o.Shards, 1), cmp.Or(o.RefundsOrder, RefundsAfter)
	if o.Idle > 0 {
		o.Events, o.IdleSettle = 1, cmp.Or(o.IdleSettle, 5*time.Second)
	}
}

// Validate reports every bad option at once.
func (o Options) Validate() error {
	var errs []error
	check := func(ok bool, format string, args ...any) {
		if !ok {
			errs = append(errs, fmt.Errorf(format, args...))
		}
	}
	st, err := os.Stat(o.WorkerBinary)
	check(err == nil && !st.IsDir() && st.Mode()&0o111 != 0, "worker binary %q is not an executable file", o.WorkerBinary)
	check(o.Workers >= 1 && o.Workers <= 64, "workers %d: 1..64", o.Workers)
	if _, err := mysql.ParseDSN(o.MySQLDSN); err != nil {
		errs = append(errs, fmt.Errorf("MySQL DSN: %w", err))
	}
	check(o.Redis != nil && len(o.RedisAddrs) > 0, "no Redis client or address")
	check(!strings.ContainsAny(o.KeyPrefix, "{}"), "key prefix %q: no braces", o.KeyPrefix)
	check(o.Partitions >= 1 && o.Partitions <= 64, "partitions %d: 1..64", o.Partitions)
	check(o.Merchants >= 1 && o.Merchants <= 1_000_000, "merchants %d: 1..1000000", o.Merchants)
	check(!(o.Hot < 0 || o.Hot > 1), "hot %v: 0..1", o.Hot)
	check(o.Shards >= 1 && o.Shards <= shard.Max, "shards %d: 1..%d", o.Shards, shard.Max)
	check(o.Events >= 1 && o.LedgerRows >= 0 && o.BaselineEvents >= 0,
		"events %d, ledger rows %d, baseline events %d: events positive, the others not negative", o.Events, o.LedgerRows, o.BaselineEvents)
	check(!(o.Rate < 0 || o.Rate > 1e6), "rate %v: 0 (preload) or up to 1000000/s", o.Rate)
	check(o.Refunds >= 0 && o.Refunds <= 0.5 && (o.Refunds == 0 || o.Rate == 0), "refunds %v: 0..0.5, preloaded (no rate)", o.Refunds)
	check(o.RefundsOrder == RefundsAfter || o.RefundsOrder == RefundsRacing, "refunds order %q: %q or %q", o.RefundsOrder, RefundsAfter, RefundsRacing)
	check(o.Idle >= 0 && (o.Idle == 0 || o.Rate == 0), "idle %v: not negative, and only without a rate", o.Idle)
	check(o.Warmup >= 0 && o.SampleEvery >= 0 && o.Stall >= 0 && o.Timeout >= 0,
		"warmup, sample interval, stall and timeout must not be negative")
	if len(errs) > 0 {
		return fmt.Errorf("load: %w", errors.Join(errs...))
	}
	return nil
}

// Result of a run. Durations are seconds, latencies milliseconds, CPU per
// event microseconds: absolute figures are this machine's; compare within a run.
type Result struct {
	StartedAt time.Time `json:"started_at"`
	Setup     Setup     `json:"setup"`
	Host      Host      `json:"host"`

	Events int   `json:"events"`
	Rows   int64 `json:"ledger_rows_written"` // by the run: one per payment (refund rows aside)
	// Refunds is the refund ids the run produced, every one recorded
	// (applied, or waiting for a payment the stream never sent).
	Refunds  int     `json:"refunds,omitempty"`
	FillS    float64 `json:"ledger_prefill_s,omitempty"`
	PreloadS float64 `json:"preload_s,omitempty"`

	// ElapsedS is from the workers' start to the last ledger row seen.
	ElapsedS     float64 `json:"elapsed_s"`
	EventsPerSec float64 `json:"events_per_sec"`
	// FirstRowS is from the workers' start to their first ledger row (start-up,
	// group join); SteadyPerSec counts from there to the last row.
	FirstRowS    float64 `json:"first_row_s"`
	SteadyPerSec float64 `json:"steady_events_per_sec"`

	CPU []ProcessCPU `json:"cpu"`
	// SystemUSPerEvent is workers + mariadbd + redis-server (the figure a
	// CPU budget per event is about); 0 when a server was not measured.
	SystemUSPerEvent float64 `json:"system_cpu_us_per_event"`
	Machine          Machine `json:"machine"`
	InnoDB           InnoDB  `json:"innodb"`
	// LedgerRetries is the ledger transactions the workers tried again after
	// a deadlock or a lock wait timeout (their
	// billing_ledger_deadlock_retries_total at the last sample): theirs
	// alone, where InnoDB.Deadlocks is the server's.
	LedgerRetries int64 `json:"worker_ledger_deadlock_retries"`

	Baseline *Baseline `json:"baseline,omitempty"`
	Paced    *Paced    `json:"paced,omitempty"`
	Idle     *Idle     `json:"idle,omitempty"`
	Memory   []Memory  `json:"memory"`
}

// SystemCores is the cores workers, mariadbd and redis-server kept busy over
// the run (0 when a server was not measured): events/s is SystemCores over
// SystemUSPerEvent. A slower machine shows in the CPU per event; how much of
// the cores the write path can keep busy, its parallelism, shows here.
func (r Result) SystemCores() float64 { return r.EventsPerSec * r.SystemUSPerEvent / 1e6 }

// Setup is what was run.
type Setup struct {
	Database     string       `json:"database"`
	KeyPrefix    string       `json:"redis_prefix"`
	Topic        string       `json:"topic"`
	Brokers      []string     `json:"brokers"`
	Embedded     bool         `json:"embedded_broker"`
	Partitions   int          `json:"partitions"`
	Merchants    int          `json:"merchants"`
	Hot          float64      `json:"hot_share"`
	Refunds      float64      `json:"refund_share,omitempty"`
	RefundsOrder RefundsOrder `json:"refunds_order,omitempty"` // with refunds
	Shards       int          `json:"hot_shards"`
	Seed         uint64       `json:"seed"`
	Workers      int          `json:"workers"`
	WorkerBinary string       `json:"worker_binary"`
	WorkerEnv    []string     `json:"worker_env,omitempty"`
	LedgerRows   int          `json:"ledger_rows_before"`
	OrderedIDs   bool         `json:"ledger_ids_ordered,omitempty"`
	Rate         float64      `json:"rate,omitempty"`
	IdleS        float64      `json:"idle_s,omitempty"`
}

// Host is where it ran; the MySQL settings are the ones a figure depends on.
type Host struct {
	CPUs                int    `json:"cpus"`
	MySQL               string `json:"mysql"`
	BufferPoolBytes     int64  `json:"innodb_buffer_pool_bytes"`
	FlushLogAtTrxCommit int    `json:"innodb_flush_log_at_trx_commit"`
	RedoLogBytes        int64  `json:"innodb_redo_log_bytes"` // 0: unknown
	Redis               string `json:"redis"`
}

// ProcessCPU is one process's CPU over the measured window.
type ProcessCPU struct {
	Name       string  `json:"name"`
	PID        int     `json:"pid,omitempty"`
	Measured   bool    `json:"measured"`
	Note       string  `json:"note,omitempty"` // why not measured, or what the process holds
	CPUSeconds float64 `json:"cpu_s"`
	USPerEvent float64 `json:"cpu_us_per_event"`
	Cores      float64 `json:"cores"` // CPU seconds per wall second of the window
	// QuietCores is a server's load in the second before the window: work
	// of others on a shared server, inside its figures too.
	QuietCores float64 `json:"quiet_cores,omitempty"`
}

// Machine is the whole machine's load in the window, in cores: the measured
// processes' share (the servers' include other clients' work) and the rest
// (other programs: compilers, tests).
type Machine struct {
	BusyCores  float64 `json:"busy_cores"`
	OursCores  float64 `json:"measured_cores"`
	OtherCores float64 `json:"other_cores"`
}

// Baseline is the rowlock strategy of internal/bench on the same merchants.
type Baseline struct {
	Events       int     `json:"events"`
	EventsPerSec float64 `json:"events_per_sec"`
	// Ratio is the workers' events/s over the baseline's.
	Ratio float64 `json:"ratio"`
	Error string  `json:"error,omitempty"`
}

// Paced is the outcome of a run on a schedule.
type Paced struct {
	Rate      float64 `json:"rate"`
	ScheduleS float64 `json:"schedule_s"` // events / rate
	// ProducerLagMS is the longest an event was handed to the producer past
	// its due time; DrainMS from the last event's due time to the last row.
	ProducerLagMS float64 `json:"producer_max_lag_ms"`
	DrainMS       float64 `json:"drain_ms"`
	// KeptUp: the last row came within a second (or 5% of the schedule) of
	// the last event's due time.
	KeptUp  bool    `json:"kept_up"`
	Latency Latency `json:"latency"`
	// Ack is the first leg of Latency: due time to the broker's
	// acknowledgement, for the same events (the producer's lag, its 5 ms
	// linger, the broker).
	Ack Latency `json:"produce_ack"`
	// AfterAck is the second leg: the broker's acknowledgement of each event
	// to its ledger row, the worker's share (fetch, batching, the batch's
	// steps up to its commit), on the cores it shares with the broker and
	// the producer. Not a difference of the two others' quantiles.
	AfterAck Latency `json:"ack_to_ledger"`
	// LedgerTx is the transaction after created_at; nil when the workers'
	// /metrics did not say.
	LedgerTx *LedgerTx `json:"ledger_transaction,omitempty"`
}

// Latency is produce->ledger over the events due after the warm-up: the
// event's occurred_at (its due time, stamped by the producer) to the ledger
// row's created_at (the worker's clock when its ledger commit began). One
// machine, one wall clock.
type Latency struct {
	Count         int     `json:"count"`
	WarmupSkipped int     `json:"warmup_skipped"`
	P50MS         float64 `json:"p50_ms"`
	P99MS         float64 `json:"p99_ms"`
	P999MS        float64 `json:"p999_ms"`
	MaxMS         float64 `json:"max_ms"`
	// PercentileMS[k] is the k/100 quantile (the last: max), the
	// distribution --plot draws.
	PercentileMS []float64 `json:"percentile_ms,omitempty"`
}

// Memory is one worker's resident set and Go heap over the run.
type Memory struct {
	Worker      int      `json:"worker"`
	RSSMinMiB   float64  `json:"rss_min_mib"`
	RSSMaxMiB   float64  `json:"rss_max_mib"`
	HeapMinMiB  float64  `json:"heap_inuse_min_mib,omitempty"`
	HeapMaxMiB  float64  `json:"heap_inuse_max_mib,omitempty"`
	Samples     []Sample `json:"samples"`
	HeapMissing bool     `json:"heap_missing,omitempty"` // /metrics did not answer
	// Batches is the handler calls of the last sample and MeanBatch their
	// mean events: the batch size reached, against WORKER_BATCH_SIZE.
	Batches   int     `json:"batches,omitempty"`
	MeanBatch float64 `json:"mean_batch_events,omitempty"`
}

// Sample is one reading of a worker's memory.
type Sample struct {
	AtS        float64 `json:"at_s"` // since the workers' start
	RSSMiB     float64 `json:"rss_mib"`
	HeapMiB    float64 `json:"heap_inuse_mib,omitempty"`
	Goroutines int     `json:"goroutines,omitempty"`
	// Batches and BatchEvents count the consumer's handler calls so far and
	// the events in them.
	Batches     float64  `json:"batches,omitempty"`
	BatchEvents float64  `json:"batch_events,omitempty"`
	tx          []bucket // billing_ledger_transaction_seconds so far
	retries     float64  // billing_ledger_deadlock_retries_total so far
}
