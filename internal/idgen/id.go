package idgen

import (
	"database/sql/driver"
	"errors"
	"fmt"
	"strconv"
	"time"
)

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

// Epoch is the instant the time bits count from.
func Epoch() time.Time { return time.UnixMilli(EpochUnixMilli).UTC() }

// ID is a Snowflake ID. It is stored as a BIGINT and travels in JSON as a
// decimal string, because JavaScript numbers lose precision above 2^53.
type ID int64

// Parts is an ID taken apart.
type Parts struct {
	Time     time.Time // UTC, millisecond precision
	Worker   int
	Sequence int
}

// Decode takes an ID apart. It does not validate: a negative ID, which no
// Generator issues, decodes to meaningless parts.
func Decode(id ID) Parts {
	ms := int64(id) >> timeShift
	return Parts{
		Time:     time.UnixMilli(EpochUnixMilli + ms).UTC(),
		Worker:   int(int64(id)>>workerShift) & MaxWorker,
		Sequence: int(id) & MaxSequence,
	}
}

// ParseID parses the decimal form of an ID.
func ParseID(s string) (ID, error) {
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("idgen: parse id %q: %w", s, err)
	}
	if n < 0 {
		return 0, fmt.Errorf("idgen: parse id %q: negative", s)
	}
	return ID(n), nil
}

// String is the decimal form.
func (id ID) String() string { return strconv.FormatInt(int64(id), 10) }

// MarshalJSON encodes the ID as a JSON string.
func (id ID) MarshalJSON() ([]byte, error) {
	b := make([]byte, 0, 22)
	b = append(b, '"')
	b = strconv.AppendInt(b, int64(id), 10)
	return append(b, '"'), nil
}

// UnmarshalJSON accepts a JSON string (what MarshalJSON writes) and, to be
// lenient with hand-written input, a bare JSON number. null leaves id as is.
func (id *ID) UnmarshalJSON(b []byte) error {
	s := string(b)
	if s == "null" {
		return nil
	}
	if len(s) >= 2 && s[0] == '"' && s[len(s)-1] == '"' {
		s = s[1 : len(s)-1]
	}
	v, err := ParseID(s)
	if err != nil {
		return err
	}
	*id = v
	return nil
}

// MarshalText is the decimal form (used for map keys and text encodings).
func (id ID) MarshalText() ([]byte, error) { return strconv.AppendInt(nil, int64(id), 10), nil }

// UnmarshalText parses the decimal form.
func (id *ID) UnmarshalText(b []byte) error {
	v, err := ParseID(string(b))
	if err != nil {
		return err
	}
	*id = v
	return nil
}

// Value stores the ID as a BIGINT.
func (id ID) Value() (driver.Value, error) { return int64(id), nil }

// Scan reads a BIGINT column (the driver may hand it over as an integer or as
// text). NULL is an error: an ID column is never NULL; use *ID for one that may be.
func (id *ID) Scan(src any) error {
	switch v := src.(type) {
	case int64:
		if v < 0 {
			return fmt.Errorf("idgen: scan negative id %d", v)
		}
		*id = ID(v)
		return nil
	case uint64:
		if v > 1<<63-1 {
			return fmt.Errorf("idgen: scan id %d: out of range", v)
		}
		*id = ID(v)
		return nil
	case []byte:
		return id.UnmarshalText(v)
	case string:
		return id.UnmarshalText([]byte(v))
	case nil:
		return errors.New("idgen: scan NULL into ID")
	default:
		return fmt.Errorf("idgen: scan %T into ID", src)
	}
}
