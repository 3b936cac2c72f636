package dlq

import (
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"
)

// EntryView is an entry as printed in JSON.
type EntryView struct {
	Partition         int       `json:"partition"`
	Offset            int64     `json:"offset"`
	Time              time.Time `json:"time,omitzero"`
	EventID           string    `json:"event_id"`
	Merchant          string    `json:"merchant"`
	Class             Class     `json:"error_class"`
	Message           string    `json:"error_message"`
	OriginalTopic     string    `json:"original_topic"`
	OriginalPartition int       `json:"original_partition"`
	OriginalOffset    int64     `json:"original_offset"`
	Group             string    `json:"consumer_group,omitempty"`
	Attempts          int       `json:"attempts"`
	FirstFailure      time.Time `json:"first_failure,omitzero"`
	LastFailure       time.Time `json:"last_failure,omitzero"`
	ReplayCount       int       `json:"replay_count"`
	ReplayJob         string    `json:"replay_job,omitempty"`
	Key               *string   `json:"key,omitempty"`
	Value             *string   `json:"value,omitempty"`
	ValueBase64       []byte    `json:"value_base64,omitempty"` // a value that is not UTF-8
	Unreadable        string    `json:"unreadable,omitempty"`   // why the message is not a dead-letter record
}

// View is the entry's JSON form.
func (e Entry) View() EntryView {
	v := EntryView{
		Partition: e.Partition, Offset: e.Offset, Time: e.Time, EventID: e.EventID, Merchant: e.Merchant,
		Class: e.Class, Message: e.Message, OriginalTopic: e.OriginalTopic, OriginalPartition: e.OriginalPartition,
		OriginalOffset: e.OriginalOffset, Group: e.Group, Attempts: e.Attempts, FirstFailure: e.FirstFailure,
		LastFailure: e.LastFailure, ReplayCount: e.ReplayCount, ReplayJob: e.ReplayJob,
	}
	if e.Key != nil {
		k := string(e.Key)
		v.Key = &k
	}
	if utf8.Valid(e.Value) {
		s := string(e.Value)
		v.Value = &s
	} else {
		v.ValueBase64 = e.Value
	}
	if e.Err != nil {
		v.Unreadable = e.Err.Error()
	}
	return v
}

// listTime is the fixed-width time of a list line.
const listTime = "2006-01-02T15:04:05.000Z07:00"

// ListHeader is the header line of the --list table.
const ListHeader = "PARTITION/OFFSET\tTIME\tEVENT_ID\tMERCHANT\tCLASS\tREPLAYS\tMESSAGE\n"

// WriteListLine writes one tab-separated line for the entry.
func WriteListLine(w io.Writer, e Entry) error {
	class, msg := string(e.Class), e.Message
	if e.Err != nil {
		class, msg = "unreadable", e.Err.Error()
	}
	_, err := fmt.Fprintf(w, "%d/%d\t%s\t%s\t%s\t%s\t%d\t%s\n",
		e.Partition, e.Offset, e.Time.UTC().Format(listTime), orDash(e.EventID), oneLine(e.Merchant),
		orDash(class), e.ReplayCount, oneLine(msg))
	return err
}

// WriteText writes the summary for a person; top bounds the merchants shown
// (0: all).
func (s *Summary) WriteText(w io.Writer, top int) error {
	var b strings.Builder
	fmt.Fprintf(&b, "DLQ %s: %d record(s)", s.Topic, s.Total)
	if s.Unreadable > 0 {
		fmt.Fprintf(&b, ", %d unreadable (no dead-letter headers)", s.Unreadable)
	}
	if s.Replayed > 0 {
		fmt.Fprintf(&b, ", %d already replayed at least once", s.Replayed)
	}
	b.WriteString("\n")
	if !s.Oldest.IsZero() {
		fmt.Fprintf(&b, "oldest %s  newest %s\n", s.Oldest.UTC().Format(time.RFC3339), s.Newest.UTC().Format(time.RFC3339))
	}
	b.WriteString("partitions:")
	for _, r := range s.Partitions {
		fmt.Fprintf(&b, " %d:[%d,%d)", r.Partition, r.From, r.To)
	}
	b.WriteString("\n")
	classes := map[string]int{}
	for c, n := range s.ByClass {
		classes[string(c)] = n
	}
	writeCounts(&b, "by error class", classes, 0)
	writeCounts(&b, "by original topic", s.ByTopic, 0)
	writeCounts(&b, "by merchant", s.ByMerchant, top)
	_, err := io.WriteString(w, b.String())
	return err
}

func writeCounts(b *strings.Builder, title string, m map[string]int, top int) {
	if len(m) == 0 {
		return
	}
	type kv struct {
		k string
		n int
	}
	rows := make([]kv, 0, len(m))
	for k, n := range m {
		rows = append(rows, kv{k, n})
	}
	slices.SortFunc(rows, func(a, b kv) int { return cmp.Or(cmp.Compare(b.n, a.n), cmp.Compare(a.k, b.k)) })
	fmt.Fprintf(b, "%s:\n", title)
	for i, r := range rows {
		if top > 0 && i == top {
			fmt.Fprintf(b, "  ... %d more\n", len(rows)-top)
			break
		}
		fmt.Fprintf(b, "  %8d  %s\n", r.n, orDash(oneLine(r.k)))
	}
}

// JSONList streams `{"records":[...],"summary":{...}}` (records only with
// --list) so a large topic is never held in memory.
type JSONList struct {
	w    io.Writer
	list bool
	n    int
	err  error
}

// NewJSONList starts the document; list says whether records are written.
func NewJSONList(w io.Writer, list bool) *JSONList {
	j := &JSONList{w: w, list: list}
	if list {
		j.write([]byte(`{"records":[`))
	} else {
		j.write([]byte(`{`))
	}
	return j
}

// Add writes one record (nothing without list).
func (j *JSONList) Add(e Entry) error {
	if !j.list {
		return j.err
	}
	b, err := json.Marshal(e.View())
	if err != nil {
		return fmt.Errorf("dlq: encode record: %w", err)
	}
	if j.n > 0 {
		j.write([]byte(",\n"))
	} else {
		j.write([]byte("\n"))
	}
	j.n++
	j.write(b)
	return j.err
}

// Close writes the summary and ends the document.
func (j *JSONList) Close(s *Summary) error {
	b, err := json.Marshal(s)
	if err != nil {
		return fmt.Errorf("dlq: encode summary: %w", err)
	}
	if j.list {
		j.write([]byte("\n],"))
	}
	j.write([]byte(`"summary":`))
	j.write(b)
	j.write([]byte("}\n"))
	return j.err
}

func (j *JSONList) write(b []byte) {
	if j.err == nil {
		_, j.err = j.w.Write(b)
	}
}

// PlannedView is a message a replay sends, or would send, as printed in JSON.
type PlannedView struct {
	DLQPartition int          `json:"dlq_partition"`
	DLQOffset    int64        `json:"dlq_offset"`
	Topic        string       `json:"topic"`
	Partition    *int         `json:"partition,omitempty"` // nil: chosen by key hash
	Key          string       `json:"key"`
	Value        string       `json:"value"`
	Headers      []HeaderView `json:"headers"`
}

// HeaderView is one Kafka header.
type HeaderView struct {
	Key   string `json:"key"`
	Value string `json:"value"`
}

// View is the step's planned message in JSON form.
func (s Step) View() PlannedView {
	v := PlannedView{
		DLQPartition: s.Entry.Partition, DLQOffset: s.Entry.Offset, Topic: s.Message.Topic,
		Key: string(s.Message.Key), Value: string(s.Message.Value), Headers: []HeaderView{},
	}
	if s.Message.Partition >= 0 {
		p := s.Message.Partition
		v.Partition = &p
	}
	for _, h := range s.Message.Headers {
		v.Headers = append(v.Headers, HeaderView{h.Key, string(h.Value)})
	}
	return v
}

// WritePlanned writes the message a step sends, exactly: target topic and
// partition, key, headers and value (quoted when not printable text).
func WritePlanned(w io.Writer, s Step) error {
	m := s.Message
	part := "by key"
	if m.Partition >= 0 {
		part = strconv.Itoa(m.Partition)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%d/%d -> %s partition %s key=%s", s.Entry.Partition, s.Entry.Offset, m.Topic, part, printable(m.Key))
	for _, h := range m.Headers {
		fmt.Fprintf(&b, " %s=%s", printable([]byte(h.Key)), printable(h.Value))
	}
	fmt.Fprintf(&b, " value=%s\n", printable(m.Value))
	_, err := io.WriteString(w, b.String())
	return err
}

// printable is b itself when it is UTF-8 text without spaces or control
// characters, else Go-quoted, so every byte sent can be read back exactly.
func printable(b []byte) string {
	s := string(b)
	if s == "" || !utf8.ValidString(s) || strings.ContainsFunc(s, func(r rune) bool { return unicode.IsSpace(r) || !unicode.IsPrint(r) }) {
		return strconv.Quote(s)
	}
	return s
}

func oneLine(s string) string {
	return strings.Map(func(r rune) rune {
		if r == '\t' || r == '\n' || r == '\r' || !unicode.IsPrint(r) {
			return ' '
		}
		return r
	}, s)
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
