package workload

// Summarize tallies msgs.
func Summarize(msgs []Message) Summary {
	var s Summary
	for _, m := range msgs {
		s.Add(m)
	}
	return s
}

// perMerchant counts the valid events of msgs by merchant.
func perMerchant(msgs []Message) map[string]int {
	out := map[string]int{}
	for _, m := range msgs {
		if m.Kind == Valid {
			out[m.Event.MerchantID]++
		}
	}
	return out
}
