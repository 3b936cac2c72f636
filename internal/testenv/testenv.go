// Package testenv gives integration tests real services, each test its own
// slice of them: a fresh migrated MySQL database, a Redis key prefix, and Kafka
// topics.
//
// Sources, in order: the environment (BILLING_TEST_MYSQL_DSN,
// BILLING_TEST_REDIS_ADDR, KAFKA_BROKERS), the local defaults on 127.0.0.1,
// testcontainers-go when a Docker engine answers, and for Kafka an in-process
// kfake broker. When a service cannot be reached the test is skipped with a
// loud reason, or fails when BILLING_REQUIRE_INTEGRATION=1 (as in CI).
package testenv

import (
	"crypto/rand"
	"encoding/hex"
	"os"
	"strings"
	"testing"
	"time"
)

// RequireEnv makes an unreachable service fail the test instead of skipping it.
const RequireEnv = "BILLING_REQUIRE_INTEGRATION"

// unavailable skips or fails the test, loudly, because a service is missing.
func unavailable(t testing.TB, service string, err error) {
	t.Helper()
	msg := "INTEGRATION TEST NOT RUN: " + service + " unreachable: " + err.Error()
	if os.Getenv(RequireEnv) == "1" {
		t.Fatalf("%s (%s=1)", msg, RequireEnv)
	}
	t.Skip(msg)
}

// UniqueName returns a short name that no other test in any run shares:
// letters, digits and underscores, safe for database, topic and key names.
func UniqueName(t testing.TB, kind string) string {
	t.Helper()
	var b [4]byte
	if _, err := rand.Read(b[:]); err != nil {
		t.Fatalf("testenv: random: %v", err)
	}
	name := strings.ToLower(t.Name())
	name = strings.Map(func(r rune) rune {
		if (r >= 'a' && r <= 'z') || (r >= '0' && r <= '9') {
			return r
		}
		return '_'
	}, name)
	if len(name) > 24 {
		name = name[:24]
	}
	return kind + "_" + name + "_" + time.Now().UTC().Format("150405") + "_" + hex.EncodeToString(b[:])
}

func envOr(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}
