package failure

import (
	"database/sql"
	"database/sql/driver"
	"errors"
	"io"
	"net"
	"strings"
	"syscall"

	"github.com/go-sql-driver/mysql"
	"github.com/redis/go-redis/v9"
)

// An outage is a transient failure of a server, a network or a clock, not of
// the message that ran into it: retrying it never counts against the message.
// Errors are recognised by type, never by text, but Redis replies (a prefix).

// OutageError marks an error as an outage explicitly.
type OutageError struct {
	Err error
}

func (e *OutageError) Error() string { return e.Err.Error() }
func (e *OutageError) Unwrap() error { return e.Err }

// Outage implements the interface IsOutage honours.
func (e *OutageError) Outage() bool { return true }

// Outage marks err as an outage. A nil err stays nil.
func Outage(err error) error {
	if err == nil {
		return nil
	}
	return &OutageError{Err: err}
}

// IsOutage reports whether err, or anything it wraps, describes an outage: an
// Outage() bool method saying so, a MySQL number below, a broken connection,
// a Redis reply naming the server's state, a network error, or a timeout.
func IsOutage(err error) bool {
	if err == nil {
		return false
	}
	var o interface{ Outage() bool }
	if errors.As(err, &o) && o.Outage() {
		return true
	}
	if mysqlOutage(MySQLNumber(err)) {
		return true
	}
	var timeout interface{ Timeout() bool }
	if errors.As(err, &timeout) && timeout.Timeout() {
		return true // i/o timeouts and context.DeadlineExceeded both say so
	}
	var opErr *net.OpError
	var dnsErr *net.DNSError
	if errors.As(err, &opErr) || errors.As(err, &dnsErr) {
		return true
	}
	for _, target := range [...]error{
		syscall.ECONNREFUSED, syscall.ECONNRESET, syscall.ECONNABORTED, syscall.EPIPE,
		syscall.EHOSTUNREACH, syscall.ENETUNREACH, syscall.ETIMEDOUT,
		io.EOF, io.ErrUnexpectedEOF, net.ErrClosed, // a server hung up mid-reply
		driver.ErrBadConn, sql.ErrConnDone, mysql.ErrInvalidConn, mysql.ErrMalformPkt, mysql.ErrPktSync, mysql.ErrPktSyncMul,
		redis.ErrClosed, redis.ErrPoolTimeout, redis.ErrPoolExhausted,
	} {
		if errors.Is(err, target) {
			return true
		}
	}
	return redisOutage(err)
}

// MySQL and MariaDB error numbers, one list for every package. These describe
// the server (schema, mode, limits, locks), never a statement's values.
const (
	MySQLDiskFull                 = 1021 // ER_DISK_FULL
	MySQLTooManyConnections       = 1040 // ER_CON_COUNT_ERROR
	MySQLDBAccessDenied           = 1044 // ER_DBACCESS_DENIED_ERROR
	MySQLAccessDenied             = 1045 // ER_ACCESS_DENIED_ERROR
	MySQLNoDatabase               = 1046 // ER_NO_DB_ERROR
	MySQLUnknownCommand           = 1047 // ER_UNKNOWN_COM_ERROR: a Galera node not synced yet
	MySQLBadDatabase              = 1049 // ER_BAD_DB_ERROR
	MySQLServerShutdown           = 1053 // ER_SERVER_SHUTDOWN
	MySQLBadField                 = 1054 // ER_BAD_FIELD_ERROR: a column missing (schema behind)
	MySQLTableFull                = 1114 // ER_RECORD_FILE_FULL
	MySQLHostBlocked              = 1129 // ER_HOST_IS_BLOCKED
	MySQLHostNotPrivileged        = 1130 // ER_HOST_NOT_PRIVILEGED
	MySQLTableAccessDenied        = 1142 // ER_TABLEACCESS_DENIED_ERROR
	MySQLColumnAccessDenied       = 1143 // ER_COLUMNACCESS_DENIED_ERROR
	MySQLNoSuchTable              = 1146 // ER_NO_SUCH_TABLE: a table missing (schema behind, or renamed)
	MySQLUnknownStatement         = 1243 // ER_UNKNOWN_STMT_HANDLER: a prepared statement the server no longer has
	MySQLTooManyUserConnections   = 1203 // ER_TOO_MANY_USER_CONNECTIONS
	MySQLLockWaitTimeout          = 1205 // ER_LOCK_WAIT_TIMEOUT
	MySQLDeadlock                 = 1213 // ER_LOCK_DEADLOCK
	MySQLReadOnly                 = 1290 // ER_OPTION_PREVENTS_STATEMENT: --read-only, a demoted primary
	MySQLTooManyPrepared          = 1461 // ER_MAX_PREPARED_STMT_COUNT_REACHED: max_prepared_stmt_count, server-wide
	MySQLQueryInterrupted         = 1317 // ER_QUERY_INTERRUPTED: KILL QUERY
	MySQLNeedReprepare            = 1615 // ER_NEED_REPREPARE: the schema changed under a statement
	MySQLReadOnlyTransaction      = 1792 // ER_CANT_EXECUTE_IN_READ_ONLY_TRANSACTION
	MySQLReadOnlyMode             = 1836 // ER_READ_ONLY_MODE
	MySQLConnectionKilled         = 1927 // ER_CONNECTION_KILLED (MariaDB)
	MySQLStatementTimeout         = 1969 // ER_STATEMENT_TIMEOUT (MariaDB max_statement_time)
	MySQLQueryTimeout             = 3024 // ER_QUERY_TIMEOUT (MySQL max_execution_time)
	MySQLClientInteractionTimeout = 4031 // ER_CLIENT_INTERACTION_TIMEOUT (MySQL 8)
)

// These describe a statement's values: a duplicate key, or a value a column
// refuses.
const (
	MySQLNotNull         = 1048 // ER_BAD_NULL_ERROR
	MySQLDupEntry        = 1062 // ER_DUP_ENTRY
	MySQLOutOfRange      = 1264 // ER_WARN_DATA_OUT_OF_RANGE
	MySQLTruncated       = 1265 // WARN_DATA_TRUNCATED
	MySQLBadDatetime     = 1292 // ER_TRUNCATED_WRONG_VALUE
	MySQLIncorrectValue  = 1366 // ER_TRUNCATED_WRONG_VALUE_FOR_FIELD
	MySQLDataTooLong     = 1406 // ER_DATA_TOO_LONG
	MySQLValueOutOfRange = 1690 // ER_DATA_OUT_OF_RANGE: BIGINT overflow in an expression
	MySQLCheckMySQL      = 3819 // ER_CHECK_CONSTRAINT_VIOLATED (MySQL 8)
	MySQLCheckMariaDB    = 4025 // ER_CONSTRAINT_FAILED (MariaDB)
)

// MySQLNumber returns the number of the MySQL error err wraps, or 0.
func MySQLNumber(err error) uint16 {
	var me *mysql.MySQLError
	if errors.As(err, &me) {
		return me.Number
	}
	return 0
}

// mysqlOutage reports whether a MySQL error number describes the server
// (lasting deadlocks included: the ledger retried them already).
func mysqlOutage(n uint16) bool {
	switch n {
	case MySQLDiskFull, MySQLTooManyConnections, MySQLDBAccessDenied, MySQLAccessDenied, MySQLNoDatabase,
		MySQLUnknownCommand, MySQLBadDatabase, MySQLServerShutdown, MySQLBadField, MySQLTableFull, MySQLHostBlocked,
		MySQLHostNotPrivileged, MySQLTableAccessDenied, MySQLColumnAccessDenied, MySQLNoSuchTable, MySQLUnknownStatement,
		MySQLTooManyUserConnections, MySQLTooManyPrepared, MySQLLockWaitTimeout, MySQLDeadlock, MySQLReadOnly, MySQLQueryInterrupted,
		MySQLNeedReprepare, MySQLReadOnlyTransaction, MySQLReadOnlyMode, MySQLConnectionKilled,
		MySQLStatementTimeout, MySQLQueryTimeout, MySQLClientInteractionTimeout:
		return true
	}
	return false
}

// redisOutage reports a Redis reply naming the server's or cluster's state
// (MOVED and ASK arrive only once the client used up its redirects).
func redisOutage(err error) bool {
	var re redis.Error
	if !errors.As(err, &re) {
		return false
	}
	if redis.IsReadOnlyError(err) {
		return true // also "-READONLY" inside a script's error
	}
	msg := strings.TrimPrefix(re.Error(), "ERR ") // as redis.HasErrorPrefix: some servers add it
	for _, prefix := range [...]string{
		"CLUSTERDOWN ", "LOADING ", "MASTERDOWN ", "TRYAGAIN ", "MOVED ", "ASK ", "NOREPLICAS ",
		"BUSY ", "MISCONF ", "OOM ", "NOAUTH ", "WRONGPASS ", "NOPERM ", "max number of clients reached",
	} {
		if strings.HasPrefix(msg, prefix) {
			return true
		}
	}
	return false
}
