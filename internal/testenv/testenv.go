// Package testenv gives integration tests real services, each test its own
// slice of them: a fresh migrated MySQL database, a Redis key prefix, and Kafka
// topics.
//
// Sources, in order: the environment (BILLING_TEST_MYSQL_DSN,
// BILLING_TEST_REDIS_ADDR, KAFKA_BROKERS), the local defaults on 127.0.0.1,
// containers of testcontainers-go (built with -tags testcontainers, when a
// Docker engine answers), and for Kafka an in-process kfake broker. When a
// service cannot be reached the test is skipped with a loud reason, or fails
// when BILLING_REQUIRE_INTEGRATION=1 (as in CI).
package testenv

import (
	"crypto/rand"
	"encoding/hex"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// RequireEnv makes an unreachable service fail the test instead of skipping it.
const RequireEnv = "BILLING_REQUIRE_INTEGRATION"

// unavailable skips or fails the test, loudly, because a service is missing.
func unavailable(t testing.TB, service string, err error) {
	t.Helper()
	notRun(t, service+" unreachable: "+err.Error())
}

// notRun skips the test, loudly, because a prerequisite is missing, or fails it
// when RequireEnv=1.
func notRun(t testing.TB, reason string) {
	t.Helper()
	msg := "INTEGRATION TEST NOT RUN: " + reason
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
	_, _ = rand.Read(b[:]) // never fails
	name := strings.Map(func(r rune) rune {
		if (r >= 'a' && r <= 'z') || (r >= '0' && r <= '9') {
			return r
		}
		return '_'
	}, strings.ToLower(t.Name()))
	return kind + "_" + name[:min(len(name), 24)] + "_" + time.Now().UTC().Format("150405") + "_" + hex.EncodeToString(b[:])
}

func envOr(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}

// FreePort returns a TCP port that was free a moment ago.
func FreePort(t testing.TB) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// GoTool is the go command, for tests that build or test the module again.
func GoTool() string {
	if bin, err := exec.LookPath("go"); err == nil {
		return bin
	}
	return filepath.Join(os.Getenv("GOROOT"), "bin", "go")
}

// requireBinary finds the first of names on PATH or in /usr/sbin (where Debian
// puts mariadbd), or skips or fails the test.
func requireBinary(t testing.TB, names ...string) string {
	t.Helper()
	for _, n := range names {
		for _, path := range []string{n, "/usr/sbin/" + n} {
			if bin, err := exec.LookPath(path); err == nil {
				return bin
			}
		}
	}
	_, err := exec.LookPath(names[0])
	unavailable(t, names[0], err)
	return ""
}

// waitFor calls f until it succeeds or within has passed, and returns its last error.
func waitFor(within time.Duration, f func() error) error {
	deadline := time.Now().Add(within)
	for {
		err := f()
		if err == nil || time.Now().After(deadline) {
			return err
		}
		time.Sleep(50 * time.Millisecond)
	}
}
