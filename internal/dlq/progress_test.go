package dlq

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

func TestProgressRoundTrip(t *testing.T) {
	path := filepath.Join(t.TempDir(), "p.jsonl")
	p, err := openProgress(path, "sel", true)
	if err != nil {
		t.Fatal(err)
	}
	if p.job != "" || len(p.sent) != 0 {
		t.Fatalf("a new file holds progress: %+v", p)
	}
	other, err := openProgress(path, "other", false) // a dry run reads without the lock
	if err != nil {
		t.Fatal(err)
	}
	for _, step := range []func() error{
		func() error { return p.start("j1") },
		func() error { return p.record("j1", []string{"t/0/1", "t/0/2"}) },
		func() error { return p.start("j2") }, // a restart forgets what j1 sent
		func() error { return p.record("j2", []string{"t/1/5"}) },
	} {
		if err := step(); err != nil {
			t.Fatal(err)
		}
	}
	p.close()
	if other.job != "" {
		t.Fatalf("another selection's progress: %+v", other)
	}
	q, err := openProgress(path, "sel", false)
	if err != nil {
		t.Fatal(err)
	}
	if q.job != "j2" || len(q.sent) != 1 || !q.sent["t/1/5"] {
		t.Fatalf("loaded job %q sent %v, want j2 with t/1/5", q.job, q.sent)
	}
	if q, err := openProgress(path, "other", false); err != nil || q.job != "" {
		t.Fatalf("another selection: %+v %v", q, err)
	}
}

func TestProgressLockedWhileOpen(t *testing.T) {
	path := filepath.Join(t.TempDir(), "p.jsonl")
	p, err := openProgress(path, "sel", true)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := openProgress(path, "sel", true); !errors.Is(err, ErrProgressLocked) {
		t.Fatalf("second open: %v, want ErrProgressLocked", err)
	}
	p.close()
	q, err := openProgress(path, "sel", true)
	if err != nil {
		t.Fatalf("after close: %v", err)
	}
	q.close()
}

// A line torn by a crash mid-append is ignored, and cut off before the next
// line is written; any other line that is not progress refuses the file.
func TestProgressTornAndBadFiles(t *testing.T) {
	dir := t.TempDir()
	torn := filepath.Join(dir, "torn.jsonl")
	body := `{"selection":"sel","job":"j","start":true}` + "\n" + `{"selection":"sel","job":"j","sent":["t/0/1"]}` + "\n" + `{"selection":"sel","jo`
	if err := os.WriteFile(torn, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	p, err := openProgress(torn, "sel", true)
	if err != nil || p.job != "j" || !p.sent["t/0/1"] {
		t.Fatalf("torn file: %+v %v", p, err)
	}
	if err := p.record("j", []string{"t/0/2"}); err != nil {
		t.Fatal(err)
	}
	p.close()
	if q, err := openProgress(torn, "sel", false); err != nil || len(q.sent) != 2 {
		t.Fatalf("after the torn line: %+v %v", q, err)
	}
	for name, body := range map[string]string{
		"v1.json":   "{\n  \"version\": 1,\n  \"jobs\": {}\n}\n",
		"other.txt": "hello\n",
	} {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := openProgress(path, "sel", false); err == nil {
			t.Errorf("%s loaded", name)
		}
	}
	if _, err := openProgress(filepath.Join(dir, "nope", "p.jsonl"), "sel", true); err == nil {
		t.Error("opened a progress file in a missing directory")
	}
}
