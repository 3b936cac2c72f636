package consumer

import (
	"errors"
	"testing"

	"github.com/segmentio/kafka-go"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
)

type loggedValue struct{ id string }

func (v loggedValue) MarshalLogObject(enc zapcore.ObjectEncoder) error {
	enc.AddString("event_id", v.id)
	return nil
}

// A per-message warning carries the message's place and identity as fields.
func TestLogFields(t *testing.T) {
	msg := kafka.Message{Topic: "payments", Partition: 3, Offset: 42, Key: []byte("m-1")}
	tests := []struct {
		name string
		line func(*zap.Logger)
		want map[string]any
		not  []string
	}{
		{"decoded value", func(l *zap.Logger) {
			l.Warn("x", logFields(&envelope[loggedValue]{msg: msg, value: loggedValue{"evt-1"}}, zap.Int("attempt", 2))...)
		}, map[string]any{"partition": int64(3), "offset": int64(42), "event_id": "evt-1", "attempt": int64(2)}, []string{"merchant_id", "topic"}},
		{"undecodable", func(l *zap.Logger) {
			l.Warn("x", logFields(&envelope[loggedValue]{msg: msg, err: errors.New("bad json")})...)
		}, map[string]any{"partition": int64(3), "offset": int64(42), "merchant_id": "m-1"}, []string{"event_id", "key", "topic"}},
		{"a value without fields", func(l *zap.Logger) {
			l.Warn("x", logFields(&envelope[int]{msg: msg, value: 7})...)
		}, map[string]any{"partition": int64(3), "offset": int64(42)}, []string{"merchant_id", "topic"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			core, logs := observer.New(zap.WarnLevel)
			tt.line(zap.New(core))
			got := logs.All()[0].ContextMap()
			for k, v := range tt.want {
				if got[k] != v {
					t.Errorf("%s = %v (%T), want %v", k, got[k], got[k], v)
				}
			}
			for _, k := range tt.not {
				if _, ok := got[k]; ok {
					t.Errorf("unexpected field %s in %v", k, got)
				}
			}
		})
	}
}
