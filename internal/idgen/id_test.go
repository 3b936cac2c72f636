package idgen

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
)

// parts is an ID taken apart (the tests check the layout with it).
type parts struct {
	Time     time.Time // UTC, millisecond precision
	Worker   int
	Sequence int
}

func decode(id ID) parts {
	return parts{
		Time:     time.UnixMilli(EpochUnixMilli + int64(id)>>timeShift).UTC(),
		Worker:   int(int64(id)>>workerShift) & MaxWorker,
		Sequence: int(id) & MaxSequence,
	}
}

func epoch() time.Time { return time.UnixMilli(EpochUnixMilli).UTC() }

func TestDecode(t *testing.T) {
	at := time.Date(2026, 11, 29, 7, 0, 0, 123_000_000, time.UTC)
	ms := at.UnixMilli() - EpochUnixMilli
	tests := []struct {
		name string
		id   ID
		want parts
	}{
		{"zero", 0, parts{Time: epoch(), Worker: 0, Sequence: 0}},
		{"composed", ID(ms<<timeShift | 513<<workerShift | 77), parts{Time: at, Worker: 513, Sequence: 77}},
		{"max fields", ID(MaxTime<<timeShift | MaxWorker<<workerShift | MaxSequence),
			parts{Time: time.UnixMilli(EpochUnixMilli + MaxTime).UTC(), Worker: MaxWorker, Sequence: MaxSequence}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := decode(tt.id)
			if !got.Time.Equal(tt.want.Time) || got.Worker != tt.want.Worker || got.Sequence != tt.want.Sequence {
				t.Fatalf("decode(%d) = %+v, want %+v", tt.id, got, tt.want)
			}
		})
	}
	if maxID := ID(MaxTime<<timeShift | MaxWorker<<workerShift | MaxSequence); maxID < 0 || maxID != 1<<63-1 {
		t.Fatalf("largest ID %d: want 2^63-1 (sign bit never set)", maxID)
	}
	if got := epoch(); !got.Equal(time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)) {
		t.Fatalf("epoch() = %v", got)
	}
}

func TestErrorsClassify(t *testing.T) {
	var err error = &ClockBackwardError{By: 6 * time.Millisecond}
	var cbe *ClockBackwardError
	if !errors.Is(err, ErrClockBackward) || !errors.As(err, &cbe) || cbe.By != 6*time.Millisecond {
		t.Fatalf("ClockBackwardError does not classify: %v", err)
	}
	if errors.Is(err, ErrTimeExhausted) {
		t.Fatal("ClockBackwardError is ErrTimeExhausted")
	}
	since := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	held := error(&HeldError{WorkerID: 4, Holder: Holder{Pod: "w-4", IP: "10.1.2.3", Since: since}, ExpiresIn: time.Second})
	if !errors.Is(held, ErrWorkerHeld) {
		t.Fatal("HeldError is not ErrWorkerHeld")
	}
	for _, want := range []string{"worker 4", `"w-4"`, `"10.1.2.3"`, "2026-01-02T03:04:05Z"} {
		if !contains(held.Error(), want) {
			t.Errorf("%q does not name %s", held.Error(), want)
		}
	}
	if raw := (&HeldError{Raw: "garbage"}).Error(); !contains(raw, "garbage") {
		t.Errorf("unparsable holder not shown: %q", raw)
	}
	sw := error(&StartWaitError{WorkerID: 1, HighWater: since, Wait: time.Hour, Max: 3 * time.Second})
	if !errors.Is(sw, ErrStartWaitTooLong) || !contains(sw.Error(), "2026-01-02T03:04:05Z") {
		t.Fatalf("StartWaitError: %v", sw)
	}
	// What NextID refuses with describes this server: internal/failure's
	// outage classifier finds it through any wrapping.
	for _, err := range []error{
		fmt.Errorf("ledger: ids: %w", &ClockBackwardError{By: time.Second}),
		fmt.Errorf("%w: worker 3: not held", ErrLeaseNotValid),
		fmt.Errorf("%w: one call would wait 2s", ErrClockStalled),
		ErrClockBeforeEpoch, ErrTimeExhausted,
	} {
		var o interface{ Outage() bool }
		if !errors.As(err, &o) || !o.Outage() {
			t.Errorf("%v is not an outage", err)
		}
	}
	if errors.Is(ErrLeaseNotValid, ErrClockStalled) {
		t.Fatal("sentinels compare equal")
	}
}

func contains(s, sub string) bool { return strings.Contains(s, sub) }
