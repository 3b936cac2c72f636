package idgen

import (
	"database/sql/driver"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
)

func TestDecode(t *testing.T) {
	at := time.Date(2026, 11, 29, 7, 0, 0, 123_000_000, time.UTC)
	ms := at.UnixMilli() - EpochUnixMilli
	tests := []struct {
		name string
		id   ID
		want Parts
	}{
		{"zero", 0, Parts{Time: Epoch(), Worker: 0, Sequence: 0}},
		{"composed", ID(ms<<timeShift | 513<<workerShift | 77), Parts{Time: at, Worker: 513, Sequence: 77}},
		{"max fields", ID(MaxTime<<timeShift | MaxWorker<<workerShift | MaxSequence),
			Parts{Time: time.UnixMilli(EpochUnixMilli + MaxTime).UTC(), Worker: MaxWorker, Sequence: MaxSequence}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Decode(tt.id)
			if !got.Time.Equal(tt.want.Time) || got.Worker != tt.want.Worker || got.Sequence != tt.want.Sequence {
				t.Fatalf("Decode(%d) = %+v, want %+v", tt.id, got, tt.want)
			}
		})
	}
	if maxID := ID(MaxTime<<timeShift | MaxWorker<<workerShift | MaxSequence); maxID < 0 || maxID != 1<<63-1 {
		t.Fatalf("largest ID %d: want 2^63-1 (sign bit never set)", maxID)
	}
	if got := Epoch(); !got.Equal(time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)) {
		t.Fatalf("Epoch() = %v", got)
	}
}

func TestJSON(t *testing.T) {
	type row struct {
		ID  ID  `json:"id"`
		Ptr *ID `json:"ptr"`
	}
	id := ID(1<<62 + 12345) // beyond 2^53: a JSON number would lose it in JavaScript
	b, err := json.Marshal(row{ID: id})
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"id":"4611686018427400249","ptr":null}`; string(b) != want {
		t.Fatalf("Marshal = %s, want %s", b, want)
	}
	var back row
	if err := json.Unmarshal(b, &back); err != nil || back.ID != id || back.Ptr != nil {
		t.Fatalf("Unmarshal = %+v, %v", back, err)
	}
	m, err := json.Marshal(map[ID]int{id: 1})
	if err != nil || string(m) != `{"4611686018427400249":1}` {
		t.Fatalf("map key: %s %v", m, err)
	}

	tests := []struct {
		in      string
		want    ID
		wantErr bool
	}{
		{`"42"`, 42, false},
		{`42`, 42, false}, // lenient: a bare number is accepted on input
		{`"9223372036854775807"`, 1<<63 - 1, false},
		{`"9223372036854775808"`, 0, true},
		{`"-1"`, 0, true},
		{`""`, 0, true},
		{`"4x"`, 0, true},
		{`true`, 0, true},
	}
	for _, tt := range tests {
		var got ID
		err := json.Unmarshal([]byte(tt.in), &got)
		if (err != nil) != tt.wantErr || got != tt.want {
			t.Errorf("Unmarshal(%s) = %d, %v; want %d, err %v", tt.in, got, err, tt.want, tt.wantErr)
		}
	}
	keep := ID(7)
	if err := json.Unmarshal([]byte(`null`), &keep); err != nil || keep != 7 {
		t.Fatalf("null: %d %v", keep, err)
	}
}

func TestValueScan(t *testing.T) {
	v, err := ID(99).Value()
	if err != nil || v != driver.Value(int64(99)) {
		t.Fatalf("Value = %#v, %v", v, err)
	}
	tests := []struct {
		src     any
		want    ID
		wantErr bool
	}{
		{int64(5), 5, false},
		{uint64(6), 6, false},
		{[]byte("7"), 7, false},
		{"8", 8, false},
		{int64(-1), 0, true},
		{uint64(1 << 63), 0, true},
		{nil, 0, true},
		{3.5, 0, true},
		{"x", 0, true},
	}
	for _, tt := range tests {
		var got ID
		err := got.Scan(tt.src)
		if (err != nil) != tt.wantErr || got != tt.want {
			t.Errorf("Scan(%#v) = %d, %v; want %d, err %v", tt.src, got, err, tt.want, tt.wantErr)
		}
	}
}

func TestParseIDAndString(t *testing.T) {
	id, err := ParseID(ID(123456789).String())
	if err != nil || id != 123456789 {
		t.Fatalf("round trip: %d %v", id, err)
	}
	if _, err := ParseID("-5"); err == nil {
		t.Fatal("negative accepted")
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
