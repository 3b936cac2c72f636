// Package dial opens the production connections from a config: Redis
// (standalone or Cluster, ACL user, TLS), MySQL (GORM, TLS through the DSN) and
// Kafka (TLS, SASL PLAIN and SCRAM). It never logs or returns a secret.
package dial

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"os"

	"github.com/quotaflow/billing/internal/config"
)

// TLSConfig builds a client TLS config, or nil when TLS is off.
func TLSConfig(c config.TLS) (*tls.Config, error) {
	if !c.Enabled {
		return nil, nil
	}
	tc := &tls.Config{
		MinVersion:         tls.VersionTLS12,
		ServerName:         c.ServerName,
		InsecureSkipVerify: c.InsecureSkipVerify, //nolint:gosec // opt-in, documented as never for production
	}
	if c.CAFile != "" {
		pem, err := os.ReadFile(c.CAFile)
		if err != nil {
			return nil, fmt.Errorf("dial: read CA file: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("dial: CA file %s holds no PEM certificate", c.CAFile)
		}
		tc.RootCAs = pool
	}
	if c.CertFile != "" {
		cert, err := tls.LoadX509KeyPair(c.CertFile, c.KeyFile)
		if err != nil {
			return nil, fmt.Errorf("dial: load client certificate: %w", err)
		}
		tc.Certificates = []tls.Certificate{cert}
	}
	return tc, nil
}
