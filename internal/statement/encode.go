package statement

import (
	"bufio"
	"crypto/sha256"
	"encoding/csv"
	"encoding/hex"
	"fmt"
	"hash"
	"io"
	"maps"
	"slices"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/quotaflow/billing/internal/ledger"
)

// The output formats.
const (
	FormatCSV   = "csv"
	FormatJSONL = "jsonl"
)

// Trailer is the last record of an export: what it holds, and the SHA-256
// (hex) of every byte before the trailer.
type Trailer struct {
	Merchants int64                            `json:"merchants"`
	Rows      int64                            `json:"rows"`
	ByKind    map[ledger.Kind]ledger.KindTotal `json:"by_kind"`
	Records   int64                            `json:"records"` // lines before the trailer (the CSV header included)
	SHA256    string                           `json:"sha256"`
}

// encoder writes the records of an export in one format.
type encoder interface {
	start(p ledger.Period, asOf time.Time) error
	opening(merchant string, balance int64) error
	row(r *ledger.Row) error
	totals(merchant string, rows int64, byKind map[ledger.Kind]ledger.KindTotal) error
	closing(merchant string, balance int64) error
	// trailer completes t with the hash and writes it.
	trailer(t Trailer) (Trailer, error)
	// flush writes out what is buffered.
	flush() error
}

// hashed is the sink both encoders write to: buffered, counted in lines,
// and hashed until the trailer.
type hashed struct {
	*bufio.Writer
	sum   hash.Hash
	lines int64
}

func newHashed(w io.Writer) *hashed {
	sum := sha256.New()
	return &hashed{Writer: bufio.NewWriterSize(io.MultiWriter(w, sum), 256<<10), sum: sum}
}

// digest flushes what was written so far into the hash and returns it.
func (h *hashed) digest() (string, error) {
	if err := h.Flush(); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.sum.Sum(nil)), nil
}

func newEncoder(format string, w io.Writer) (encoder, error) {
	switch format {
	case FormatJSONL:
		return &jsonl{h: newHashed(w)}, nil
	case FormatCSV:
		h := newHashed(w)
		return &csvEncoder{h: h, w: csv.NewWriter(h)}, nil
	}
	return nil, fmt.Errorf("statement: format %q is not csv or jsonl", format)
}

func timeText(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }

func sortedKinds(m map[ledger.Kind]ledger.KindTotal) []ledger.Kind {
	return slices.Sorted(maps.Keys(m))
}

// jsonl writes one JSON object a line, by hand: encoding/json's reflection
// would be most of an export's CPU. Ids are strings (as everywhere in
// billing's JSON).
type jsonl struct {
	h   *hashed
	buf []byte
}

func (e *jsonl) line(b []byte) error {
	e.h.lines++
	_, err := e.h.Write(append(b, '}', '\n'))
	e.buf = b[:0]
	return err
}

func (e *jsonl) start(p ledger.Period, asOf time.Time) error {
	b := append(e.buf[:0], `{"record":"export","version":1,"from":`...)
	b = appendString(b, timeText(p.From))
	b = appendString(append(b, `,"to":`...), timeText(p.To))
	b = appendString(append(b, `,"as_of":`...), timeText(asOf))
	return e.line(b)
}

func (e *jsonl) balance(record, merchant string, balance int64) error {
	b := append(append(append(e.buf[:0], `{"record":"`...), record...), `","merchant_id":`...)
	b = appendString(b, merchant)
	b = strconv.AppendInt(append(b, `,"balance":`...), balance, 10)
	return e.line(b)
}

func (e *jsonl) opening(merchant string, balance int64) error {
	return e.balance("opening", merchant, balance)
}

func (e *jsonl) closing(merchant string, balance int64) error {
	return e.balance("closing", merchant, balance)
}

func (e *jsonl) row(r *ledger.Row) error {
	b := append(e.buf[:0], `{"record":"row","merchant_id":`...)
	b = appendString(b, r.MerchantID)
	b = strconv.AppendInt(append(b, `,"seq":`...), *r.Seq, 10)
	b = strconv.AppendInt(append(b, `,"id":"`...), r.ID, 10)
	b = appendString(append(b, `","event_id":`...), r.EventID)
	b = appendString(append(b, `,"kind":`...), string(r.Kind))
	b = strconv.AppendInt(append(b, `,"amount":`...), r.Amount, 10)
	b = strconv.AppendInt(append(b, `,"balance_after":`...), *r.BalanceAfter, 10)
	b = appendString(append(b, `,"reason":`...), r.Reason)
	b = appendString(append(b, `,"payment_id":`...), r.PaymentID)
	b = appendString(append(b, `,"source":`...), r.Source)
	b = append(b, `,"grant_id":`...)
	if r.GrantID == nil {
		b = append(b, "null"...)
	} else {
		b = appendString(b, *r.GrantID)
	}
	b = strconv.AppendInt(append(b, `,"overage":`...), r.Overage, 10)
	b = appendTime(append(b, `,"occurred_at":`...), r.OccurredAt)
	b = appendTime(append(b, `,"created_at":`...), r.CreatedAt)
	return e.line(b)
}

func appendByKind(b []byte, byKind map[ledger.Kind]ledger.KindTotal) []byte {
	b = append(b, `"by_kind":{`...)
	for i, k := range sortedKinds(byKind) {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendString(b, string(k))
		b = strconv.AppendInt(append(b, `:{"count":`...), byKind[k].Count, 10)
		b = strconv.AppendInt(append(b, `,"amount":`...), byKind[k].Amount, 10)
		b = append(b, '}')
	}
	return append(b, '}')
}

func (e *jsonl) totals(merchant string, rows int64, byKind map[ledger.Kind]ledger.KindTotal) error {
	b := appendString(append(e.buf[:0], `{"record":"totals","merchant_id":`...), merchant)
	b = strconv.AppendInt(append(b, `,"rows":`...), rows, 10)
	return e.line(appendByKind(append(b, ','), byKind))
}

func (e *jsonl) trailer(t Trailer) (Trailer, error) {
	var err error
	t.Records = e.h.lines
	if t.SHA256, err = e.h.digest(); err != nil {
		return t, err
	}
	b := strconv.AppendInt(append(e.buf[:0], `{"record":"trailer","merchants":`...), t.Merchants, 10)
	b = strconv.AppendInt(append(b, `,"rows":`...), t.Rows, 10)
	b = appendByKind(append(b, ','), t.ByKind)
	b = strconv.AppendInt(append(b, `,"records":`...), t.Records, 10)
	b = appendString(append(b, `,"sha256":`...), t.SHA256)
	return t, e.line(b)
}

func (e *jsonl) flush() error { return e.h.Flush() }

// appendTime appends t as a JSON string, as timeText writes it.
func appendTime(b []byte, t time.Time) []byte {
	return append(t.UTC().AppendFormat(append(b, '"'), time.RFC3339Nano), '"')
}

// appendString appends s as a JSON string. The ledger holds valid UTF-8
// (Row.Check); an invalid byte would still come out as U+FFFD.
func appendString(b []byte, s string) []byte {
	const hexDigits = "0123456789abcdef"
	b = append(b, '"')
	for i := 0; i < len(s); {
		c := s[i]
		switch {
		case c == '"' || c == '\\':
			b = append(b, '\\', c)
		case c < 0x20:
			b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
		case c < utf8.RuneSelf:
			b = append(b, c)
		default:
			r, n := utf8.DecodeRuneInString(s[i:])
			b = utf8.AppendRune(b, r)
			i += n
			continue
		}
		i++
	}
	return append(b, '"')
}

// csvColumns: one header, every record kind on its own line with the
// columns it uses (the others empty).
var csvColumns = []string{"record", "merchant_id", "seq", "id", "event_id", "kind", "count", "amount", "balance",
	"reason", "payment_id", "source", "grant_id", "overage", "occurred_at", "created_at", "from", "to", "as_of", "merchants", "sha256"}

// Column positions of csvColumns.
const (
	cRecord = iota
	cMerchant
	cSeq
	cID
	cEvent
	cKind
	cCount
	cAmount
	cBalance
	cReason
	cPayment
	cSource
	cGrant
	cOverage
	cOccurred
	cCreated
	cFrom
	cTo
	cAsOf
	cMerchants
	cSHA256
	nColumns
)

type csvEncoder struct {
	h   *hashed
	w   *csv.Writer
	rec [nColumns]string
}

func (e *csvEncoder) write(set func(rec *[nColumns]string)) error {
	e.rec = [nColumns]string{}
	set(&e.rec)
	e.h.lines++
	return e.w.Write(e.rec[:])
}

func (e *csvEncoder) start(p ledger.Period, asOf time.Time) error {
	e.h.lines++
	if err := e.w.Write(csvColumns); err != nil {
		return err
	}
	return e.write(func(r *[nColumns]string) {
		r[cRecord], r[cFrom], r[cTo], r[cAsOf] = "export", timeText(p.From), timeText(p.To), timeText(asOf)
	})
}

func (e *csvEncoder) opening(merchant string, balance int64) error {
	return e.write(func(r *[nColumns]string) {
		r[cRecord], r[cMerchant], r[cBalance] = "opening", merchant, strconv.FormatInt(balance, 10)
	})
}

func (e *csvEncoder) closing(merchant string, balance int64) error {
	return e.write(func(r *[nColumns]string) {
		r[cRecord], r[cMerchant], r[cBalance] = "closing", merchant, strconv.FormatInt(balance, 10)
	})
}

func (e *csvEncoder) row(row *ledger.Row) error {
	return e.write(func(r *[nColumns]string) {
		r[cRecord], r[cMerchant], r[cSeq], r[cID] = "row", row.MerchantID, strconv.FormatInt(*row.Seq, 10), strconv.FormatInt(row.ID, 10)
		r[cEvent], r[cKind], r[cAmount] = row.EventID, string(row.Kind), strconv.FormatInt(row.Amount, 10)
		r[cBalance], r[cReason], r[cPayment], r[cSource] = strconv.FormatInt(*row.BalanceAfter, 10), row.Reason, row.PaymentID, row.Source
		if row.GrantID != nil {
			r[cGrant] = *row.GrantID
		}
		r[cOverage], r[cOccurred], r[cCreated] = strconv.FormatInt(row.Overage, 10), timeText(row.OccurredAt), timeText(row.CreatedAt)
	})
}

// totals writes a line per kind, in kind order; merchant "" is the whole
// export's.
func (e *csvEncoder) totals(merchant string, rows int64, byKind map[ledger.Kind]ledger.KindTotal) error {
	for _, k := range sortedKinds(byKind) {
		err := e.write(func(r *[nColumns]string) {
			r[cRecord], r[cMerchant], r[cKind] = "total", merchant, string(k)
			r[cCount], r[cAmount] = strconv.FormatInt(byKind[k].Count, 10), strconv.FormatInt(byKind[k].Amount, 10)
		})
		if err != nil {
			return err
		}
	}
	return e.write(func(r *[nColumns]string) {
		r[cRecord], r[cMerchant], r[cCount] = "total", merchant, strconv.FormatInt(rows, 10)
	})
}

func (e *csvEncoder) trailer(t Trailer) (Trailer, error) {
	var err error
	if err := e.totals("", t.Rows, t.ByKind); err != nil {
		return t, err
	}
	e.w.Flush()
	if err := e.w.Error(); err != nil {
		return t, err
	}
	t.Records = e.h.lines
	if t.SHA256, err = e.h.digest(); err != nil {
		return t, err
	}
	return t, e.write(func(r *[nColumns]string) {
		r[cRecord], r[cCount], r[cMerchants], r[cSHA256] = "trailer", strconv.FormatInt(t.Rows, 10), strconv.FormatInt(t.Merchants, 10), t.SHA256
	})
}

func (e *csvEncoder) flush() error {
	e.w.Flush()
	if err := e.w.Error(); err != nil {
		return err
	}
	return e.h.Flush()
}
