package workload

// Summary tallies a stream: what a consumer that processed it exactly once
// per event_id should have recorded.
type Summary struct {
	Messages   int
	Valid      int
	Duplicates int
	Malformed  int
	// Amount is the sum of the amounts of the Valid messages.
	Amount int64
}

// Add counts m.
func (s *Summary) Add(m Message) {
	s.Messages++
	switch m.Kind {
	case Valid:
		s.Valid++
		s.Amount += m.Event.Amount
	case Duplicate:
		s.Duplicates++
	case Malformed:
		s.Malformed++
	}
}
