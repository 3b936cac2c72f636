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
	// Merchants holds the Valid events and their amounts per merchant.
	Merchants map[string]MerchantTotal
}

// MerchantTotal is one merchant's share of the valid events.
type MerchantTotal struct {
	Events int
	Amount int64
}

// Add counts m.
func (s *Summary) Add(m Message) {
	s.Messages++
	switch m.Kind {
	case Valid:
		s.Valid++
		s.Amount += m.Event.Amount
		if s.Merchants == nil {
			s.Merchants = make(map[string]MerchantTotal)
		}
		t := s.Merchants[m.Event.MerchantID]
		t.Events++
		t.Amount += m.Event.Amount
		s.Merchants[m.Event.MerchantID] = t
	case Duplicate:
		s.Duplicates++
	case Malformed:
		s.Malformed++
	}
}
