package config

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// MaxWorkerID is the largest Snowflake worker ID (10 bits).
const MaxWorkerID = 1023

// IDGen says which Snowflake worker ID this process leases.
type IDGen struct {
	WorkerID int    // -1 when not needed and not resolvable
	Source   string // how it was derived, for the start-up log
	Base     int
	Count    int
	LeaseTTL time.Duration
	// StepAsideAfter is how long the generator may refuse before the worker
	// leaves its consumer groups and the relay, until it issues again.
	StepAsideAfter time.Duration
	PodName        string
	PodIP          string
}

// Worker tunes the consumer.
type Worker struct {
	Lanes           int
	BatchSize       int
	LatencyBudget   time.Duration
	MaxInFlight     int
	CommitInterval  time.Duration
	MaxAttempts     int
	ShutdownTimeout time.Duration
	// ShardedAnyKey accepts, for a merchant with more than one quota shard
	// (as MySQL says, not a cache), a message key other than its merchant_id
	// (producers spreading it over partitions); lanes go by merchant and
	// shard, never by key.
	ShardedAnyKey bool
	// RefundPendingAge is how long a refund may wait for its payment before
	// it counts as overdue (a metric an alert watches).
	RefundPendingAge time.Duration
}

func (p *parser) idgen(required bool) IDGen {
	g := IDGen{
		Base:           p.integer("IDGEN_WORKER_ID_BASE", 0, 0, MaxWorkerID),
		Count:          p.integer("IDGEN_WORKER_ID_COUNT", MaxWorkerID+1, 1, MaxWorkerID+1),
		LeaseTTL:       p.duration("IDGEN_LEASE_TTL", 30*time.Second, time.Second, 10*time.Minute),
		StepAsideAfter: p.duration("IDGEN_STEP_ASIDE_AFTER", 5*time.Second, 100*time.Millisecond, 10*time.Minute),
		PodName:        p.str("POD_NAME", ""),
		PodIP:          p.str("POD_IP", ""),
		WorkerID:       -1,
	}
	if g.Base+g.Count > MaxWorkerID+1 {
		p.fail("IDGEN_WORKER_ID_COUNT", strconv.Itoa(g.Count), fmt.Sprintf("with IDGEN_WORKER_ID_BASE=%d goes past worker ID %d", g.Base, MaxWorkerID))
	}
	explicit := p.integer("IDGEN_WORKER_ID", -1, 0, MaxWorkerID)
	switch {
	case explicit >= 0:
		g.WorkerID, g.Source = explicit, "IDGEN_WORKER_ID"
		if explicit < g.Base || explicit >= g.Base+g.Count {
			p.fail("IDGEN_WORKER_ID", strconv.Itoa(explicit), fmt.Sprintf("is outside this service's range %d..%d (IDGEN_WORKER_ID_BASE, IDGEN_WORKER_ID_COUNT)", g.Base, g.Base+g.Count-1))
		}
	case p.getenv("IDGEN_WORKER_ID") != "": // malformed: already reported
	case g.PodName != "":
		ordinal, ok := podOrdinal(g.PodName)
		if !ok {
			if required {
				p.fail("POD_NAME", g.PodName, "has no StatefulSet ordinal suffix (name-N); set IDGEN_WORKER_ID instead")
			}
			break
		}
		if ordinal >= g.Count {
			p.fail("POD_NAME", g.PodName, fmt.Sprintf("ordinal %d is not below IDGEN_WORKER_ID_COUNT=%d", ordinal, g.Count))
			break
		}
		g.WorkerID = g.Base + ordinal
		g.Source = fmt.Sprintf("POD_NAME ordinal %d + IDGEN_WORKER_ID_BASE %d", ordinal, g.Base)
	case required:
		p.fail("IDGEN_WORKER_ID", "", "or POD_NAME (StatefulSet pod name) is required to pick a Snowflake worker ID")
	}
	return g
}

// podOrdinal returns N of a StatefulSet pod name "name-N".
func podOrdinal(pod string) (int, bool) {
	i := strings.LastIndexByte(pod, '-')
	if i < 0 || i == len(pod)-1 {
		return 0, false
	}
	n, err := strconv.Atoi(pod[i+1:])
	if err != nil || strconv.Itoa(n) != pod[i+1:] {
		return 0, false
	}
	return n, true
}

func (p *parser) worker() Worker {
	w := Worker{
		Lanes:            p.integer("WORKER_LANES", 2, 1, 1024),
		BatchSize:        p.integer("WORKER_BATCH_SIZE", 2048, 1, 10000),
		LatencyBudget:    p.duration("WORKER_LATENCY_BUDGET", 50*time.Millisecond, 0, 10*time.Second),
		CommitInterval:   p.duration("WORKER_COMMIT_INTERVAL", time.Second, 10*time.Millisecond, 5*time.Minute),
		MaxAttempts:      p.integer("WORKER_MAX_ATTEMPTS", 5, 1, 1000),
		ShutdownTimeout:  p.duration("SHUTDOWN_TIMEOUT", 10*time.Second, time.Second, 10*time.Minute),
		ShardedAnyKey:    p.boolean("WORKER_SHARDED_ANY_KEY", false),
		RefundPendingAge: p.duration("WORKER_REFUND_PENDING_AGE", 24*time.Hour, time.Minute, 365*24*time.Hour),
	}
	if v := p.getenv("WORKER_BATCH_WAIT"); v != "" { // read raw: not a variable any more
		p.fail("WORKER_BATCH_WAIT", v, "is gone: lanes batch against WORKER_LATENCY_BUDGET")
	}
	w.MaxInFlight = p.integer("WORKER_MAX_INFLIGHT", defaultMaxInFlight(w.Lanes, w.BatchSize), 1, 1_000_000)
	return w
}

// defaultMaxInFlight is two batches per lane: one partition alone (a hot
// merchant's, whose shards spread over every lane) keeps each lane's running
// batch and its next one full. A window of one batch per lane halved the
// batches of a hot merchant's partition, and so doubled its cost per event.
func defaultMaxInFlight(lanes, batchSize int) int {
	return min(2*lanes*batchSize, 1_000_000)
}
