package dlq

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
)

// progress is a selection's part of the replay progress file: JSON lines,
// fsynced and only appended, one when a job starts ({"selection","job",
// "start"}) and one per acknowledged batch ({"selection","job","sent":[ids]}).
// A selection's job is its last start's; what it sent, the union of its sent
// lines. A line torn by a crash is cut when the file is next opened to write;
// a replay locks the file while it writes. Delete it, or Restart, to begin again.
type progress struct {
	f         *os.File // nil in a dry run: nothing is written
	selection string
	job       string          // the selection's stored job, "" if none
	sent      map[string]bool // what job sent
}

type progressLine struct {
	Selection string   `json:"selection"`
	Job       string   `json:"job"`
	Start     bool     `json:"start,omitempty"`
	Sent      []string `json:"sent,omitempty"`
}

// ErrProgressLocked means another replay holds the progress file.
var ErrProgressLocked = errors.New("dlq: progress file is in use by another replay")

// openProgress reads selection's progress from path; with write it also
// locks the file (creating it) for appending. Without write a missing file
// is no progress.
func openProgress(path, selection string, write bool) (*progress, error) {
	p := &progress{selection: selection, sent: map[string]bool{}}
	var b []byte
	var err error
	if write {
		if p.f, err = lockFile(path); err != nil {
			return nil, fmt.Errorf("dlq: progress file: %w", err)
		}
		b, err = io.ReadAll(p.f)
	} else if b, err = os.ReadFile(path); errors.Is(err, fs.ErrNotExist) {
		return p, nil
	}
	b = b[:bytes.LastIndexByte(b, '\n')+1] // a line torn by a crash mid-append goes
	if err == nil {
		err = p.load(b)
	}
	if err == nil && write {
		err = p.f.Truncate(int64(len(b)))
	}
	if err != nil {
		p.close()
		return nil, fmt.Errorf("dlq: progress file %s: %w", path, err)
	}
	return p, nil
}

func (p *progress) load(b []byte) error {
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(nil, len(b)+1)
	for n := 1; sc.Scan(); n++ {
		var l progressLine
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil || l.Job == "" {
			return fmt.Errorf("line %d is not replay progress (an older format? delete the file to start over)", n)
		}
		switch {
		case l.Selection != p.selection:
		case l.Start:
			p.job, p.sent = l.Job, map[string]bool{}
		case l.Job == p.job:
			for _, id := range l.Sent {
				p.sent[id] = true
			}
		}
	}
	return sc.Err()
}

// start begins a new job for the selection.
func (p *progress) start(job string) error {
	p.job, p.sent = job, map[string]bool{}
	return p.append(progressLine{Selection: p.selection, Job: job, Start: true})
}

// record adds what an acknowledged batch sent.
func (p *progress) record(job string, sent []string) error {
	for _, id := range sent {
		p.sent[id] = true
	}
	return p.append(progressLine{Selection: p.selection, Job: job, Sent: sent})
}

func (p *progress) append(l progressLine) error {
	if p.f == nil {
		return nil
	}
	b, err := json.Marshal(l)
	if err == nil {
		_, err = p.f.Write(append(b, '\n'))
	}
	if err == nil {
		err = p.f.Sync()
	}
	if err != nil {
		return fmt.Errorf("dlq: record progress: %w", err)
	}
	return nil
}

// close releases the file and its lock.
func (p *progress) close() {
	if p.f != nil {
		_ = p.f.Close()
		p.f = nil
	}
}
