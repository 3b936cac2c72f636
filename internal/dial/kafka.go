package dial

import (
	"fmt"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/segmentio/kafka-go/sasl"
	"github.com/segmentio/kafka-go/sasl/plain"
	"github.com/segmentio/kafka-go/sasl/scram"

	"github.com/quotaflow/billing/internal/config"
)

// Kafka holds what kafka-go needs to reach the brokers: a Dialer (readers,
// consumer groups) and a Transport (writers, the admin client).
type Kafka struct {
	Dialer    *kafka.Dialer
	Transport *kafka.Transport
}

// KafkaClients builds the dialer and transport with TLS and SASL from the config.
func KafkaClients(c config.Kafka, clientID string) (Kafka, error) {
	tc, err := TLSConfig(c.TLS)
	if err != nil {
		return Kafka{}, err
	}
	mech, err := saslMechanism(c.SASL)
	if err != nil {
		return Kafka{}, err
	}
	return Kafka{
		Dialer: &kafka.Dialer{
			ClientID: clientID, Timeout: 10 * time.Second, DualStack: true,
			TLS: tc, SASLMechanism: mech,
		},
		Transport: &kafka.Transport{
			ClientID: clientID, DialTimeout: 10 * time.Second, IdleTimeout: 30 * time.Second,
			TLS: tc, SASL: mech,
		},
	}, nil
}

func saslMechanism(s config.SASL) (sasl.Mechanism, error) {
	switch s.Mechanism {
	case config.SASLNone:
		return nil, nil
	case config.SASLPlain:
		return plain.Mechanism{Username: s.Username, Password: s.Password}, nil
	case config.SASLScramSHA256, config.SASLScramSHA512:
		algo := scram.SHA256
		if s.Mechanism == config.SASLScramSHA512 {
			algo = scram.SHA512
		}
		m, err := scram.Mechanism(algo, s.Username, s.Password)
		if err != nil {
			return nil, fmt.Errorf("dial: %s: %w", s.Mechanism, err)
		}
		return m, nil
	}
	return nil, fmt.Errorf("dial: unknown KAFKA_SASL_MECHANISM %q", s.Mechanism)
}
