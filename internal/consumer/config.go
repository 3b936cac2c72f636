package consumer

import (
	"cmp"
	"errors"
	"fmt"
	"time"

	"github.com/segmentio/kafka-go"
	"go.opentelemetry.io/otel/trace"
)

// Config tunes a Consumer. Zero values take the defaults named on each field;
// Validate reports every problem at once.
type Config struct {
	Brokers  []string
	Topic    string // consumed topic
	Group    string // consumer group
	DLQTopic string // dead-letter topic; must differ from Topic

	// Lanes are parallel lanes, each one ordered (default 2: one commits while
	// the other prepares; the ledger writes at most one full batch at a time,
	// so more lanes only cut the traffic into smaller, costlier batches).
	Lanes     int
	BatchSize int // most items per handler call (default 2048)
	// LatencyBudget is how long a batch's oldest message may take from its
	// fetch to the handler's return: a lane holds a batch that is not full
	// until its oldest message has waited the budget less the lane's recent
	// handling time, so that a low rate still makes batches of many messages
	// (each batch pays the handler's fixed round trips). A full batch, or one
	// whose oldest message already waited that long (a backlog), goes at
	// once. 0 takes only what is already queued.
	LatencyBudget time.Duration
	// MaxInFlightPerPartition bounds the messages of a partition between
	// fetch and commit; a full window pauses that partition's fetch (default
	// two batches per lane: 2 x Lanes x BatchSize).
	MaxInFlightPerPartition int
	CommitInterval          time.Duration // asynchronous commit period (default 1s)

	MaxAttempts    int           // failures alone before a message goes to the DLQ as exhausted (default 5)
	BackoffInitial time.Duration // first retry delay (default 100ms)
	BackoffMax     time.Duration // retry delay cap (default 5s)
	ProbeTimeout   time.Duration // bound of one Probe call (default 2s)

	// ShutdownTimeout bounds Run's return after its context ends: in-flight
	// batches get about 60% of it, then are abandoned (not committed); the rest
	// is for the final commit and closing the group (default 10s).
	ShutdownTimeout time.Duration

	Dialer    *kafka.Dialer      // readers and the group (TLS, SASL); nil: a plain dialer
	Transport kafka.RoundTripper // the dead-letter writer (TLS, SASL); nil: one of Run's own, like Dialer

	SessionTimeout    time.Duration // group session (default 30s)
	HeartbeatInterval time.Duration // default 3s; below SessionTimeout
	RebalanceTimeout  time.Duration // default 30s; a revoked generation drains within half of it
	JoinGroupBackoff  time.Duration // wait after a failed join (default 2s)
	// GroupTimeout is the network timeout of coordinator requests, commits
	// included, and of dead-letter writes (default 5s, at most a fifth of
	// ShutdownTimeout, so that the final commit fits in the shutdown bound).
	GroupTimeout time.Duration

	// MaxWait is how long a fetch waits on the broker for a first byte
	// (default 500ms, Kafka's fetch.max.wait.ms): an idle partition costs a
	// fetch per MaxWait, and closing a reader may wait one out.
	MaxWait time.Duration

	// Tracer makes a span of each lane batch and dead-letter write; nil
	// (tracing off) makes none and reads no header.
	Tracer trace.Tracer

	// Gate decides when the consumer is a group member (see Gate); nil: always.
	Gate Gate
}

func (c *Config) setDefaults() {
	c.Lanes, c.BatchSize = cmp.Or(c.Lanes, 2), cmp.Or(c.BatchSize, 2048)
	c.MaxInFlightPerPartition = cmp.Or(c.MaxInFlightPerPartition, 2*c.Lanes*c.BatchSize)
	c.CommitInterval, c.MaxAttempts = cmp.Or(c.CommitInterval, time.Second), cmp.Or(c.MaxAttempts, 5)
	c.BackoffInitial, c.BackoffMax = cmp.Or(c.BackoffInitial, 100*time.Millisecond), cmp.Or(c.BackoffMax, 5*time.Second)
	c.ProbeTimeout, c.ShutdownTimeout = cmp.Or(c.ProbeTimeout, 2*time.Second), cmp.Or(c.ShutdownTimeout, 10*time.Second)
	c.SessionTimeout, c.HeartbeatInterval = cmp.Or(c.SessionTimeout, 30*time.Second), cmp.Or(c.HeartbeatInterval, 3*time.Second)
	c.RebalanceTimeout, c.JoinGroupBackoff = cmp.Or(c.RebalanceTimeout, 30*time.Second), cmp.Or(c.JoinGroupBackoff, 2*time.Second)
	c.GroupTimeout = cmp.Or(c.GroupTimeout, min(5*time.Second, c.ShutdownTimeout/5))
	c.MaxWait = cmp.Or(c.MaxWait, 500*time.Millisecond)
}

// Validate reports every invalid field of c with its defaults applied, joined.
func (c Config) Validate() error {
	c.setDefaults()
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf("consumer: "+format, args...)) }
	if len(c.Brokers) == 0 {
		bad("Brokers is empty")
	}
	for i, b := range c.Brokers {
		if b == "" {
			bad("Brokers[%d] is empty", i)
		}
	}
	if c.Topic == "" {
		bad("Topic is empty")
	}
	if c.Group == "" {
		bad("Group is empty")
	}
	if c.DLQTopic == "" {
		bad("DLQTopic is empty")
	} else if c.DLQTopic == c.Topic {
		bad("DLQTopic %q is the consumed topic", c.DLQTopic)
	}
	for _, n := range []struct {
		name string
		v    int
	}{{"Lanes", c.Lanes}, {"BatchSize", c.BatchSize},
		{"MaxInFlightPerPartition", c.MaxInFlightPerPartition}, {"MaxAttempts", c.MaxAttempts}} {
		if n.v < 1 {
			bad("%s = %d, want >= 1", n.name, n.v)
		}
	}
	if c.LatencyBudget < 0 {
		bad("LatencyBudget = %v, want >= 0", c.LatencyBudget)
	}
	for _, d := range []struct {
		name string
		d    time.Duration
	}{{"CommitInterval", c.CommitInterval}, {"BackoffInitial", c.BackoffInitial}, {"BackoffMax", c.BackoffMax},
		{"ProbeTimeout", c.ProbeTimeout}, {"ShutdownTimeout", c.ShutdownTimeout}, {"SessionTimeout", c.SessionTimeout},
		{"HeartbeatInterval", c.HeartbeatInterval}, {"RebalanceTimeout", c.RebalanceTimeout},
		{"JoinGroupBackoff", c.JoinGroupBackoff}, {"GroupTimeout", c.GroupTimeout}, {"MaxWait", c.MaxWait}} {
		if d.d <= 0 {
			bad("%s = %v, want > 0", d.name, d.d)
		}
	}
	if c.BackoffMax < c.BackoffInitial {
		bad("BackoffMax %v < BackoffInitial %v", c.BackoffMax, c.BackoffInitial)
	}
	if c.HeartbeatInterval >= c.SessionTimeout {
		bad("HeartbeatInterval %v >= SessionTimeout %v", c.HeartbeatInterval, c.SessionTimeout)
	}
	return errors.Join(errs...)
}

// drainBudget is how long in-flight batches may run once fetching stops:
// the larger share of the shutdown bound, and for a revoked generation also
// well within the rebalance timeout, after which the group would evict us.
// grace is how long cancelled handler calls then get to return.
func (c *Config) drainBudget(shutdown bool) (drain, grace time.Duration) {
	drain, grace = c.ShutdownTimeout*3/5, c.ShutdownTimeout/10
	if !shutdown {
		drain, grace = min(drain, c.RebalanceTimeout/2), min(grace, c.RebalanceTimeout/10)
	}
	return drain, grace
}
