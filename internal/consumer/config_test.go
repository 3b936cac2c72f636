package consumer

import (
	"strings"
	"testing"
	"time"
)

func TestConfigDefaults(t *testing.T) {
	c := Config{Brokers: []string{"b:9092"}, Topic: "t", Group: "g", DLQTopic: "t.dlq"}
	c.setDefaults()
	if err := c.Validate(); err != nil {
		t.Fatalf("defaults invalid: %v", err)
	}
	if c.Lanes != 2 || c.BatchSize != 2048 || c.MaxAttempts != 5 || c.ShutdownTimeout != 10*time.Second ||
		c.CommitInterval != time.Second || c.MaxInFlightPerPartition != 8192 || c.GroupTimeout != 2*time.Second ||
		c.LatencyBudget != 0 || c.MaxWait != 500*time.Millisecond {
		t.Fatalf("unexpected defaults: %+v", c)
	}
}

func TestConfigValidate(t *testing.T) {
	valid := func() Config {
		return Config{Brokers: []string{"b:9092"}, Topic: "t", Group: "g", DLQTopic: "t.dlq"}
	}
	tests := []struct {
		name   string
		mutate func(*Config)
		want   []string // every fragment must be in the joined error
	}{
		{"valid", func(*Config) {}, nil},
		{"everything missing at once", func(c *Config) { c.Brokers, c.Topic, c.Group, c.DLQTopic = nil, "", "", "" },
			[]string{"Brokers is empty", "Topic is empty", "Group is empty", "DLQTopic is empty"}},
		{"dlq is the topic", func(c *Config) { c.DLQTopic = "t" }, []string{`DLQTopic "t" is the consumed topic`}},
		{"negative counts", func(c *Config) { c.Lanes, c.BatchSize, c.MaxAttempts = -1, -2, -3 },
			[]string{"Lanes = -1", "BatchSize = -2", "MaxAttempts = -3"}},
		{"backoff cap below start", func(c *Config) { c.BackoffInitial, c.BackoffMax = time.Second, time.Millisecond },
			[]string{"BackoffMax 1ms < BackoffInitial 1s"}},
		{"heartbeat not below session", func(c *Config) { c.HeartbeatInterval = 30 * time.Second },
			[]string{"HeartbeatInterval 30s >= SessionTimeout 30s"}},
		{"negative durations", func(c *Config) { c.LatencyBudget, c.ShutdownTimeout = -1, -1 },
			[]string{"LatencyBudget = -1ns", "ShutdownTimeout = -1ns"}},
		{"empty broker", func(c *Config) { c.Brokers = []string{"a:1", ""} }, []string{"Brokers[1] is empty"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := valid()
			tt.mutate(&c)
			err := c.Validate()
			if len(tt.want) == 0 {
				if err != nil {
					t.Fatalf("Validate() = %v, want nil", err)
				}
				return
			}
			if err == nil {
				t.Fatal("Validate() = nil, want errors")
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("Validate() = %q, missing %q", err, w)
				}
			}
		})
	}
}

func TestDrainBudget(t *testing.T) {
	c := Config{ShutdownTimeout: 10 * time.Second, RebalanceTimeout: 4 * time.Second}
	if drain, grace := c.drainBudget(true); drain != 6*time.Second || grace != time.Second {
		t.Errorf("shutdown drain, grace = %v, %v; want 6s, 1s", drain, grace)
	}
	if drain, grace := c.drainBudget(false); drain != 2*time.Second || grace != 400*time.Millisecond {
		t.Errorf("revoke drain, grace = %v, %v; want 2s, 400ms", drain, grace)
	}
}
