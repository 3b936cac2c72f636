package dlq

import (
	"errors"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/zap"
)

// Broker is how this package reaches Kafka: the bootstrap addresses, a
// transport for writes and offset look-ups, and the franz-go options of the
// read_committed readers (dial.KafkaClients builds both with TLS and SASL).
type Broker struct {
	Addrs     []string
	Transport kafka.RoundTripper // nil: kafka.DefaultTransport
	Franz     []kgo.Opt          // client ID, TLS, SASL; nil: plain
}

// Options tunes a Client. The zero value is usable.
type Options struct {
	// PollWait bounds one wait for a message before the reader checks whether
	// its range is done (1s by default).
	PollWait time.Duration
	// Stall fails a scan whose partition delivers nothing for this long while
	// offsets below the captured high watermark remain unread (30s by default):
	// an unreachable broker must not pass for an empty partition.
	Stall time.Duration
}

func (o *Options) setDefaults() {
	if o.PollWait <= 0 {
		o.PollWait = time.Second
	}
	if o.Stall <= 0 {
		o.Stall = 30 * time.Second
	}
}

// Client runs the operator's work on a dead-letter topic: scan, summary, replay.
// It never joins a consumer group and never commits an offset.
type Client struct {
	b    Broker
	log  *zap.Logger
	opts Options
}

// ErrNoBrokers means the Broker names no address.
var ErrNoBrokers = errors.New("dlq: no broker addresses")

// NewClient returns a Client for the brokers. log may be zap.NewNop().
func NewClient(b Broker, log *zap.Logger, opts Options) (*Client, error) {
	if len(b.Addrs) == 0 {
		return nil, ErrNoBrokers
	}
	if log == nil {
		log = zap.NewNop()
	}
	if b.Transport == nil {
		b.Transport = kafka.DefaultTransport
	}
	opts.setDefaults()
	return &Client{b: b, log: log, opts: opts}, nil
}

func (c *Client) kafkaClient() *kafka.Client {
	return &kafka.Client{Addr: kafka.TCP(c.b.Addrs...), Transport: c.b.Transport, Timeout: 10 * time.Second}
}
