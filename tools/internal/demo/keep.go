package demo

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/segmentio/kafka-go"
)

// serveAdmin has the worker of env serve the read API under --keep, with a
// fresh bearer token in a file of its own (removed by Run at exit).
func (r *run) serveAdmin(env map[string]string) error {
	b := make([]byte, 16)
	_, _ = rand.Read(b) // never fails
	r.token = hex.EncodeToString(b)
	f, err := os.CreateTemp("", "billing-demo-token-")
	if err != nil {
		return fmt.Errorf("demo: read API token: %w", err)
	}
	r.tokenFile = f.Name()
	_, err = f.WriteString(r.token)
	if err = errors.Join(err, f.Close()); err != nil {
		return fmt.Errorf("demo: read API token: %w", err)
	}
	env["ADMIN_ADDR"], env["ADMIN_TOKEN_FILE"] = "127.0.0.1:0", r.tokenFile
	return nil
}

// grantsTopic is the run's topic of grant commands, beside its balance events.
func (r *run) grantsTopic() string {
	return strings.TrimSuffix(r.st.EventsTopic, "quota.events") + "quota.grants"
}

// createGrantsTopic creates the grants topic, which the workers wait for.
func (r *run) createGrantsTopic(ctx context.Context) error {
	resp, err := r.st.Client().CreateTopics(ctx, &kafka.CreateTopicsRequest{Topics: []kafka.TopicConfig{
		{Topic: r.grantsTopic(), NumPartitions: r.o.Partitions, ReplicationFactor: -1}}})
	if err == nil {
		err = resp.Errors[r.grantsTopic()]
	}
	if err != nil {
		return fmt.Errorf("demo: create topic %s: %w", r.grantsTopic(), err)
	}
	return nil
}
