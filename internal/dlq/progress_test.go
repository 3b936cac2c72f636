package dlq

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"
)

func TestProgressRoundTrip(t *testing.T) {
	path := filepath.Join(t.TempDir(), "p.json")
	p, err := OpenProgress(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Jobs) != 0 {
		t.Fatalf("missing file should be empty progress: %+v", p.Jobs)
	}
	now := time.Date(2026, 11, 29, 7, 0, 0, 0, time.UTC)
	p.Jobs["sel"] = &Job{JobID: "j", DLQTopic: "d", Selection: "sel", Next: map[int]int64{0: 4, 3: 9}, Sent: 7, Refused: 1, Started: now, Updated: now}
	if err := p.Save(); err != nil {
		t.Fatal(err)
	}
	if err := p.Save(); err != nil { // again, over the existing file
		t.Fatal(err)
	}
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	q, err := LoadProgress(path)
	if err != nil {
		t.Fatal(err)
	}
	j := q.Jobs["sel"]
	if j == nil || j.JobID != "j" || j.Next[0] != 4 || j.Next[3] != 9 || j.Sent != 7 || !j.Started.Equal(now) {
		t.Fatalf("loaded %+v", j)
	}
	entries, _ := os.ReadDir(filepath.Dir(path))
	for _, e := range entries {
		if e.Name() != "p.json" && e.Name() != "p.json.lock" {
			t.Errorf("left behind: %s", e.Name())
		}
	}
}

func TestProgressLockedWhileOpen(t *testing.T) {
	path := filepath.Join(t.TempDir(), "p.json")
	p, err := OpenProgress(path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := OpenProgress(path); !errors.Is(err, ErrProgressLocked) {
		t.Fatalf("second open: %v, want ErrProgressLocked", err)
	}
	if _, err := LoadProgress(path); err != nil { // a dry run reads without the lock
		t.Fatal(err)
	}
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	q, err := OpenProgress(path)
	if err != nil {
		t.Fatalf("after close: %v", err)
	}
	_ = q.Close()
}

func TestProgressRefusesBadFiles(t *testing.T) {
	dir := t.TempDir()
	for name, body := range map[string]string{"torn.json": `{"version":1,"jobs":{`, "future.json": `{"version":2,"jobs":{}}`} {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := LoadProgress(path); err == nil {
			t.Errorf("%s loaded", name)
		}
	}
}

func TestProgressSaveFailsInMissingDir(t *testing.T) {
	p := &Progress{path: filepath.Join(t.TempDir(), "nope", "p.json"), Jobs: map[string]*Job{}}
	if err := p.Save(); err == nil {
		t.Fatal("saved into a missing directory")
	}
}
