package consumer

import (
	"errors"
	"testing"
)

func TestWindow(t *testing.T) {
	type step struct {
		admit  int64 // admitted when done < 0
		done   int64 // marked done when >= 0
		full   bool  // admit expected to find the window full
		bad    bool  // admit expected to fail with errOffsetOrder
		freed  int   // entries released by markDone
		pos    int64 // position after the step; -1 unknown
		length int
	}
	a := func(off int64, pos int64, n int) step { return step{admit: off, done: -1, pos: pos, length: n} }
	d := func(off int64, freed int, pos int64, n int) step {
		return step{done: off, freed: freed, pos: pos, length: n}
	}
	tests := []struct {
		name  string
		cap   int
		start int64
		steps []step
	}{
		{"unknown start is fixed by the first offset", 4, -2, []step{d(0, 0, -1, 0), a(42, 42, 1), d(42, 1, 43, 0)}},
		{"in order", 4, 10, []step{a(10, 10, 1), a(11, 10, 2), d(10, 1, 11, 1), d(11, 1, 12, 0)}},
		{"out of order completion never passes an unfinished offset", 4, 0, []step{
			a(0, 0, 1), a(1, 0, 2), a(2, 0, 3),
			d(2, 0, 0, 3), d(1, 0, 0, 3), d(0, 3, 3, 0),
		}},
		{"gaps in offsets", 4, 5, []step{
			a(7, 7, 1), a(9, 7, 2), a(12, 7, 3),
			d(9, 0, 7, 3), d(7, 2, 12, 1), d(12, 1, 13, 0),
		}},
		{"full window refuses, release makes room", 2, 0, []step{
			a(0, 0, 1), a(1, 0, 2), {admit: 2, done: -1, full: true, pos: 0, length: 2},
			d(1, 0, 0, 2), {admit: 2, done: -1, full: true, pos: 0, length: 2},
			d(0, 2, 2, 0), a(2, 2, 1), a(3, 2, 2),
		}},
		{"ring wraps around", 3, 0, []step{
			a(0, 0, 1), a(1, 0, 2), a(2, 0, 3), d(0, 1, 1, 2), a(3, 1, 3), d(1, 1, 2, 2), a(4, 2, 3),
			d(4, 0, 2, 3), d(3, 0, 2, 3), d(2, 3, 5, 0),
		}},
		{"unknown and repeated done are ignored", 4, 0, []step{
			a(0, 0, 1), d(5, 0, 0, 1), d(0, 1, 1, 0), d(0, 0, 1, 0),
		}},
		{"offsets must increase", 4, 0, []step{
			a(3, 3, 1), {admit: 3, done: -1, bad: true, pos: 3, length: 1},
			{admit: 2, done: -1, bad: true, pos: 3, length: 1},
		}},
		{"nothing below the committed start", 4, 10, []step{
			{admit: 9, done: -1, bad: true, pos: 10, length: 0}, a(10, 10, 1),
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := newWindow(tt.cap, tt.start)
			for i, s := range tt.steps {
				if s.done >= 0 {
					if got := w.markDone(s.done); got != s.freed {
						t.Fatalf("step %d: markDone(%d) freed %d, want %d", i, s.done, got, s.freed)
					}
				} else {
					ok, err := w.admit(s.admit)
					switch {
					case s.bad:
						if !errors.Is(err, errOffsetOrder) {
							t.Fatalf("step %d: admit(%d) = %v, %v; want errOffsetOrder", i, s.admit, ok, err)
						}
					case err != nil || ok == s.full:
						t.Fatalf("step %d: admit(%d) = %v, %v; want ok=%v", i, s.admit, ok, err, !s.full)
					}
				}
				pos, known := w.position()
				if !known {
					pos = -1
				}
				if pos != s.pos || w.len() != s.length {
					t.Fatalf("step %d: position %d len %d, want %d len %d", i, pos, w.len(), s.pos, s.length)
				}
			}
		})
	}
}

// The position never passes an unfinished offset, whatever the completion order.
func TestWindowNeverPassesUnfinished(t *testing.T) {
	const n = 64
	w := newWindow(n, 0)
	for off := int64(0); off < n; off++ {
		if ok, err := w.admit(off); !ok || err != nil {
			t.Fatal(ok, err)
		}
	}
	done := make([]bool, n)
	// A fixed scrambled order: 37 is coprime with 64.
	for i := 0; i < n; i++ {
		off := int64(i * 37 % n)
		w.markDone(off)
		done[off] = true
		pos, _ := w.position()
		for o := int64(0); o < pos; o++ {
			if !done[o] {
				t.Fatalf("after done(%d): position %d passes unfinished %d", off, pos, o)
			}
		}
		if pos < n && done[pos] {
			t.Fatalf("after done(%d): position %d stops at a done offset", off, pos)
		}
	}
}
