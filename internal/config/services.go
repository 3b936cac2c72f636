package config

import (
	"cmp"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/go-sql-driver/mysql"
)

// Kafka is the broker connection and the topics.
type Kafka struct {
	Brokers  []string
	Topic    string
	Group    string
	DLQTopic string
	// GrantsTopic carries grant commands, consumed by the group GrantsGroup().
	GrantsTopic string
	// RefundsTopic carries refunds, consumed by the group RefundsGroup().
	RefundsTopic string
	// SessionTimeout is the consumer-group session: how long a silent member
	// keeps its partitions before the group moves on without it.
	SessionTimeout time.Duration
	TLS            TLS
	SASL           SASL
}

// SASL mechanisms accepted in KAFKA_SASL_MECHANISM.
const (
	SASLNone        = ""
	SASLPlain       = "plain"
	SASLScramSHA256 = "scram-sha-256"
	SASLScramSHA512 = "scram-sha-512"
)

// SASL is Kafka authentication.
type SASL struct {
	Mechanism string
	Username  string
	Password  string
}

// TLS configures a client's TLS. Enabled with no files uses the system roots.
type TLS struct {
	Enabled            bool
	CAFile             string
	CertFile           string
	KeyFile            string
	ServerName         string
	InsecureSkipVerify bool
}

// Redis is the Redis connection. More than one address, or Cluster, means Redis Cluster.
type Redis struct {
	Addrs     []string
	Cluster   bool
	Username  string
	Password  string
	DB        int
	TLS       TLS
	KeyPrefix string
}

// MySQL is the database connection. TLS goes in the DSN (tls=true, or
// tls=custom with MYSQL_TLS_CA_FILE).
type MySQL struct {
	DSN          string
	TLSCAFile    string
	MaxOpenConns int
}

// Redacted is the DSN with its password masked, safe for logs and errors.
func (m MySQL) Redacted() string { return RedactDSN(m.DSN) }

// Database is the database the DSN names (Load refuses a DSN without one).
func (m MySQL) Database() string {
	cfg, err := mysql.ParseDSN(m.DSN)
	if err != nil {
		return ""
	}
	return cfg.DBName
}

// RedactDSN masks the password of a go-sql-driver DSN.
func RedactDSN(dsn string) string {
	cfg, err := mysql.ParseDSN(dsn)
	if err != nil {
		return "<unparsable DSN>"
	}
	if cfg.Passwd != "" {
		cfg.Passwd = "xxxxx"
	}
	return cfg.FormatDSN()
}

func (p *parser) kafka() Kafka {
	k := Kafka{
		Brokers:        p.addrList("KAFKA_BROKERS", ""),
		Topic:          p.topic("KAFKA_TOPIC", DefaultTopic),
		Group:          p.str("KAFKA_GROUP", DefaultGroup),
		DLQTopic:       p.topic("KAFKA_DLQ_TOPIC", DefaultDLQTopic),
		GrantsTopic:    p.topic("KAFKA_GRANTS_TOPIC", DefaultGrantsTopic),
		RefundsTopic:   p.topic("KAFKA_REFUNDS_TOPIC", DefaultRefundsTopic),
		SessionTimeout: p.duration("KAFKA_SESSION_TIMEOUT", 30*time.Second, time.Second, 10*time.Minute),
		TLS:            p.tls("KAFKA_TLS"),
		SASL: SASL{
			Mechanism: p.oneOf("KAFKA_SASL_MECHANISM", SASLNone, SASLPlain, SASLScramSHA256, SASLScramSHA512),
			Username:  p.str("KAFKA_SASL_USERNAME", ""),
			Password:  p.secret("KAFKA_SASL_PASSWORD"),
		},
	}
	if k.Topic == k.DLQTopic {
		p.fail("KAFKA_DLQ_TOPIC", k.DLQTopic, "must differ from KAFKA_TOPIC")
	}
	if k.GrantsTopic == k.Topic || k.GrantsTopic == k.DLQTopic {
		p.fail("KAFKA_GRANTS_TOPIC", k.GrantsTopic, "must differ from KAFKA_TOPIC and KAFKA_DLQ_TOPIC")
	}
	if k.RefundsTopic == k.Topic || k.RefundsTopic == k.DLQTopic || k.RefundsTopic == k.GrantsTopic {
		p.fail("KAFKA_REFUNDS_TOPIC", k.RefundsTopic, "must differ from KAFKA_TOPIC, KAFKA_DLQ_TOPIC and KAFKA_GRANTS_TOPIC")
	}
	if k.SASL.Mechanism != SASLNone && (k.SASL.Username == "" || k.SASL.Password == "") {
		p.fail("KAFKA_SASL_USERNAME", k.SASL.Username, "and KAFKA_SASL_PASSWORD are required with KAFKA_SASL_MECHANISM="+k.SASL.Mechanism)
	}
	return k
}

// GrantsGroup is the consumer group of the grants topic: a group of its own,
// so that joining, leaving or a missing grants topic never rebalances (or
// stops) the consumption of payments.
func (k Kafka) GrantsGroup() string { return k.Group + ".grants" }

// RefundsGroup is the consumer group of the refunds topic, of its own for
// the same reason as GrantsGroup.
func (k Kafka) RefundsGroup() string { return k.Group + ".refunds" }

func (p *parser) topic(name, def string) string {
	v := p.str(name, def)
	if len(v) > 249 || strings.Trim(v, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-") != "" {
		p.fail(name, v, "is not a valid topic name ([A-Za-z0-9._-], at most 249)")
	}
	return v
}

func (p *parser) tls(prefix string) TLS {
	t := TLS{
		Enabled:            p.boolean(prefix, false),
		CAFile:             p.file(prefix + "_CA_FILE"),
		CertFile:           p.file(prefix + "_CERT_FILE"),
		KeyFile:            p.file(prefix + "_KEY_FILE"),
		ServerName:         p.str(prefix+"_SERVER_NAME", ""),
		InsecureSkipVerify: p.boolean(prefix+"_INSECURE_SKIP_VERIFY", false),
	}
	if (t.CertFile == "") != (t.KeyFile == "") {
		p.fail(prefix+"_CERT_FILE", t.CertFile, "and "+prefix+"_KEY_FILE must be set together")
	}
	if t.CAFile != "" || t.CertFile != "" || t.InsecureSkipVerify || t.ServerName != "" {
		t.Enabled = true
	}
	return t
}

func (p *parser) file(name string) string {
	v := p.get(name)
	if v == "" {
		return ""
	}
	if _, err := os.Stat(v); err != nil {
		p.fail(name, v, "cannot be read: "+err.Error())
	}
	return v
}

func (p *parser) redis() Redis {
	r := Redis{
		Addrs:     p.addrList("REDIS_ADDR", DefaultRedis),
		Cluster:   p.boolean("REDIS_CLUSTER", false),
		Username:  p.str("REDIS_USERNAME", ""),
		Password:  p.secret("REDIS_PASSWORD"),
		DB:        p.integer("REDIS_DB", 0, 0, 15),
		TLS:       p.tls("REDIS_TLS"),
		KeyPrefix: p.str("REDIS_KEY_PREFIX", ""),
	}
	if len(r.Addrs) == 0 {
		p.fail("REDIS_ADDR", "", "is empty")
	}
	if len(r.Addrs) > 1 {
		r.Cluster = true
	}
	if r.Cluster && r.DB != 0 {
		p.fail("REDIS_DB", fmt.Sprint(r.DB), "must be 0 with Redis Cluster")
	}
	if strings.ContainsAny(r.KeyPrefix, "{}") {
		p.fail("REDIS_KEY_PREFIX", r.KeyPrefix, "must not contain braces (they pick the Cluster hash slot)")
	}
	return r
}

func (p *parser) mysql() MySQL {
	m := MySQL{
		DSN:          p.secret("MYSQL_DSN"),
		TLSCAFile:    p.file("MYSQL_TLS_CA_FILE"),
		MaxOpenConns: p.integer("MYSQL_MAX_OPEN_CONNS", 32, 1, 1000),
	}
	m.DSN = p.withPassword(cmp.Or(m.DSN, DefaultMySQLDSN))
	cfg, err := mysql.ParseDSN(m.DSN)
	if err != nil {
		// The raw DSN may hold a password: name the variable, not the value.
		p.fail("MYSQL_DSN", "", "is malformed: "+redactParseError(err, m.DSN))
		return m
	}
	if cfg.DBName == "" {
		p.fail("MYSQL_DSN", RedactDSN(m.DSN), "names no database")
	}
	if !cfg.ParseTime {
		p.fail("MYSQL_DSN", RedactDSN(m.DSN), "needs parseTime=true")
	}
	if m.TLSCAFile != "" && cfg.TLSConfig != "custom" {
		p.fail("MYSQL_TLS_CA_FILE", m.TLSCAFile, "is set but MYSQL_DSN does not say tls=custom")
	}
	return m
}

func redactParseError(err error, dsn string) string {
	// The DSN did not parse, so its password is whatever lies between the first ':' and the last '@'.
	msg := err.Error()
	if i := strings.Index(dsn, ":"); i >= 0 {
		if j := strings.LastIndex(dsn, "@"); j > i+1 {
			msg = strings.ReplaceAll(msg, dsn[i+1:j], "xxxxx")
		}
	}
	return msg
}
