package logging

import (
	"context"
	"testing"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"
)

// Each library's line becomes one zap warning naming the library.
func TestLibraryLoggers(t *testing.T) {
	core, logs := observer.New(zap.DebugLevel)
	log := zap.New(core)
	Redis(log).Printf(context.Background(), "redis: connection pool: failed to dial after %d attempts", 5)
	MySQLDriver(log).Print("packets.go:58 ", "unexpected EOF\n")
	Kafka(log).Printf("fetch %s: %v", "t/0", "broken pipe")
	want := []struct{ component, msg string }{
		{"redis", "connection pool: failed to dial after 5 attempts"},
		{"mysql", "packets.go:58 unexpected EOF"},
		{"kafka", "fetch t/0: broken pipe"},
	}
	got := logs.All()
	if len(got) != len(want) {
		t.Fatalf("%d lines, want %d", len(got), len(want))
	}
	for i, w := range want {
		if got[i].Level != zap.WarnLevel || got[i].Message != w.msg || got[i].ContextMap()["component"] != w.component {
			t.Errorf("line %d: %s %q %v, want warn %q component=%s", i, got[i].Level, got[i].Message, got[i].ContextMap(), w.msg, w.component)
		}
	}
}
