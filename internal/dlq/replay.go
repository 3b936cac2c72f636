package dlq

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/segmentio/kafka-go"
	"golang.org/x/time/rate"
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
	DryRun       bool   // report what would be sent; send and record nothing
	ProgressFile string // required unless DryRun
	Restart      bool   // begin a new job for this selection, forgetting what the stored one sent
}

// sendTimeout bounds one batch write, which an interrupt does not cut short.
const sendTimeout = 30 * time.Second

func (o *ReplayOptions) setDefaults() {
	o.MaxReplays, o.BatchSize = cmp.Or(o.MaxReplays, DefaultMaxReplays), cmp.Or(o.BatchSize, 100)
}

// Errors of a replay's setup.
var (
	ErrNoProgressFile = errors.New("dlq: a replay that sends needs a progress file")
	ErrJobMismatch    = errors.New("dlq: the stored progress of this selection belongs to another job")
	ErrNoTarget       = errors.New("dlq: no topic to replay to")
)

// Validate reports every problem at once.
func (o ReplayOptions) Validate() error {
	errs := o.Filter.problems()
	errs.add(o.DLQTopic == "", "DLQ topic is empty")
	errs.add(o.ToTopic != "" && o.ToTopic == o.DLQTopic, "refusing to replay %s into itself", o.DLQTopic)
	errs.add(o.Limit < 0, "limit %d is negative", o.Limit)
	errs.add(o.MaxReplays < 1, "max replays %d is below 1", o.MaxReplays)
	errs.add(o.Rate < 0, "rate %g is negative", o.Rate)
	errs.add(o.BatchSize < 1, "batch size %d is below 1", o.BatchSize)
	if o.ProgressFile == "" && !o.DryRun {
		errs = append(errs, ErrNoProgressFile)
	}
	return errors.Join(errs...)
}

// Selection is the key of this replay's progress: the DLQ topic, the filter
// and the target. Limit, rate, batch size and max replays pace or guard a run;
// they do not change what the selection is.
func (o ReplayOptions) Selection() string {
	return o.DLQTopic + " [" + o.Filter.key() + "] -> " + cmp.Or(o.ToTopic, "original")
}

// Action is what a replay did with one DLQ record.
type Action string

// The actions.
const (
	ActionSend       Action = "send"       // selected and sent (in a dry run: would be)
	ActionRefuse     Action = "refuse"     // selected, but its replay count reached MaxReplays
	ActionSkip       Action = "skip"       // not selected by the filter
	ActionUnreadable Action = "unreadable" // selected, but not a record, or no topic to send to
	ActionCopy       Action = "copy"       // a later copy of a message met before in this run
	ActionSent       Action = "sent"       // selected, and sent by an earlier run of the job
	ActionResolved   Action = "resolved"   // selected, but an operator marked it resolved
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
	Resumed      bool      `json:"resumed"`  // the selection's stored job was continued
	Examined     int       `json:"examined"` // DLQ records read
	Copies       int       `json:"copies"`   // selected records that were later copies of a message, not sent
	Resolved     int       `json:"resolved"` // selected messages marked resolved, not sent
	Matched      int       `json:"matched"`  // messages selected and not sent by an earlier run of the job
	Sent         int       `json:"sent"`     // acknowledged (dry run: would be sent)
	Refused      []Refusal `json:"refused"`  // selected, not sent: max replays reached or unreadable
	LimitReached bool      `json:"limit_reached"`
	Done         bool      `json:"done"` // every selected message up to the high watermark is handled
}

// Replay sends the selected messages of the DLQ back as replayMessage makes
// them, so one that fails again returns with a raised replay count and is
// refused at MaxReplays. Writes are synchronous (acks=all); obs, which may be
// nil, hears of every record read. Records of one provenance are one message,
// sent once: the first read counts, and what the selection's job sent in an
// earlier run (the progress file, appended to after every acknowledged batch)
// is not sent again. A replayed message that failed again is a copy of its
// original (replay.origin), so a second run of a job does not send it: a new
// job (Restart) does, counted from its latest copy's replay count. An interrupt stops after the batch in flight is
// recorded; a crash between an ack and the append resends that batch, which
// the worker's idempotency absorbs.
func (c *Client) Replay(ctx context.Context, o ReplayOptions, obs Observer) (Report, error) {
	o.setDefaults()
	if err := o.Validate(); err != nil {
		return Report{}, err
	}
	rep := Report{Selection: o.Selection(), DryRun: o.DryRun, ProgressFile: o.ProgressFile, Refused: []Refusal{}}
	prog, err := openProgress(o.ProgressFile, rep.Selection, !o.DryRun)
	if err != nil {
		return rep, err
	}
	defer prog.close()
	rep.Resumed = prog.job != "" && !o.Restart
	if rep.JobID, err = chooseJobID(o, prog.job, rep.Resumed); err != nil {
		return rep, err
	}
	if !rep.Resumed {
		if err := prog.start(rep.JobID); err != nil {
			return rep, err
		}
	}
	ranges, gs, err := c.groups(ctx, o.DLQTopic, o.Filter)
	if err != nil {
		return rep, err
	}
	run := newReplayRun(ctx, c, o, prog, &rep, obs)
	run.groups = gs
	defer run.close()
	var total int64
	for _, r := range ranges {
		total += r.Len()
	}
	run.obs.Begin(total)
	if err := c.scan(ctx, o.DLQTopic, ranges, run.step); err != nil {
		return rep, err // what was acknowledged is recorded; the batch not yet sent is dropped
	}
	rep.Done = !rep.LimitReached
	return rep, run.flush(ctx)
}

func chooseJobID(o ReplayOptions, stored string, resumed bool) (string, error) {
	switch {
	case !resumed && o.JobID != "":
		return o.JobID, nil
	case !resumed:
		var b [3]byte
		if _, err := rand.Read(b[:]); err != nil {
			return "", fmt.Errorf("dlq: job id: %w", err)
		}
		return "replay-" + time.Now().UTC().Format("20060102T150405Z") + "-" + hex.EncodeToString(b[:]), nil
	case o.JobID == "" || o.JobID == stored:
		return stored, nil
	}
	return "", fmt.Errorf("%w: %q belongs to job %s: pass --job-id %s to resume it, or --restart to begin again",
		ErrJobMismatch, o.Selection(), stored, stored)
}

// replayRun is the state of one Replay call.
type replayRun struct {
	ctx     context.Context // the Replay call's: the scan callback has none of its own
	o       ReplayOptions
	prog    *progress
	rep     *Report
	obs     Observer
	w       *kafka.Writer // nil in a dry run
	limiter *rate.Limiter // nil without a rate
	batch   int           // messages per write

	seen    map[string]bool   // identities read so far
	groups  map[string]*group // every message of the topic
	pending []kafka.Message
	ids     []string // identities of pending
}

func newReplayRun(ctx context.Context, c *Client, o ReplayOptions, prog *progress, rep *Report, obs Observer) *replayRun {
	if obs == nil {
		obs = nopObserver{}
	}
	r := &replayRun{ctx: ctx, o: o, prog: prog, rep: rep, obs: obs, batch: o.BatchSize, seen: map[string]bool{}}
	if o.Rate > 0 { // small batches a tenth of a second apart keep the pace even
		r.batch = min(max(int(o.Rate/10), 1), o.BatchSize)
		r.limiter = rate.NewLimiter(rate.Limit(o.Rate), r.batch)
	}
	if !o.DryRun { // writes are synchronous and batched here
		r.w = &kafka.Writer{Addr: kafka.TCP(c.b.Addrs...), Transport: c.b.Transport, Balancer: originalPartition{fallback: &kafka.Hash{}},
			RequiredAcks: kafka.RequireAll, BatchSize: r.batch, BatchTimeout: time.Millisecond, WriteTimeout: sendTimeout}
	}
	return r
}

func (r *replayRun) close() {
	if r.w != nil {
		_ = r.w.Close() // every write was synchronous: nothing is left to flush
	}
}

// step decides what to do with one DLQ message.
func (r *replayRun) step(m kafka.Message) error {
	if isMark(m) {
		return nil
	}
	e := inspect(m)
	id := identity(e.Record, e.Err)
	g := r.groups[id]
	e.Copies, e.ReplayCount = g.copies, g.replays
	r.rep.Examined++
	st := Step{Entry: e, Action: r.decide(e, id)}
	r.seen[id] = true
	var refusal string
	switch st.Action {
	case ActionRefuse:
		refusal = fmt.Sprintf("replayed %d time(s) already, --max-replays is %d", e.ReplayCount, r.o.MaxReplays)
	case ActionUnreadable:
		refusal = e.Err.Error()
	case ActionCopy:
		r.rep.Copies++
	case ActionResolved:
		r.rep.Resolved++
	case ActionSend:
		var err error
		if st.Message, err = replayMessage(e.Record, r.rep.JobID, r.o.ToTopic, r.o.DLQTopic); err != nil {
			st.Action, refusal = ActionUnreadable, err.Error()
		}
	}
	if refusal != "" {
		r.rep.Refused = append(r.rep.Refused, Refusal{Partition: e.Partition, Offset: e.Offset, EventID: e.EventID,
			Merchant: e.Merchant, ReplayCount: e.ReplayCount, Reason: refusal})
	}
	if refusal != "" || st.Action == ActionSend {
		r.rep.Matched++
	}
	r.obs.Step(st)
	if st.Action != ActionSend {
		return nil
	}
	if r.o.DryRun {
		r.rep.Sent++
	} else {
		r.pending, r.ids = append(r.pending, st.Message), append(r.ids, id)
	}
	if r.o.Limit > 0 && r.rep.Sent+len(r.pending) >= r.o.Limit {
		r.rep.LimitReached = true
		if err := r.flush(r.ctx); err != nil {
			return err
		}
		return errStopScan
	}
	if len(r.pending) >= r.batch {
		return r.flush(r.ctx)
	}
	return nil
}

func (r *replayRun) decide(e Entry, id string) Action {
	switch {
	case !r.o.Filter.match(e):
		return ActionSkip
	case r.seen[id]:
		return ActionCopy
	case r.prog.sent[id]:
		return ActionSent
	case r.groups[id].resolved:
		return ActionResolved
	case e.Err != nil:
		return ActionUnreadable
	case e.ReplayCount >= r.o.MaxReplays:
		return ActionRefuse
	}
	return ActionSend
}

// flush sends the pending batch, waits for every replica's ack, then records
// it. The write is not cut short by an interrupt: a batch in flight is
// finished and recorded (within sendTimeout), so a resumed run does not send it again.
func (r *replayRun) flush(ctx context.Context) error {
	n := len(r.pending)
	if n == 0 {
		return nil
	}
	if r.limiter != nil {
		if err := r.limiter.WaitN(ctx, n); err != nil {
			return fmt.Errorf("dlq: rate limit: %w", err)
		}
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), sendTimeout)
	err := r.w.WriteMessages(sctx, r.pending...)
	cancel()
	if err != nil {
		return fmt.Errorf("dlq: send %d message(s): %w", n, err)
	}
	r.rep.Sent += n
	if err := r.prog.record(r.rep.JobID, r.ids); err != nil {
		return fmt.Errorf("%w (the last %d acknowledged message(s) will be sent again on resume)", err, n)
	}
	r.pending, r.ids = r.pending[:0], r.ids[:0]
	r.obs.Acked(r.rep.Sent)
	return nil
}

// replayMessage is what a replay sends for a record: the original key, value
// and headers, to the original topic and partition (or toTopic, partition by
// key), plus replay.job_id, replay.count = the record's count + 1 and
// replay.origin, which the worker's dead-letter record of it carries over.
func replayMessage(rec Record, jobID, toTopic, dlqTopic string) (kafka.Message, error) {
	m := kafka.Message{Topic: rec.OriginalTopic, Partition: rec.OriginalPartition, Key: rec.Key, Value: rec.Value}
	if toTopic != "" && toTopic != rec.OriginalTopic {
		m.Topic, m.Partition = toTopic, -1
	}
	if m.Topic == "" || m.Topic == dlqTopic {
		return kafka.Message{}, ErrNoTarget
	}
	m.Headers = append(slices.Clip(rec.Headers), // a record's headers never hold the replay ones
		kafka.Header{Key: HeaderReplayJob, Value: []byte(jobID)},
		kafka.Header{Key: HeaderReplayCount, Value: []byte(strconv.Itoa(rec.ReplayCount + 1))},
		kafka.Header{Key: HeaderReplayOrigin, Value: []byte(rec.Root())})
	return m, nil
}

// originalPartition sends a message with a Partition the topic has to that
// partition, and any other (Partition -1) by the fallback, a key hash.
// kafka-go's Writer ignores Message.Partition but hands it to the balancer.
type originalPartition struct{ fallback kafka.Balancer }

func (b originalPartition) Balance(m kafka.Message, partitions ...int) int {
	if m.Partition >= 0 && slices.Contains(partitions, m.Partition) {
		return m.Partition
	}
	return b.fallback.Balance(m, partitions...)
}

type nopObserver struct{}

func (nopObserver) Begin(int64) {}
func (nopObserver) Step(Step)   {}
func (nopObserver) Acked(int)   {}
