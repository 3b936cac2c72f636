package dlq

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"maps"
	"time"

	"github.com/segmentio/kafka-go"
	"go.uber.org/zap"
	"golang.org/x/time/rate"
)

// Replay sends the selected DLQ records back (see the package doc), from the
// stored progress of the selection on, and records progress after every
// acknowledged batch. obs may be nil.
//
// Interrupting ctx stops the run after the batch in flight is acknowledged
// and recorded; the next run with the same selection resumes where it stopped.
func (c *Client) Replay(ctx context.Context, o ReplayOptions, obs Observer) (Report, error) {
	o.setDefaults()
	if err := o.Validate(); err != nil {
		return Report{}, err
	}
	if obs == nil {
		obs = nopObserver{}
	}
	rep := Report{Selection: o.Selection(), DryRun: o.DryRun, ProgressFile: o.ProgressFile, Refused: []Refusal{}}
	prog, err := openProgress(o)
	if err != nil {
		return rep, err
	}
	defer prog.Close()
	job, resumed := prog.Jobs[rep.Selection], false
	if job != nil && !o.Restart {
		resumed = true
	} else {
		job = &Job{DLQTopic: o.DLQTopic, Selection: rep.Selection, Next: map[int]int64{}, Started: time.Now().UTC()}
	}
	rep.Resumed = resumed
	if job.JobID, err = chooseJobID(o.JobID, job, resumed); err != nil {
		return rep, err
	}
	rep.JobID = job.JobID

	ranges, total, err := c.resumeRanges(ctx, o, job, &rep)
	if err != nil {
		return rep, err
	}
	obs.Begin(total)

	run := newReplayRun(ctx, c, o, prog, job, &rep, obs)
	defer run.close()
	if err := c.Scan(ctx, o.DLQTopic, ranges, run.step); err != nil {
		return rep, err // what was acknowledged is recorded; the batch not yet sent is dropped
	}
	if !rep.LimitReached {
		for _, r := range ranges {
			if r.Len() > 0 {
				run.cursor[r.Partition] = r.To // also past a gap at the end of the range
			}
		}
		rep.Done = true
	}
	return rep, run.flush(ctx)
}

// resumeRanges is what this run reads: the DLQ from the first offsets to
// the high watermarks, narrowed by the filter, each partition from the job's
// next offset on.
func (c *Client) resumeRanges(ctx context.Context, o ReplayOptions, job *Job, rep *Report) ([]Range, int64, error) {
	ranges, err := c.Watermarks(ctx, o.DLQTopic)
	if err != nil {
		return nil, 0, err
	}
	ranges = o.Filter.Narrow(ranges)
	var total int64
	for i, r := range ranges {
		next, ok := job.Next[r.Partition]
		switch {
		case !ok:
		case next < r.From: // retention deleted records this selection had not reached
			rep.Expired += r.From - next
			c.log.Warn("dlq: records expired before replay", zap.String("topic", o.DLQTopic),
				zap.Int("partition", r.Partition), zap.Int64("from", next), zap.Int64("to", r.From))
		case next > r.To:
			c.log.Warn("dlq: stored progress is past the high watermark: was the topic recreated? (--restart)",
				zap.String("topic", o.DLQTopic), zap.Int("partition", r.Partition), zap.Int64("next", next), zap.Int64("high_watermark", r.To))
		}
		if ok {
			ranges[i].From = min(max(r.From, next), r.To)
		}
		total += ranges[i].Len()
	}
	return ranges, total, nil
}

func openProgress(o ReplayOptions) (*Progress, error) {
	switch {
	case !o.DryRun:
		return OpenProgress(o.ProgressFile)
	case o.ProgressFile != "":
		return LoadProgress(o.ProgressFile)
	}
	return &Progress{Jobs: map[string]*Job{}}, nil
}

func chooseJobID(flag string, job *Job, resumed bool) (string, error) {
	switch {
	case !resumed && flag != "":
		return flag, nil
	case !resumed:
		return newJobID()
	case flag == "" || flag == job.JobID:
		return job.JobID, nil
	}
	return "", fmt.Errorf("%w: %q belongs to job %s: pass --job-id %s to resume it, or --restart to begin again",
		ErrJobMismatch, job.Selection, job.JobID, job.JobID)
}

func newJobID() (string, error) {
	var b [3]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("dlq: job id: %w", err)
	}
	return "replay-" + time.Now().UTC().Format("20060102T150405Z") + "-" + hex.EncodeToString(b[:]), nil
}

// replayRun is the state of one Replay call.
type replayRun struct {
	ctx     context.Context // the Replay call's: the scan callback has none of its own
	c       *Client
	o       ReplayOptions
	prog    *Progress
	job     *Job
	rep     *Report
	obs     Observer
	w       *kafka.Writer // nil in a dry run
	limiter *rate.Limiter // nil without a rate
	batch   int           // messages per write

	cursor  map[int]int64 // next offset per partition, counting records examined so far
	pending []kafka.Message
	refused int64 // refusals since the last commit
}

func newReplayRun(ctx context.Context, c *Client, o ReplayOptions, prog *Progress, job *Job, rep *Report, obs Observer) *replayRun {
	r := &replayRun{ctx: ctx, c: c, o: o, prog: prog, job: job, rep: rep, obs: obs, batch: o.BatchSize, cursor: maps.Clone(job.Next)}
	if o.Rate > 0 {
		// Small batches a tenth of a second apart keep the pace even.
		r.batch = min(max(int(o.Rate/10), 1), o.BatchSize)
		r.limiter = rate.NewLimiter(rate.Limit(o.Rate), r.batch)
	}
	if !o.DryRun {
		r.w = &kafka.Writer{
			Addr:         kafka.TCP(c.b.Addrs...),
			Transport:    c.b.Transport,
			Balancer:     originalPartition{fallback: &kafka.Hash{}},
			RequiredAcks: kafka.RequireAll,
			BatchSize:    r.batch,
			BatchTimeout: time.Millisecond, // writes are synchronous and batched here
			WriteTimeout: o.SendTimeout,
		}
	}
	return r
}

func (r *replayRun) close() {
	if r.w != nil {
		if err := r.w.Close(); err != nil {
			r.c.log.Warn("dlq: close writer", zap.Error(err))
		}
	}
}

// step decides what to do with one DLQ message.
func (r *replayRun) step(m kafka.Message) error {
	e := Inspect(m)
	r.rep.Examined++
	st := Step{Entry: e}
	switch {
	case !r.o.Filter.Match(e):
		st.Action = ActionSkip
	case e.Err != nil:
		st.Action = ActionUnreadable
		r.refuse(e, e.Err.Error())
	case e.ReplayCount >= r.o.MaxReplays:
		st.Action = ActionRefuse
		r.refuse(e, fmt.Sprintf("replayed %d time(s) already, --max-replays is %d", e.ReplayCount, r.o.MaxReplays))
	default:
		msg, err := replayMessage(e.Record, r.job.JobID, r.o.ToTopic, r.o.DLQTopic)
		if err != nil {
			st.Action = ActionUnreadable
			r.refuse(e, err.Error())
			break
		}
		st.Action, st.Message = ActionSend, msg
	}
	if st.Action != ActionSkip {
		r.rep.Matched++
	}
	r.cursor[e.Partition] = e.Offset + 1
	r.obs.Step(st)
	if st.Action != ActionSend {
		return nil
	}
	if r.o.DryRun {
		r.rep.Sent++
	} else {
		r.pending = append(r.pending, st.Message)
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

func (r *replayRun) refuse(e Entry, reason string) {
	r.refused++
	r.rep.Refused = append(r.rep.Refused, Refusal{
		Partition: e.Partition, Offset: e.Offset, EventID: e.EventID, Merchant: e.Merchant,
		ReplayCount: e.ReplayCount, Reason: reason,
	})
}

// flush sends the pending batch, waits for every replica's ack, then records
// the cursor. The write is not cut short by an interrupt: a batch in flight is
// finished and recorded (within SendTimeout), so a resumed run sends it not again.
func (r *replayRun) flush(ctx context.Context) error {
	if r.o.DryRun {
		return nil
	}
	if n := len(r.pending); n > 0 {
		if r.limiter != nil {
			if err := r.limiter.WaitN(ctx, n); err != nil {
				return fmt.Errorf("dlq: rate limit: %w", err)
			}
		}
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), r.o.SendTimeout)
		err := r.w.WriteMessages(sctx, r.pending...)
		cancel()
		if err != nil {
			return fmt.Errorf("dlq: send %d message(s): %w", n, err)
		}
		r.pending = r.pending[:0]
		r.rep.Sent += n
		r.job.Sent += int64(n)
	}
	if err := r.commit(); err != nil {
		return err
	}
	r.obs.Acked(r.rep.Sent)
	return nil
}

func (r *replayRun) commit() error {
	r.job.Next = maps.Clone(r.cursor)
	r.job.Refused += r.refused
	r.refused = 0
	r.job.Updated = time.Now().UTC()
	r.prog.Jobs[r.job.Selection] = r.job
	if err := r.prog.Save(); err != nil {
		return fmt.Errorf("%w (the last %d acknowledged message(s) will be sent again on resume)", err, r.rep.Sent)
	}
	return nil
}

type nopObserver struct{}

func (nopObserver) Begin(int64) {}
func (nopObserver) Step(Step)   {}
func (nopObserver) Acked(int)   {}
