package consumer

import (
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// logFields are the fields of a per-message warning: where the message is
// (partition, offset: the consumer's logger carries the topic), what it says
// about itself when its value is a zapcore.ObjectMarshaler (the billing event
// adds event_id and merchant_id), and when it did not decode its key, which is
// the merchant id. Built only when a line is written.
func logFields[T any](e *envelope[T], more ...zap.Field) []zap.Field {
	fs := make([]zap.Field, 0, 4+len(more))
	fs = append(fs, zap.Int("partition", e.msg.Partition), zap.Int64("offset", e.msg.Offset))
	if m, ok := any(e.value).(zapcore.ObjectMarshaler); ok && e.err == nil {
		fs = append(fs, zap.Inline(m))
	} else if e.err != nil {
		fs = append(fs, zap.ByteString("merchant_id", e.msg.Key))
	}
	return append(fs, more...)
}
