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
	// Refunds counts the refunds (once per refund id; RefundDuplicates
	// the ones sent again), Refunded what they take back and Beyond what
	// is beyond their payments' debits, in Conflicts of them: all as if
	// every payment debited its whole amount.
	Refunds, RefundDuplicates, Conflicts int
	Refunded, Beyond                     int64
}

// Add counts m.
func (s *Summary) Add(m Message) {
	s.Messages++
	if m.Topic == Refunds {
		s.addRefund(m)
		return
	}
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

func (s *Summary) addRefund(m Message) {
	if m.Kind == Duplicate {
		s.RefundDuplicates++
		return
	}
	s.Refunds++
	s.Refunded += m.Taken
	s.Beyond += m.Beyond
	if m.Beyond > 0 {
		s.Conflicts++
	}
}
