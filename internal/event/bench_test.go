package event

import (
	"testing"
	"time"
)

func BenchmarkDecode(b *testing.B) {
	ev := PaymentSucceeded{EventID: "evt-load-123456", PaymentID: "pay-evt-load-123456", MerchantID: "m-000042",
		Amount: 7, Source: SourceMiniApp, OccurredAt: time.Date(2026, 12, 1, 7, 0, 0, 123456789, time.UTC)}
	key, value := []byte(ev.MerchantID), ev.Encode()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Decode(key, value); err != nil {
			b.Fatal(err)
		}
	}
}
