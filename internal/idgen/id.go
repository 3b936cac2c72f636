package idgen

import "time"

// Layout of an ID, from the most significant bit: 1 sign bit (always 0),
// TimeBits of milliseconds since the epoch, WorkerBits of worker ID,
// SequenceBits of sequence within the millisecond.
const (
	TimeBits     = 41
	WorkerBits   = 10
	SequenceBits = 12

	MaxWorker   = 1<<WorkerBits - 1   // 1023
	MaxSequence = 1<<SequenceBits - 1 // 4095
	MaxTime     = 1<<TimeBits - 1     // last usable millisecond after the epoch

	// EpochUnixMilli is 2024-01-01T00:00:00Z in Unix milliseconds.
	EpochUnixMilli = 1704067200000

	epochUnixNano = EpochUnixMilli * int64(time.Millisecond)
	workerShift   = SequenceBits
	timeShift     = SequenceBits + WorkerBits
)

// ID is a Snowflake ID, stored as a BIGINT.
type ID int64
