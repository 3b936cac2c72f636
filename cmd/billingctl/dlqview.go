package main

import (
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/schollz/progressbar/v3"

	"github.com/quotaflow/billing/internal/dlq"
)

// entryView is a DLQ message as `dlq ls --output json` prints it.
type entryView struct {
	dlq.Entry
	Key         *string `json:"key,omitempty"`
	Value       *string `json:"value,omitempty"`
	ValueBase64 []byte  `json:"value_base64,omitempty"` // a value that is not UTF-8
	Unreadable  string  `json:"unreadable,omitempty"`   // why the message is not a dead-letter record
}

func viewEntry(e dlq.Entry) entryView {
	v := entryView{Entry: e}
	if e.Key != nil {
		v.Key = new(string(e.Key))
	}
	if utf8.Valid(e.Value) {
		v.Value = new(string(e.Value))
	} else {
		v.ValueBase64 = e.Value
	}
	if e.Err != nil {
		v.Unreadable = e.Err.Error()
	}
	return v
}

const listHeader = "PARTITION/OFFSET\tTIME\tCOPIES\tEVENT_ID\tMERCHANT\tCLASS\tREPLAYS\tMESSAGE\n"

// writeListLine writes one tab-separated `dlq ls --list` line.
func writeListLine(w io.Writer, e dlq.Entry) error {
	class, msg := string(e.Class), e.Message
	if e.Err != nil {
		class, msg = "unreadable", e.Err.Error()
	}
	_, err := fmt.Fprintf(w, "%d/%d\t%s\t%d\t%s\t%s\t%s\t%d\t%s\n",
		e.Partition, e.Offset, e.Time.UTC().Format("2006-01-02T15:04:05.000Z07:00"), e.Copies, orDash(e.EventID),
		oneLine(e.Merchant), orDash(class), e.ReplayCount, oneLine(msg))
	return err
}

// writeSummary writes the summary for a person, top merchants (0: all).
func writeSummary(w io.Writer, s *dlq.Summary, top int) error {
	var b strings.Builder
	fmt.Fprintf(&b, "DLQ %s: %d message(s)", s.Topic, s.Total)
	if s.Copies > 0 {
		fmt.Fprintf(&b, " (%d more record(s) are copies)", s.Copies)
	}
	if s.Unreadable > 0 {
		fmt.Fprintf(&b, ", %d unreadable (no dead-letter headers)", s.Unreadable)
	}
	if s.Replayed > 0 {
		fmt.Fprintf(&b, ", %d already replayed at least once", s.Replayed)
	}
	if s.Resolved > 0 {
		fmt.Fprintf(&b, "; %d more resolved (not listed)", s.Resolved)
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
	writeCounts(&b, "by error class", s.ByClass, 0)
	writeCounts(&b, "by original topic", s.ByTopic, 0)
	writeCounts(&b, "by merchant", s.ByMerchant, top)
	_, err := io.WriteString(w, b.String())
	return err
}

func writeCounts[K ~string](b *strings.Builder, title string, m map[K]int, top int) {
	if len(m) == 0 {
		return
	}
	keys := slices.Collect(maps.Keys(m))
	slices.SortFunc(keys, func(a, b K) int { return cmp.Or(cmp.Compare(m[b], m[a]), cmp.Compare(a, b)) })
	fmt.Fprintf(b, "%s:\n", title)
	for i, k := range keys {
		if top > 0 && i == top {
			fmt.Fprintf(b, "  ... %d more\n", len(keys)-top)
			break
		}
		fmt.Fprintf(b, "  %8d  %s\n", m[k], orDash(oneLine(string(k))))
	}
}

// jsonList streams `{"records":[...],"summary":{...}}` (records only with
// --list) so a large topic is never held in memory.
type jsonList struct {
	w    io.Writer
	list bool
	sep  string // before the next record
	err  error
}

func newJSONList(w io.Writer, list bool) *jsonList {
	j := &jsonList{w: w, list: list, sep: "\n"}
	j.write(`{`)
	if list {
		j.write(`"records":[`)
	}
	return j
}

// add writes one record (nothing without list).
func (j *jsonList) add(e dlq.Entry) error {
	if !j.list {
		return j.err
	}
	b, err := json.Marshal(viewEntry(e))
	if err != nil {
		return fmt.Errorf("encode record: %w", err)
	}
	j.write(j.sep + string(b))
	j.sep = ",\n"
	return j.err
}

// close writes the summary and ends the document.
func (j *jsonList) close(s *dlq.Summary) error {
	b, err := json.Marshal(s)
	if err != nil {
		return fmt.Errorf("encode summary: %w", err)
	}
	if j.list {
		j.write("\n],")
	}
	j.write(`"summary":` + string(b) + "}\n")
	return j.err
}

func (j *jsonList) write(s string) {
	if j.err == nil {
		_, j.err = io.WriteString(j.w, s)
	}
}

// plannedView is a message a dry run would send, as printed in JSON.
type plannedView struct {
	DLQPartition int          `json:"dlq_partition"`
	DLQOffset    int64        `json:"dlq_offset"`
	Topic        string       `json:"topic"`
	Partition    *int         `json:"partition,omitempty"` // nil: chosen by key hash
	Key          string       `json:"key"`
	Value        string       `json:"value"`
	Headers      []headerView `json:"headers"`
}

type headerView struct {
	Key   string `json:"key"`
	Value string `json:"value"`
}

func viewPlanned(s dlq.Step) plannedView {
	v := plannedView{DLQPartition: s.Entry.Partition, DLQOffset: s.Entry.Offset, Topic: s.Message.Topic,
		Key: string(s.Message.Key), Value: string(s.Message.Value), Headers: []headerView{}}
	if p := s.Message.Partition; p >= 0 {
		v.Partition = &p
	}
	for _, h := range s.Message.Headers {
		v.Headers = append(v.Headers, headerView{h.Key, string(h.Value)})
	}
	return v
}

// writePlanned writes the message a step sends, exactly: target topic and
// partition, key, headers and value (quoted when not printable text).
func writePlanned(w io.Writer, s dlq.Step) error {
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

// planPrinter is the Observer of a dry run: it prints every message the run
// would send, as text lines, or with json collected for one document.
type planPrinter struct {
	w       io.Writer
	json    bool
	planned []plannedView
	err     error // the first write error
}

func (p *planPrinter) Begin(int64) {}
func (p *planPrinter) Acked(int)   {}
func (p *planPrinter) Step(s dlq.Step) {
	switch {
	case s.Action != dlq.ActionSend:
	case p.json:
		p.planned = append(p.planned, viewPlanned(s))
	case p.err == nil:
		p.err = writePlanned(p.w, s)
	}
}

// progressObserver is the Observer of a replay that sends: a bar on a
// terminal, elsewhere (logs, CI) a plain line at most every interval.
type progressObserver struct {
	w        io.Writer
	terminal bool
	interval time.Duration

	begun           bool // a replay that fails before it reads says nothing here
	bar             *progressbar.ProgressBar
	total, examined int64
	sent, refused   int
	lastLine        time.Time
}

func (p *progressObserver) Begin(total int64) {
	p.total, p.begun = total, true
	if p.terminal {
		p.bar = progressbar.NewOptions64(total, progressbar.OptionSetWriter(p.w), progressbar.OptionSetDescription("replay"),
			progressbar.OptionShowCount(), progressbar.OptionSetPredictTime(true),
			progressbar.OptionThrottle(100*time.Millisecond), progressbar.OptionSetRenderBlankState(true))
		return
	}
	fmt.Fprintf(p.w, "replay: %d DLQ offset(s) to examine\n", total)
	p.lastLine = time.Now()
}

func (p *progressObserver) Step(s dlq.Step) {
	p.examined++
	if s.Action == dlq.ActionRefuse || s.Action == dlq.ActionUnreadable {
		p.refused++
	}
	if p.bar != nil {
		_ = p.bar.Add(1)
	}
}

func (p *progressObserver) Acked(sent int) {
	p.sent = sent
	if p.bar != nil {
		p.bar.Describe(fmt.Sprintf("replay: sent %d, refused %d", p.sent, p.refused))
		return
	}
	if time.Since(p.lastLine) >= p.interval {
		p.line()
	}
}

// finish ends the bar or writes the last line.
func (p *progressObserver) finish() {
	if !p.begun {
		return
	}
	if p.bar != nil {
		_ = p.bar.Exit()
		fmt.Fprintln(p.w)
		return
	}
	p.line()
}

func (p *progressObserver) line() {
	fmt.Fprintf(p.w, "replay: examined %d/%d, sent %d, refused %d\n", p.examined, p.total, p.sent, p.refused)
	p.lastLine = time.Now()
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

func orDash(s string) string { return cmp.Or(s, "-") }
