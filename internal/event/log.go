package event

import "go.uber.org/zap/zapcore"

// MarshalLogObject gives a log line the event's identity as fields (event_id,
// merchant_id), so one query finds a payment in every program's log. Empty
// fields (an event that did not decode) are left out.
func (e PaymentSucceeded) MarshalLogObject(enc zapcore.ObjectEncoder) error {
	if e.EventID != "" {
		enc.AddString("event_id", e.EventID)
	}
	if e.MerchantID != "" {
		enc.AddString("merchant_id", e.MerchantID)
	}
	return nil
}
