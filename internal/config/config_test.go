package config

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"
)

func env(kv map[string]string) func(string) string {
	return func(k string) string { return kv[k] }
}

func TestDefaults(t *testing.T) {
	cfg, err := Load(env(nil))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Kafka.GrantsTopic != DefaultGrantsTopic || cfg.Kafka.GrantsGroup() != "billing-worker.grants" {
		t.Errorf("grants: topic %q group %q", cfg.Kafka.GrantsTopic, cfg.Kafka.GrantsGroup())
	}
	if cfg.Kafka.Topic != DefaultTopic || cfg.Kafka.Group != DefaultGroup || cfg.Kafka.DLQTopic != DefaultDLQTopic {
		t.Errorf("kafka defaults: %+v", cfg.Kafka)
	}
	if !slices.Equal(cfg.Redis.Addrs, []string{DefaultRedis}) || cfg.Redis.Cluster {
		t.Errorf("redis defaults: %+v", cfg.Redis)
	}
	if cfg.MySQL.DSN != DefaultMySQLDSN || cfg.HTTPAddr != ":9100" || cfg.LockTTL != 30*time.Second || cfg.LogLevel != "info" {
		t.Errorf("defaults: %+v", cfg)
	}
	if cfg.IDGen.WorkerID != -1 || cfg.Worker.MaxAttempts != 5 || cfg.Worker.ShutdownTimeout != 10*time.Second {
		t.Errorf("defaults: %+v %+v", cfg.IDGen, cfg.Worker)
	}
}

func TestValid(t *testing.T) {
	tests := []struct {
		name  string
		env   map[string]string
		needs []Need
		check func(t *testing.T, c Config)
	}{
		{"brokers list", map[string]string{"KAFKA_BROKERS": "a:9092, b:9092"}, []Need{NeedKafka}, func(t *testing.T, c Config) {
			if !slices.Equal(c.Kafka.Brokers, []string{"a:9092", "b:9092"}) {
				t.Errorf("brokers %v", c.Kafka.Brokers)
			}
		}},
		{"redis cluster from list", map[string]string{"REDIS_ADDR": "r1:6379,r2:6379,r3:6379"}, nil, func(t *testing.T, c Config) {
			if !c.Redis.Cluster || len(c.Redis.Addrs) != 3 {
				t.Errorf("redis %+v", c.Redis)
			}
		}},
		{"explicit worker id", map[string]string{"IDGEN_WORKER_ID": "7"}, []Need{NeedWorkerID}, func(t *testing.T, c Config) {
			if c.IDGen.WorkerID != 7 {
				t.Errorf("worker id %d", c.IDGen.WorkerID)
			}
		}},
		{"step-aside bound", map[string]string{"IDGEN_WORKER_ID": "7", "IDGEN_STEP_ASIDE_AFTER": "2s"}, []Need{NeedWorkerID}, func(t *testing.T, c Config) {
			if c.IDGen.StepAsideAfter != 2*time.Second {
				t.Errorf("step-aside bound %v", c.IDGen.StepAsideAfter)
			}
		}},
		{"pod ordinal plus base", map[string]string{"POD_NAME": "billing-worker-3", "IDGEN_WORKER_ID_BASE": "100", "IDGEN_WORKER_ID_COUNT": "50"}, []Need{NeedWorkerID}, func(t *testing.T, c Config) {
			if c.IDGen.WorkerID != 103 {
				t.Errorf("worker id %d", c.IDGen.WorkerID)
			}
		}},
		{"explicit wins over pod", map[string]string{"POD_NAME": "billing-worker-3", "IDGEN_WORKER_ID": "9"}, []Need{NeedWorkerID}, func(t *testing.T, c Config) {
			if c.IDGen.WorkerID != 9 {
				t.Errorf("worker id %d", c.IDGen.WorkerID)
			}
		}},
		{"sasl scram", map[string]string{"KAFKA_SASL_MECHANISM": "SCRAM-SHA-512", "KAFKA_SASL_USERNAME": "u", "KAFKA_SASL_PASSWORD": "p"}, nil, func(t *testing.T, c Config) {
			if c.Kafka.SASL.Mechanism != SASLScramSHA512 {
				t.Errorf("sasl %+v", c.Kafka.SASL)
			}
		}},
		{"durations", map[string]string{"LOCK_TTL": "2s", "WORKER_LATENCY_BUDGET": "0s"}, nil, func(t *testing.T, c Config) {
			if c.LockTTL != 2*time.Second || c.Worker.LatencyBudget != 0 {
				t.Errorf("lock %v budget %v", c.LockTTL, c.Worker.LatencyBudget)
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := Load(env(tt.env), tt.needs...)
			if err != nil {
				t.Fatal(err)
			}
			tt.check(t, c)
		})
	}
}

func TestInvalidNamesVariableAndValue(t *testing.T) {
	tests := []struct {
		name  string
		env   map[string]string
		needs []Need
		want  []string // substrings of the error
	}{
		{"bad lock ttl", map[string]string{"LOCK_TTL": "soon"}, nil, []string{`LOCK_TTL="soon"`, "duration"}},
		{"lock ttl range", map[string]string{"LOCK_TTL": "1ms"}, nil, []string{`LOCK_TTL="1ms"`, "outside"}},
		{"brokers needed", nil, []Need{NeedKafka}, []string{"KAFKA_BROKERS", "required"}},
		{"broker not host:port", map[string]string{"KAFKA_BROKERS": "kafka"}, nil, []string{`KAFKA_BROKERS="kafka"`}},
		{"malformed dsn", map[string]string{"MYSQL_DSN": "root:hunter2@tcp(127.0.0.1"}, nil, []string{"MYSQL_DSN", "malformed"}},
		{"dsn without parseTime", map[string]string{"MYSQL_DSN": "u:hunter2@tcp(h:3306)/billing"}, nil, []string{"MYSQL_DSN", "parseTime", "xxxxx"}},
		{"worker id range", map[string]string{"IDGEN_WORKER_ID": "1024"}, []Need{NeedWorkerID}, []string{`IDGEN_WORKER_ID="1024"`, "0..1023"}},
		{"worker id outside service range", map[string]string{"IDGEN_WORKER_ID": "5", "IDGEN_WORKER_ID_BASE": "10", "IDGEN_WORKER_ID_COUNT": "5"}, nil, []string{`IDGEN_WORKER_ID="5"`, "10..14"}},
		{"pod ordinal past count", map[string]string{"POD_NAME": "w-8", "IDGEN_WORKER_ID_COUNT": "8"}, []Need{NeedWorkerID}, []string{`POD_NAME="w-8"`}},
		{"pod without ordinal", map[string]string{"POD_NAME": "worker"}, []Need{NeedWorkerID}, []string{`POD_NAME="worker"`}},
		{"no worker id", nil, []Need{NeedWorkerID}, []string{"IDGEN_WORKER_ID", "POD_NAME"}},
		{"step-aside bound range", map[string]string{"IDGEN_WORKER_ID": "1", "IDGEN_STEP_ASIDE_AFTER": "10ms"}, []Need{NeedWorkerID}, []string{`IDGEN_STEP_ASIDE_AFTER="10ms"`, "outside"}},
		{"bad step-aside bound", map[string]string{"IDGEN_WORKER_ID": "1", "IDGEN_STEP_ASIDE_AFTER": "soon"}, []Need{NeedWorkerID}, []string{`IDGEN_STEP_ASIDE_AFTER="soon"`, "duration"}},
		{"sasl without user", map[string]string{"KAFKA_SASL_MECHANISM": "plain"}, nil, []string{"KAFKA_SASL_USERNAME"}},
		{"bad sasl", map[string]string{"KAFKA_SASL_MECHANISM": "kerberos"}, nil, []string{`KAFKA_SASL_MECHANISM="kerberos"`}},
		{"braces in prefix", map[string]string{"REDIS_KEY_PREFIX": "a{b}"}, nil, []string{"REDIS_KEY_PREFIX"}},
		{"missing ca file", map[string]string{"REDIS_TLS_CA_FILE": "/nonexistent/ca.pem"}, nil, []string{"REDIS_TLS_CA_FILE", "/nonexistent/ca.pem"}},
		{"bad level", map[string]string{"LOG_LEVEL": "loud"}, nil, []string{`LOG_LEVEL="loud"`}},
		{"bad bool", map[string]string{"KAFKA_TLS": "yes please"}, nil, []string{`KAFKA_TLS="yes please"`}},
		{"same topics", map[string]string{"KAFKA_DLQ_TOPIC": "payment.succeeded"}, nil, []string{"KAFKA_DLQ_TOPIC"}},
		{"grants on the payment topic", map[string]string{"KAFKA_GRANTS_TOPIC": "payment.succeeded"}, nil, []string{`KAFKA_GRANTS_TOPIC="payment.succeeded"`}},
		{"bad grants topic", map[string]string{"KAFKA_GRANTS_TOPIC": "quota grants"}, nil, []string{`KAFKA_GRANTS_TOPIC="quota grants"`}},
		{"bad http addr", map[string]string{"HTTP_ADDR": "9100"}, nil, []string{`HTTP_ADDR="9100"`}},
		{"latency budget range", map[string]string{"WORKER_LATENCY_BUDGET": "-5ms"}, nil, []string{`WORKER_LATENCY_BUDGET="-5ms"`}},
		{"batch wait is gone", map[string]string{"WORKER_BATCH_WAIT": "5ms"}, nil, []string{`WORKER_BATCH_WAIT="5ms"`, "WORKER_LATENCY_BUDGET"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Load(env(tt.env), tt.needs...)
			if err == nil {
				t.Fatal("no error")
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
			if strings.Contains(err.Error(), "hunter2") {
				t.Errorf("error leaks the password: %v", err)
			}
			var fe *FieldError
			if !errors.As(err, &fe) {
				t.Errorf("error %T has no *FieldError", err)
			}
		})
	}
}

func TestAllProblemsAtOnce(t *testing.T) {
	_, err := Load(env(map[string]string{"LOCK_TTL": "x", "IDGEN_WORKER_ID": "-1", "MYSQL_DSN": "nope", "WORKER_LANES": "0"}), NeedKafka)
	if err == nil {
		t.Fatal("no error")
	}
	for _, v := range []string{"LOCK_TTL", "IDGEN_WORKER_ID", "MYSQL_DSN", "WORKER_LANES", "KAFKA_BROKERS"} {
		if !strings.Contains(err.Error(), v) {
			t.Errorf("missing %s in %v", v, err)
		}
	}
}

func TestRedactDSN(t *testing.T) {
	got := RedactDSN("billing:s3cret@tcp(db:3306)/billing?parseTime=true&tls=true")
	if strings.Contains(got, "s3cret") || !strings.Contains(got, "billing:xxxxx@tcp(db:3306)/billing") {
		t.Fatalf("RedactDSN = %q", got)
	}
}

// The relay's wake channel is named by the DSN's database.
func TestMySQLDatabase(t *testing.T) {
	for dsn, want := range map[string]string{
		"billing:s3cret@tcp(db:3306)/billing_eu?parseTime=true": "billing_eu",
		"root@tcp(127.0.0.1:3306)/":                             "",
		"not a dsn":                                             "",
	} {
		if got := (MySQL{DSN: dsn}).Database(); got != want {
			t.Errorf("Database(%q) = %q, want %q", dsn, got, want)
		}
	}
}

// Every variable Load reads is documented, and nothing documented is unread.
func TestVariablesDocumented(t *testing.T) {
	p := &parser{getenv: env(nil)}
	p.config(nil)
	var documented []string
	for _, v := range Variables() {
		documented = append(documented, v.Name)
	}
	slices.Sort(documented)
	read := slices.Clone(p.read)
	slices.Sort(read)
	read = slices.Compact(read)
	if !slices.Equal(read, documented) {
		t.Fatalf("read %v\ndocumented %v", read, documented)
	}
}

// Unset, the in-flight window is two batches per lane; set, it is taken as is.
func TestMaxInFlightFollowsLanesAndBatches(t *testing.T) {
	for _, tt := range []struct {
		env  map[string]string
		want int
	}{
		{nil, 8192},
		{map[string]string{"WORKER_LANES": "2", "WORKER_BATCH_SIZE": "100"}, 400},
		{map[string]string{"WORKER_LANES": "1024", "WORKER_BATCH_SIZE": "10000"}, 1_000_000},
		{map[string]string{"WORKER_LANES": "2", "WORKER_MAX_INFLIGHT": "64"}, 64},
	} {
		cfg, err := Load(env(tt.env))
		if err != nil {
			t.Fatal(err)
		}
		if cfg.Worker.MaxInFlight != tt.want {
			t.Errorf("%v: WORKER_MAX_INFLIGHT %d, want %d", tt.env, cfg.Worker.MaxInFlight, tt.want)
		}
	}
}
