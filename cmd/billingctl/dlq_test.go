package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/quotaflow/billing/internal/dlq"
	"github.com/quotaflow/billing/internal/event"
	"github.com/quotaflow/billing/internal/testenv"
)

// dlqEnv seeds a DLQ topic with four records and points the environment at it.
func dlqEnv(t *testing.T) (orig, dlqTopic string, tr *kafka.Transport) {
	t.Helper()
	k := testenv.NewKafka(t)
	orig, dlqTopic = k.Topic(t, 2), k.Topic(t, 2)
	t.Setenv("KAFKA_BROKERS", strings.Join(k.Brokers, ","))
	t.Setenv("KAFKA_TOPIC", orig)
	t.Setenv("KAFKA_DLQ_TOPIC", dlqTopic)
	t.Setenv("LOG_LEVEL", "error")

	at := time.Date(2026, 11, 29, 7, 0, 0, 0, time.UTC)
	value := func(id, m string) []byte {
		return event.PaymentSucceeded{EventID: id, PaymentID: "p-" + id, MerchantID: m, Amount: 3, Source: event.SourceOpenAPI, OccurredAt: at}.Encode()
	}
	origs := []struct {
		m       kafka.Message
		class   dlq.Class
		replays string
	}{
		{kafka.Message{Partition: 0, Offset: 1, Key: []byte("m-1"), Value: value("e-1", "m-1")}, dlq.ClassConflict, ""},
		{kafka.Message{Partition: 1, Offset: 2, Key: []byte("m-2"), Value: []byte("{broken")}, dlq.ClassInvalid, ""},
		{kafka.Message{Partition: 0, Offset: 3, Key: []byte("m-1"), Value: value("e-3", "m-1")}, dlq.ClassExhausted, ""},
		{kafka.Message{Partition: 1, Offset: 4, Key: []byte("m-2"), Value: value("e-4", "m-2")}, dlq.ClassExhausted, "3"},
	}
	tr = &kafka.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	w := &kafka.Writer{Addr: kafka.TCP(k.Brokers...), Topic: dlqTopic, Transport: tr, Balancer: &kafka.RoundRobin{},
		RequiredAcks: kafka.RequireAll, BatchTimeout: time.Millisecond}
	defer w.Close()
	for _, o := range origs {
		o.m.Topic = orig
		if o.replays != "" {
			o.m.Headers = []kafka.Header{{Key: dlq.HeaderReplayCount, Value: []byte(o.replays)}}
		}
		msg := dlq.FromFailure(o.m, "billing-worker", o.class, errors.New("failed"), 1, at, at).KafkaMessage()
		if err := w.WriteMessages(context.Background(), msg); err != nil {
			t.Fatal(err)
		}
	}
	return orig, dlqTopic, tr
}

// runCmd runs billingctl in the test's environment; err is set for a non-zero exit.
func runCmd(t *testing.T, args ...string) (string, string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var out, errb bytes.Buffer
	if code := run(ctx, args, &out, &errb, os.Getenv); code != 0 {
		return out.String(), errb.String(), exitError(code)
	}
	return out.String(), errb.String(), nil
}

// exitError is a non-zero exit code as an error.
type exitError int

func (e exitError) Error() string { return fmt.Sprintf("exit %d", int(e)) }

func countMessages(t *testing.T, brokers []string, tr *kafka.Transport, topic string) int64 {
	t.Helper()
	c := &kafka.Client{Addr: kafka.TCP(brokers...), Transport: tr, Timeout: 10 * time.Second}
	resp, err := c.ListOffsets(context.Background(), &kafka.ListOffsetsRequest{Topics: map[string][]kafka.OffsetRequest{topic: {kafka.LastOffsetOf(0), kafka.LastOffsetOf(1)}}})
	if err != nil {
		t.Fatal(err)
	}
	var n int64
	for _, p := range resp.Topics[topic] {
		n += p.LastOffset
	}
	return n
}

func TestDLQList(t *testing.T) {
	orig, _, _ := dlqEnv(t)
	out, errs, err := runCmd(t, "dlq", "ls", "--list", "--output", "json")
	if err != nil {
		t.Fatalf("%v\n%s", err, errs)
	}
	var doc struct {
		Records []entryView `json:"records"`
		Summary dlq.Summary `json:"summary"`
	}
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		t.Fatalf("ls --output json does not parse: %v\n%s", err, out)
	}
	if len(doc.Records) != 4 || doc.Summary.Total != 4 || doc.Summary.ByClass[dlq.ClassExhausted] != 2 ||
		doc.Summary.ByTopic[orig] != 4 || doc.Summary.ByMerchant["m-2"] != 2 {
		t.Errorf("ls json: %d records, summary %+v", len(doc.Records), doc.Summary)
	}

	out, _, err = runCmd(t, "dlq", "ls", "--list")
	if err != nil {
		t.Fatal(err)
	}
	if strings.Count(out, "\n") < 6 || !strings.Contains(out, "PARTITION/OFFSET") || !strings.Contains(out, "4 message(s)") || !strings.Contains(out, "e-3") {
		t.Errorf("ls text:\n%s", out)
	}
}

func TestDLQReplay(t *testing.T) {
	orig, _, tr := dlqEnv(t)
	brokers := strings.Split(os.Getenv("KAFKA_BROKERS"), ",")
	progress := filepath.Join(t.TempDir(), "p.jsonl")

	out, errs, err := runCmd(t, "dlq", "replay", "--dry-run", "--output", "json", "--progress-file", progress, "--job-id", "j-1")
	if err != nil {
		t.Fatalf("%v\n%s", err, errs)
	}
	var doc struct {
		Report  dlq.Report    `json:"report"`
		Planned []plannedView `json:"planned"`
	}
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		t.Fatalf("replay --output json: %v\n%s", err, out)
	}
	if len(doc.Planned) != 3 || doc.Report.Sent != 3 || len(doc.Report.Refused) != 1 || !doc.Report.DryRun {
		t.Errorf("dry run: %+v", doc)
	}
	if n := countMessages(t, brokers, tr, orig); n != 0 {
		t.Fatalf("dry run sent %d message(s)", n)
	}

	out, errs, err = runCmd(t, "dlq", "replay", "--error-class", "exhausted", "--progress-file", progress, "--job-id", "j-1")
	if err != nil {
		t.Fatalf("%v\n%s", err, errs)
	}
	if !strings.Contains(out, "sent 1 message(s) as job j-1") || !strings.Contains(out, "refused") || !strings.Contains(errs, "replay: examined") {
		t.Errorf("replay output:\n%s\nstderr:\n%s", out, errs)
	}
	out, _, err = runCmd(t, "dlq", "replay", "--error-class", "exhausted", "--progress-file", progress)
	if err != nil || !strings.Contains(out, "sent 0 message(s) as job j-1") {
		t.Errorf("second replay: %v\n%s", err, out)
	}
	if n := countMessages(t, brokers, tr, orig); n != 1 {
		t.Errorf("%s holds %d message(s), want 1", orig, n)
	}
}

// Two copies of one record (one message dead-lettered twice): ls lists it
// once with copies=2, and replay sends it once.
func TestDLQCopies(t *testing.T) {
	orig, dlqTopic, tr := dlqEnv(t)
	brokers := strings.Split(os.Getenv("KAFKA_BROKERS"), ",")
	at := time.Date(2026, 11, 29, 7, 5, 0, 0, time.UTC)
	first := kafka.Message{Topic: orig, Partition: 0, Offset: 1, Key: []byte("m-1"), Value: []byte("copy")}
	w := &kafka.Writer{Addr: kafka.TCP(brokers...), Topic: dlqTopic, Transport: tr, Balancer: &kafka.Hash{},
		RequiredAcks: kafka.RequireAll, BatchTimeout: time.Millisecond}
	defer w.Close()
	msg := dlq.FromFailure(first, "billing-worker", dlq.ClassConflict, errors.New("failed again"), 2, at, at).KafkaMessage()
	if err := w.WriteMessages(context.Background(), msg); err != nil {
		t.Fatal(err)
	}

	out, errs, err := runCmd(t, "dlq", "ls", "--list", "--output", "json")
	if err != nil {
		t.Fatalf("%v\n%s", err, errs)
	}
	var doc struct {
		Records []entryView `json:"records"`
		Summary dlq.Summary `json:"summary"`
	}
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		t.Fatal(err)
	}
	copies := map[int]int{}
	for _, r := range doc.Records {
		copies[r.Copies]++
	}
	if len(doc.Records) != 4 || copies[2] != 1 || copies[1] != 3 || doc.Summary.Total != 4 || doc.Summary.Copies != 1 {
		t.Errorf("ls: %d records (by copies %v), summary %+v", len(doc.Records), copies, doc.Summary)
	}

	progress := filepath.Join(t.TempDir(), "p.jsonl")
	out, errs, err = runCmd(t, "dlq", "replay", "--error-class", "conflict", "--progress-file", progress)
	if err != nil || !strings.Contains(out, "sent 1 message(s)") {
		t.Fatalf("replay: %v\n%s\n%s", err, out, errs)
	}
	if n := countMessages(t, brokers, tr, orig); n != 1 {
		t.Errorf("%s holds %d message(s), want the one message once", orig, n)
	}
}

func TestDLQUsage(t *testing.T) {
	dlqEnv(t)
	for _, args := range [][]string{
		{"dlq"},
		{"dlq", "nope"},
		{"dlq", "ls", "--output", "yaml"},
		{"dlq", "replay", "--error-class", "oops", "--dry-run"},
		{"dlq", "replay", "--since", "yesterday", "--dry-run"},
		{"dlq", "replay", "--offset-from", "5", "--offset-to", "4", "--dry-run"},
		{"dlq", "replay", "--rate", "-1", "--dry-run"},
	} {
		if _, _, err := runCmd(t, args...); err != exitError(2) {
			t.Errorf("%v: err %v, want exit 2", args, err)
		}
	}
}

// dlq ls takes replay's filters and selects what a replay with the same
// filters considers: the records ls lists are those a dry run plans or refuses.
func TestDLQListFiltersMatchReplay(t *testing.T) {
	dlqEnv(t)
	for _, filter := range [][]string{
		{"--error-class", "conflict"},
		{"--error-class", "exhausted", "--replay-count", "3"},
		{"--merchant", "m-1", "--partition", "0,1", "--since", "1h", "--until", "2099-01-01T00:00:00Z"},
		{"--replay-count", "0"},
		{"--event-id", "e-4", "--offset-from", "0", "--offset-to", "100"},
	} {
		out, errs, err := runCmd(t, append([]string{"dlq", "ls", "--list", "--output", "json"}, filter...)...)
		if err != nil {
			t.Fatalf("%v: %v\n%s", filter, err, errs)
		}
		var ls struct {
			Records []entryView `json:"records"`
			Summary dlq.Summary `json:"summary"`
		}
		if err := json.Unmarshal([]byte(out), &ls); err != nil {
			t.Fatalf("%v: %v\n%s", filter, err, out)
		}
		out, errs, err = runCmd(t, append([]string{"dlq", "replay", "--dry-run", "--output", "json"}, filter...)...)
		if err != nil {
			t.Fatalf("%v: %v\n%s", filter, err, errs)
		}
		var rp struct {
			Report  dlq.Report    `json:"report"`
			Planned []plannedView `json:"planned"`
		}
		if err := json.Unmarshal([]byte(out), &rp); err != nil {
			t.Fatalf("%v: %v\n%s", filter, err, out)
		}
		var listed, considered []string
		for _, r := range ls.Records {
			listed = append(listed, fmt.Sprintf("%d/%d", r.Partition, r.Offset))
		}
		for _, p := range rp.Planned {
			considered = append(considered, fmt.Sprintf("%d/%d", p.DLQPartition, p.DLQOffset))
		}
		for _, r := range rp.Report.Refused {
			considered = append(considered, fmt.Sprintf("%d/%d", r.Partition, r.Offset))
		}
		slices.Sort(listed)
		slices.Sort(considered)
		if len(listed) == 0 || !slices.Equal(listed, considered) || ls.Summary.Total != len(listed) || ls.Summary.Selection != rp.Report.Selection[strings.Index(rp.Report.Selection, "[")+1:strings.Index(rp.Report.Selection, "]")] {
			t.Errorf("%v: ls lists %v (summary %d, %q), replay considers %v (%q)", filter, listed, ls.Summary.Total, ls.Summary.Selection, considered, rp.Report.Selection)
		}
	}
	if out, _, err := runCmd(t, "dlq", "ls", "--error-class", "conflict"); err != nil || !strings.Contains(out, ": 1 message(s)") {
		t.Errorf("ls text with a filter: %v\n%s", err, out)
	}
}

// Replay progress lives in DLQ_STATE_DIR, never the working directory, and a
// second run resumes from it; a replay that fails says what failed.
func TestDLQReplayStateDirAndFailure(t *testing.T) {
	orig, _, tr := dlqEnv(t)
	brokers := strings.Split(os.Getenv("KAFKA_BROKERS"), ",")
	state := filepath.Join(t.TempDir(), "state")
	t.Setenv("DLQ_STATE_DIR", state)
	wd := t.TempDir()
	t.Chdir(wd)
	out, errs, err := runCmd(t, "dlq", "replay", "--error-class", "exhausted")
	if err != nil || !strings.Contains(out, "sent 1 message(s)") {
		t.Fatalf("replay: %v\n%s\n%s", err, out, errs)
	}
	files, _ := filepath.Glob(filepath.Join(state, "dlq-replay-*.jsonl"))
	if len(files) != 1 {
		t.Fatalf("progress files in DLQ_STATE_DIR: %v", files)
	}
	if left, _ := os.ReadDir(wd); len(left) != 0 {
		t.Fatalf("replay wrote %v to the working directory", left)
	}
	out, _, err = runCmd(t, "dlq", "replay", "--error-class", "exhausted")
	if err != nil || !strings.Contains(out, "sent 0 message(s)") || !strings.Contains(out, "resumed from "+files[0]) {
		t.Fatalf("second replay: %v\n%s", err, out)
	}
	if n := countMessages(t, brokers, tr, orig); n != 1 {
		t.Fatalf("%s holds %d message(s), want 1", orig, n)
	}

	// A progress file that cannot be opened: exit 1, the cause named, no empty job.
	out, errs, err = runCmd(t, "dlq", "replay", "--error-class", "conflict", "--progress-file", filepath.Join(wd, "missing", "p.jsonl"))
	if err != exitError(1) || !strings.Contains(out, "replay failed: dlq: progress file") || !strings.Contains(out, "nothing was sent") ||
		strings.Contains(out, "as job ;") || !strings.Contains(errs, "progress file") {
		t.Fatalf("failed replay: %v\nstdout: %s\nstderr: %s", err, out, errs)
	}
	out, _, err = runCmd(t, "dlq", "replay", "--error-class", "conflict", "--output", "json", "--progress-file", filepath.Join(wd, "missing", "p.jsonl"))
	var doc struct {
		Error string `json:"error"`
	}
	if err != exitError(1) || json.Unmarshal([]byte(out), &doc) != nil || !strings.Contains(doc.Error, "progress file") {
		t.Fatalf("failed replay, json: %v\n%s", err, out)
	}
}
