package failure

import (
	"context"
	"database/sql/driver"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"syscall"
	"testing"

	"github.com/go-sql-driver/mysql"
	"github.com/redis/go-redis/v9"
)

// redisReply is a Redis error reply as go-redis types it: any error with a
// RedisError method (redis.Error). go-redis's own constructors are internal.
type redisReply string

func (e redisReply) Error() string { return string(e) }
func (redisReply) RedisError()     {}

var _ redis.Error = redisReply("")

// knows is an error of another package that knows whether it is an outage.
type knows bool

func (k knows) Error() string { return "idgen: clock moved backward by 40ms" }
func (k knows) Outage() bool  { return bool(k) }

func mysqlErr(n uint16, msg string) error { return &mysql.MySQLError{Number: n, Message: msg} }

func TestIsOutage(t *testing.T) {
	tests := []struct {
		name string
		err  error
		want bool
	}{
		{"nil", nil, false},
		{"plain", errors.New("boom"), false},
		{"plain text naming a server state is not trusted", errors.New("CLUSTERDOWN The cluster is down"), false},
		{"permanent", Permanent(ClassInvalid, errors.New("amount 0")), false},
		{"canceled", context.Canceled, false},
		{"marked", Outage(errors.New("boom")), true},
		{"marked and wrapped", fmt.Errorf("batch: %w", Outage(errors.New("boom"))), true},
		{"knows it is", fmt.Errorf("ledger: row ids: %w", knows(true)), true},
		{"knows it is not", knows(false), false},

		{"mysql 1146 no such table", fmt.Errorf("ledger: existing events: %w", mysqlErr(1146, "Table 'billing.quota_ledger' doesn't exist")), true},
		{"mysql 1054 unknown column", mysqlErr(1054, "Unknown column 'reason' in 'field list'"), true},
		{"mysql 1290 read-only", mysqlErr(1290, "The MariaDB server is running with the --read-only option"), true},
		{"mysql 1836 read-only mode", mysqlErr(1836, "Running in read-only mode"), true},
		{"mysql 1040 too many connections", mysqlErr(1040, "Too many connections"), true},
		{"mysql 1213 deadlock", fmt.Errorf("ledger: gave up after 5 attempts: %w", mysqlErr(1213, "Deadlock found")), true},
		{"mysql 1205 lock wait timeout", mysqlErr(1205, "Lock wait timeout exceeded"), true},
		{"mysql 1461 prepared statements exhausted", mysqlErr(1461, "Can't create more than max_prepared_stmt_count statements (current value: 16382)"), true},
		{"mysql 1969 statement timeout", mysqlErr(1969, "Query execution was interrupted (max_statement_time exceeded)"), true},
		{"mysql 1062 duplicate is the data", mysqlErr(1062, "Duplicate entry"), false},
		{"mysql 1406 data too long is the data", mysqlErr(1406, "Data too long"), false},
		{"mysql 3819 check constraint is the data", mysqlErr(3819, "Check constraint violated"), false},
		{"mysql data error joined with a reset", errors.Join(mysqlErr(1406, "Data too long"), syscall.ECONNRESET), true},
		{"driver bad connection", fmt.Errorf("ledger: commit: %w", driver.ErrBadConn), true},
		{"driver invalid connection", mysql.ErrInvalidConn, true},

		{"connection refused", &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}, true},
		{"connection reset", fmt.Errorf("read: %w", syscall.ECONNRESET), true},
		{"dns", &net.DNSError{Err: "no such host", Name: "mysql"}, true},
		{"i/o timeout", fmt.Errorf("redis: %w", os.ErrDeadlineExceeded), true},
		{"deadline exceeded", fmt.Errorf("lock: %w", context.DeadlineExceeded), true},
		{"server hung up", io.ErrUnexpectedEOF, true},
		{"redis pool timeout", redis.ErrPoolTimeout, true},

		{"redis CLUSTERDOWN", fmt.Errorf("deduct: %w", redisReply("CLUSTERDOWN The cluster is down")), true},
		{"redis LOADING", redisReply("LOADING Redis is loading the dataset in memory"), true},
		{"redis READONLY", redisReply("READONLY You can't write against a read only replica."), true},
		{"redis READONLY inside a script", redisReply("ERR Error running script (call to f_1): @user_script:1: -READONLY You can't write against a read only replica."), true},
		{"redis MASTERDOWN", redisReply("MASTERDOWN Link with MASTER is down and replica-serve-stale-data is set to 'no'."), true},
		{"redis TRYAGAIN", redisReply("TRYAGAIN Multiple keys request during rehashing of slot"), true},
		{"redis MOVED after the redirects", redisReply("MOVED 3999 127.0.0.1:6381"), true},
		{"redis ASK after the redirects", redisReply("ASK 3999 127.0.0.1:6381"), true},
		{"redis OOM", redisReply("OOM command not allowed when used memory > 'maxmemory'."), true},
		{"redis max clients", redisReply("ERR max number of clients reached"), true},
		{"redis WRONGTYPE is the key", redisReply("WRONGTYPE Operation against a key holding the wrong kind of value"), false},
		{"redis script error is the script", redisReply("ERR Error running script (call to f_1): @user_script:3: bad argument"), false},
		{"redis BUSYKEY is the key", redisReply("BUSYKEY Target key name already exists."), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := IsOutage(tt.err); got != tt.want {
				t.Errorf("IsOutage(%v) = %v, want %v", tt.err, got, tt.want)
			}
		})
	}
}

func TestOutageMark(t *testing.T) {
	if Outage(nil) != nil {
		t.Error("Outage(nil) != nil")
	}
	base := mysqlErr(1062, "Duplicate entry")
	err := Outage(base)
	if !errors.Is(err, base) || err.Error() != base.Error() || MySQLNumber(err) != 1062 {
		t.Errorf("Outage hides its cause: %v", err)
	}
	if IsPermanent(err) {
		t.Error("an outage is permanent")
	}
}
