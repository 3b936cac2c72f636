package dial

import (
	"fmt"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/segmentio/kafka-go/sasl"
	"github.com/segmentio/kafka-go/sasl/plain"
	"github.com/segmentio/kafka-go/sasl/scram"
	"github.com/twmb/franz-go/pkg/kgo"
	franzsasl "github.com/twmb/franz-go/pkg/sasl"
	franzplain "github.com/twmb/franz-go/pkg/sasl/plain"
	franzscram "github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/quotaflow/billing/internal/config"
)

// Kafka holds what the clients need to reach the brokers: for kafka-go a
// Dialer (readers, consumer groups) and a Transport (writers, the admin
// client); for franz-go the options of the dead-letter topic's transactional
// producers and read_committed readers, which kafka-go cannot be.
type Kafka struct {
	Dialer    *kafka.Dialer
	Transport *kafka.Transport
	// Franz carries the client ID, TLS and SASL; callers add the seed
	// brokers and their own options.
	Franz []kgo.Opt
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
	franzMech, err := franzSASL(c.SASL)
	if err != nil {
		return Kafka{}, err
	}
	franz := []kgo.Opt{kgo.ClientID(clientID), kgo.DialTimeout(10 * time.Second)}
	if tc != nil {
		franz = append(franz, kgo.DialTLSConfig(tc.Clone()))
	}
	if franzMech != nil {
		franz = append(franz, kgo.SASL(franzMech))
	}
	return Kafka{
		Franz: franz,
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
	case config.SASLScramSHA256:
		m, err := scram.Mechanism(scram.SHA256, s.Username, s.Password)
		if err != nil {
			return nil, fmt.Errorf("dial: SCRAM-SHA-256: %w", err)
		}
		return m, nil
	case config.SASLScramSHA512:
		m, err := scram.Mechanism(scram.SHA512, s.Username, s.Password)
		if err != nil {
			return nil, fmt.Errorf("dial: SCRAM-SHA-512: %w", err)
		}
		return m, nil
	}
	return nil, fmt.Errorf("dial: unknown KAFKA_SASL_MECHANISM %q", s.Mechanism)
}

// franzSASL is saslMechanism for franz-go.
func franzSASL(s config.SASL) (franzsasl.Mechanism, error) {
	auth := franzscram.Auth{User: s.Username, Pass: s.Password}
	switch s.Mechanism {
	case config.SASLNone:
		return nil, nil
	case config.SASLPlain:
		return franzplain.Auth{User: s.Username, Pass: s.Password}.AsMechanism(), nil
	case config.SASLScramSHA256:
		return auth.AsSha256Mechanism(), nil
	case config.SASLScramSHA512:
		return auth.AsSha512Mechanism(), nil
	}
	return nil, fmt.Errorf("dial: unknown KAFKA_SASL_MECHANISM %q", s.Mechanism)
}
