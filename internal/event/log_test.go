package event

import (
	"testing"

	"go.uber.org/zap/zapcore"
)

func TestMarshalLogObject(t *testing.T) {
	tests := []struct {
		name string
		e    PaymentSucceeded
		want map[string]any
	}{
		{"decoded", PaymentSucceeded{EventID: "evt-1", MerchantID: "m-42", Amount: 3}, map[string]any{"event_id": "evt-1", "merchant_id": "m-42"}},
		{"zero", PaymentSucceeded{}, map[string]any{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			enc := zapcore.NewMapObjectEncoder()
			if err := tt.e.MarshalLogObject(enc); err != nil {
				t.Fatal(err)
			}
			if len(enc.Fields) != len(tt.want) {
				t.Fatalf("fields %v, want %v", enc.Fields, tt.want)
			}
			for k, v := range tt.want {
				if enc.Fields[k] != v {
					t.Errorf("%s = %v, want %v", k, enc.Fields[k], v)
				}
			}
		})
	}
}
