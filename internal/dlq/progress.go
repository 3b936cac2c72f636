package dlq

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"
)

// Progress is the replay progress file: per selection (DLQ topic, filter,
// target topic), the job id and, per DLQ partition, the next offset not yet
// handled. OpenProgress locks it for one replay; LoadProgress reads a snapshot.
type Progress struct {
	path   string
	unlock func() error
	Jobs   map[string]*Job `json:"jobs"`
}

// Job is the progress of one selection.
type Job struct {
	JobID     string        `json:"job_id"`
	DLQTopic  string        `json:"dlq_topic"`
	Selection string        `json:"selection"`
	Next      map[int]int64 `json:"next"` // DLQ partition -> next offset to handle
	Sent      int64         `json:"sent"`
	Refused   int64         `json:"refused"`
	Started   time.Time     `json:"started"`
	Updated   time.Time     `json:"updated"`
}

// progressVersion is the file format; a newer file is refused, not misread.
const progressVersion = 1

type progressFile struct {
	Version int             `json:"version"`
	Jobs    map[string]*Job `json:"jobs"`
}

// ErrProgressLocked means another replay holds the progress file.
var ErrProgressLocked = errors.New("dlq: progress file is in use by another replay")

// OpenProgress locks path (through path+".lock") and reads it; a missing file
// is an empty progress. Close releases the lock.
func OpenProgress(path string) (*Progress, error) {
	unlock, err := lockFile(path + ".lock")
	if err != nil {
		return nil, err
	}
	p, err := LoadProgress(path)
	if err != nil {
		_ = unlock()
		return nil, err
	}
	p.unlock = unlock
	return p, nil
}

// LoadProgress reads path without locking it, for a dry run.
func LoadProgress(path string) (*Progress, error) {
	p := &Progress{path: path, Jobs: map[string]*Job{}}
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return p, nil
	}
	if err != nil {
		return nil, fmt.Errorf("dlq: read progress: %w", err)
	}
	var f progressFile
	if err := json.Unmarshal(b, &f); err != nil {
		return nil, fmt.Errorf("dlq: progress file %s: %w", path, err)
	}
	if f.Version != progressVersion {
		return nil, fmt.Errorf("dlq: progress file %s has version %d, this tool reads %d", path, f.Version, progressVersion)
	}
	if f.Jobs != nil {
		p.Jobs = f.Jobs
	}
	return p, nil
}

// Path is the file's path.
func (p *Progress) Path() string { return p.path }

// Save writes the file atomically: a temporary file in the same directory,
// synced, then renamed over the old one, so a crash leaves the old or the new
// progress, never a torn one.
func (p *Progress) Save() error {
	b, err := json.MarshalIndent(progressFile{Version: progressVersion, Jobs: p.Jobs}, "", "  ")
	if err != nil {
		return fmt.Errorf("dlq: encode progress: %w", err)
	}
	dir, base := filepath.Split(p.path)
	if dir == "" {
		dir = "."
	}
	tmp, err := os.CreateTemp(dir, "."+base+".tmp-*")
	if err != nil {
		return fmt.Errorf("dlq: save progress: %w", err)
	}
	defer os.Remove(tmp.Name()) // a no-op after the rename
	if _, err := tmp.Write(append(b, '\n')); err != nil {
		_ = tmp.Close()
		return fmt.Errorf("dlq: save progress: %w", err)
	}
	if err := tmp.Sync(); err != nil {
		_ = tmp.Close()
		return fmt.Errorf("dlq: save progress: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("dlq: save progress: %w", err)
	}
	if err := os.Rename(tmp.Name(), p.path); err != nil {
		return fmt.Errorf("dlq: save progress: %w", err)
	}
	syncDir(dir)
	return nil
}

// Close releases the lock taken by OpenProgress.
func (p *Progress) Close() error {
	if p.unlock == nil {
		return nil
	}
	err := p.unlock()
	p.unlock = nil
	return err
}

// syncDir makes the rename durable where the platform allows it; failure
// only weakens durability across a power cut, so it is not an error.
func syncDir(dir string) {
	d, err := os.Open(dir)
	if err != nil {
		return
	}
	_ = d.Sync()
	_ = d.Close()
}
