package dlq

import (
	"errors"
	"fmt"
	"time"

	"github.com/segmentio/kafka-go"
)

// DefaultMaxReplays is how many times one payload may be replayed: a record
// whose replay count has reached it is refused.
const DefaultMaxReplays = 3

// ReplayOptions selects and paces a replay.
type ReplayOptions struct {
	DLQTopic string
	// ToTopic overrides the record's original topic. When it is empty each
	// record goes back to its original topic and partition; otherwise the
	// partition is chosen by key hash (kafka.Hash).
	ToTopic    string
	Filter     Filter
	Limit      int     // most records to send in this run (0: no limit)
	MaxReplays int     // refuse records whose replay count is already this high (DefaultMaxReplays)
	Rate       float64 // messages per second (0: unlimited)
	BatchSize  int     // messages per acknowledged write (100); smaller under Rate
	// JobID labels the replay (replay.job_id). Empty: the stored job's id
	// when resuming, else a generated one.
	JobID        string
	DryRun       bool          // print what would be sent; send and record nothing
	ProgressFile string        // required unless DryRun
	Restart      bool          // ignore the stored progress of this selection
	SendTimeout  time.Duration // bound on one batch write, which an interrupt does not cut short (30s)
}

func (o *ReplayOptions) setDefaults() {
	if o.MaxReplays == 0 {
		o.MaxReplays = DefaultMaxReplays
	}
	if o.BatchSize == 0 {
		o.BatchSize = 100
	}
	if o.SendTimeout == 0 {
		o.SendTimeout = 30 * time.Second
	}
}

// Errors of a replay's setup.
var (
	ErrNoProgressFile = errors.New("dlq: a replay that sends needs a progress file")
	ErrJobMismatch    = errors.New("dlq: the stored progress of this selection belongs to another job")
	ErrNoTarget       = errors.New("dlq: no topic to replay to")
)

// Validate reports every problem at once.
func (o ReplayOptions) Validate() error {
	var errs []error
	if o.DLQTopic == "" {
		errs = append(errs, errors.New("dlq: DLQ topic is empty"))
	}
	if o.ToTopic != "" && o.ToTopic == o.DLQTopic {
		errs = append(errs, fmt.Errorf("dlq: refusing to replay %s into itself", o.DLQTopic))
	}
	if o.Limit < 0 {
		errs = append(errs, fmt.Errorf("dlq: limit %d is negative", o.Limit))
	}
	if o.MaxReplays < 1 {
		errs = append(errs, fmt.Errorf("dlq: max replays %d is below 1", o.MaxReplays))
	}
	if o.Rate < 0 {
		errs = append(errs, fmt.Errorf("dlq: rate %g is negative", o.Rate))
	}
	if o.BatchSize < 1 {
		errs = append(errs, fmt.Errorf("dlq: batch size %d is below 1", o.BatchSize))
	}
	if o.SendTimeout < 0 {
		errs = append(errs, fmt.Errorf("dlq: send timeout %s is negative", o.SendTimeout))
	}
	if o.ProgressFile == "" && !o.DryRun {
		errs = append(errs, ErrNoProgressFile)
	}
	if err := o.Filter.Validate(); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// Selection is the key of this replay's progress: the DLQ topic, the filter
// and the target. Limit, rate, batch size and max replays pace or guard a run;
// they do not change what the selection is.
func (o ReplayOptions) Selection() string {
	to := o.ToTopic
	if to == "" {
		to = "original"
	}
	return o.DLQTopic + " [" + o.Filter.Key() + "] -> " + to
}

// Action is what a replay did with one DLQ record.
type Action string

// The actions.
const (
	ActionSend       Action = "send"       // selected and sent (in a dry run: would be)
	ActionRefuse     Action = "refuse"     // selected, but its replay count reached MaxReplays
	ActionSkip       Action = "skip"       // not selected by the filter
	ActionUnreadable Action = "unreadable" // selected, but not a record, or no topic to send to
)

// Step is one DLQ record examined by a replay. Message is what is sent for ActionSend.
type Step struct {
	Entry   Entry
	Action  Action
	Message kafka.Message
}

// Observer hears about a replay as it runs, on the goroutine that called Replay.
type Observer interface {
	Begin(toExamine int64) // DLQ offsets this run will read
	Step(Step)             // every record examined (a send is not yet acknowledged)
	Acked(sent int)        // a batch was acknowledged and recorded; sent is the run's total
}

// Refusal is a record a replay would not send.
type Refusal struct {
	Partition   int    `json:"partition"`
	Offset      int64  `json:"offset"`
	EventID     string `json:"event_id"`
	Merchant    string `json:"merchant"`
	ReplayCount int    `json:"replay_count"`
	Reason      string `json:"reason"`
}

// Report is the outcome of one replay run; Replay returns it also with an
// error, counting what was done until then.
type Report struct {
	JobID        string    `json:"job_id"`
	Selection    string    `json:"selection"`
	ProgressFile string    `json:"progress_file,omitempty"`
	DryRun       bool      `json:"dry_run"`
	Resumed      bool      `json:"resumed"`           // stored progress of this selection was used
	Examined     int       `json:"examined"`          // DLQ records read
	Matched      int       `json:"matched"`           // selected by the filter
	Sent         int       `json:"sent"`              // acknowledged (dry run: would be sent)
	Refused      []Refusal `json:"refused"`           // selected, not sent: max replays reached or unreadable
	Expired      int64     `json:"expired,omitempty"` // DLQ offsets deleted by retention before this selection reached them
	LimitReached bool      `json:"limit_reached"`
	Done         bool      `json:"done"` // every selected record up to the high watermark is handled
}
