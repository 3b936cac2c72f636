package workload

// Summarize tallies msgs.
func Summarize(msgs []Message) Summary {
	var s Summary
	for _, m := range msgs {
		s.Add(m)
	}
	return s
}
