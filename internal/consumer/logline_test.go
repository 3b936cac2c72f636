package consumer

import (
	"bytes"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/quotaflow/billing/internal/testenv"
)

// A dead-letter line is strict JSON: the topic once (the consumer's logger
// carries it), and an undecodable message's key as its merchant_id.
func TestDeadLetterLogLine(t *testing.T) {
	c := newCluster(t)
	topic, dlqTopic := c.k.Topic(t, 1), c.k.Topic(t, 1)
	c.produce(t, topic, []kafka.Message{{Key: []byte("m-7"), Value: []byte("m-7:poison")}})
	var out bytes.Buffer // read once Run has returned
	log := zap.New(zapcore.NewCore(zapcore.NewJSONEncoder(zap.NewProductionEncoderConfig()), zapcore.Lock(zapcore.AddSync(&out)), zap.InfoLevel))
	m, err := NewMetrics(nil)
	if err != nil {
		t.Fatal(err)
	}
	cons, err := New(c.config(topic, dlqTopic), decodeEvent, newRecorder().handler(0), nil, log, m)
	if err != nil {
		t.Fatal(err)
	}
	r := run(t, cons, m)
	waitFor(t, 10*time.Second, "dead-lettered", func() bool { return c.dlqSize(t, dlqTopic) >= 1 })
	r.stop(t)
	var found bool
	for _, l := range testenv.JSONLines(t, out.String()) {
		if l["msg"] == "message dead-lettered" {
			found = true
			if l["topic"] != topic || l["merchant_id"] != "m-7" || l["key"] != nil {
				t.Errorf("dead-letter line %v", l)
			}
		}
	}
	if !found {
		t.Errorf("no dead-letter line in\n%s", out.String())
	}
}
