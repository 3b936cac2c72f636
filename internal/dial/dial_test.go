package dial

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kfake"
	"go.uber.org/zap"

	"github.com/quotaflow/billing/internal/config"
	"github.com/quotaflow/billing/internal/testenv"
)

// roundTrip writes one message through the transport and reads it back through the dialer.
func roundTrip(t *testing.T, brokers []string, kc Kafka, topic string) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	w := &kafka.Writer{Addr: kafka.TCP(brokers...), Topic: topic, Transport: kc.Transport, RequiredAcks: kafka.RequireAll, MaxAttempts: 1}
	defer w.Close()
	if err := w.WriteMessages(ctx, kafka.Message{Key: []byte("k"), Value: []byte("v")}); err != nil {
		return err
	}
	r := kafka.NewReader(kafka.ReaderConfig{Brokers: brokers, Topic: topic, Partition: 0, Dialer: kc.Dialer, MaxWait: 100 * time.Millisecond})
	defer r.Close()
	m, err := r.ReadMessage(ctx)
	if err != nil {
		return err
	}
	if string(m.Value) != "v" {
		t.Fatalf("read %q", m.Value)
	}
	return nil
}

func TestKafkaSASL(t *testing.T) {
	for _, mech := range []struct{ kfake, ours string }{
		{"PLAIN", config.SASLPlain},
		{"SCRAM-SHA-256", config.SASLScramSHA256},
		{"SCRAM-SHA-512", config.SASLScramSHA512},
	} {
		t.Run(mech.ours, func(t *testing.T) {
			k := testenv.NewKafka(t, kfake.EnableSASL(), kfake.Superuser(mech.kfake, "billing", "s3cret"))
			k.InProcess(t, "a SASL broker")
			topic := k.Topic(t, 1)
			good, err := KafkaClients(config.Kafka{SASL: config.SASL{Mechanism: mech.ours, Username: "billing", Password: "s3cret"}}, "test")
			if err != nil {
				t.Fatal(err)
			}
			if err := roundTrip(t, k.Brokers, good, topic); err != nil {
				t.Fatalf("with the right password: %v", err)
			}
			bad, _ := KafkaClients(config.Kafka{SASL: config.SASL{Mechanism: mech.ours, Username: "billing", Password: "wrong"}}, "test")
			err = roundTrip(t, k.Brokers, bad, topic)
			if err == nil {
				t.Fatal("the broker accepted a wrong password")
			}
			if strings.Contains(err.Error(), "s3cret") || strings.Contains(err.Error(), "wrong") {
				t.Fatalf("error leaks a password: %v", err)
			}
		})
	}
}

func TestKafkaTLS(t *testing.T) {
	dir := t.TempDir()
	serverTLS, caFile := selfSigned(t, dir)
	k := testenv.NewKafka(t, kfake.TLS(serverTLS))
	k.InProcess(t, "a TLS broker")
	topic := k.Topic(t, 1)
	kc, err := KafkaClients(config.Kafka{TLS: config.TLS{Enabled: true, CAFile: caFile, ServerName: "localhost"}}, "test")
	if err != nil {
		t.Fatal(err)
	}
	if err := roundTrip(t, k.Brokers, kc, topic); err != nil {
		t.Fatalf("TLS round trip: %v", err)
	}
}

func TestRedisACLUser(t *testing.T) {
	r := testenv.NewRedis(t)
	ctx := context.Background()
	user := strings.TrimSuffix(r.Keys.Prefix(), ":")
	// A user that may touch only its own prefix, as production ACLs would.
	if err := r.Client.Do(ctx, "ACL", "SETUSER", user, "on", ">pw-"+user, "~"+r.Keys.Prefix()+"*", "+@all").Err(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Client.Do(context.Background(), "ACL", "DELUSER", user) })

	client, err := Redis(config.Redis{Addrs: []string{r.Addr}, Username: user, Password: "pw-" + user})
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	if err := client.Set(ctx, r.Keys.Quota("m"), 1, time.Minute).Err(); err != nil {
		t.Fatalf("ACL user cannot write its prefix: %v", err)
	}
	if err := client.Set(ctx, "outside-prefix", 1, time.Minute).Err(); err == nil {
		t.Fatal("ACL user wrote outside its prefix")
	}
	wrong, _ := Redis(config.Redis{Addrs: []string{r.Addr}, Username: user, Password: "nope"})
	defer wrong.Close()
	if err := wrong.Ping(ctx).Err(); err == nil {
		t.Fatal("wrong password accepted")
	}
}

func TestMySQLOpens(t *testing.T) {
	db := testenv.NewMySQL(t)
	g, err := MySQL(context.Background(), config.MySQL{DSN: db.DSN, MaxOpenConns: 4}, nopLogger())
	if err != nil {
		t.Fatal(err)
	}
	sqlDB, _ := g.DB()
	defer sqlDB.Close()
	var n int
	if err := g.Raw("SELECT COUNT(*) FROM quota_ledger").Scan(&n).Error; err != nil {
		t.Fatal(err)
	}
}

func TestTLSConfigErrors(t *testing.T) {
	dir := t.TempDir()
	junk := filepath.Join(dir, "junk.pem")
	os.WriteFile(junk, []byte("not pem"), 0o600)
	if _, err := TLSConfig(config.TLS{Enabled: true, CAFile: junk}); err == nil {
		t.Error("junk CA accepted")
	}
	if c, err := TLSConfig(config.TLS{}); c != nil || err != nil {
		t.Errorf("disabled TLS = %v, %v", c, err)
	}
}

// selfSigned writes a CA-less self-signed certificate for localhost and returns
// the server config and the certificate file a client trusts.
func selfSigned(t *testing.T, dir string) (*tls.Config, string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "localhost"},
		DNSNames: []string{"localhost"}, IPAddresses: []net.IP{net.ParseIP("127.0.0.1")},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IsCA: true, BasicConstraintsValid: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	certPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	keyDER, _ := x509.MarshalECPrivateKey(key)
	keyPEM := pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER})
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	caFile := filepath.Join(dir, "ca.pem")
	if err := os.WriteFile(caFile, certPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	return &tls.Config{Certificates: []tls.Certificate{pair}, MinVersion: tls.VersionTLS12}, caFile
}

func nopLogger() *zap.Logger { return zap.NewNop() }
