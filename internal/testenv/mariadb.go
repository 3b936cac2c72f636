package testenv

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/quotaflow/billing/internal/migrate"
)

// MariaDB is a mariadbd process of the test's own, for tests that kill or
// restart the database: never the shared server, which other packages' tests
// use in parallel. Its data directory survives Kill and Start (crash recovery
// runs on restart); it is removed when the test ends.
type MariaDB struct {
	t    testing.TB
	port int
	dir  string
	args []string
	mu   sync.Mutex
	cmd  *exec.Cmd
}

// StartMariaDB initialises a data directory with mariadb-install-db and starts
// mariadbd on a spare port of 127.0.0.1 (root, no password). It is killed when
// the test ends. Commits are written to the log at once but synced once a
// second (innodb_flush_log_at_trx_commit=2): a killed process loses nothing,
// only a machine crash would.
func StartMariaDB(t testing.TB) *MariaDB {
	t.Helper()
	bin := requireMariaDBBinary(t, "mariadbd", "mysqld")
	install := requireMariaDBBinary(t, "mariadb-install-db", "mysql_install_db")
	s := &MariaDB{t: t, port: FreePort(t), dir: t.TempDir()}
	data := filepath.Join(s.dir, "data")
	user := []string{}
	if os.Geteuid() == 0 {
		user = []string{"--user=root"} // mariadbd refuses to run as root unless told to
	}
	initArgs := append([]string{"--no-defaults", "--datadir=" + data, "--auth-root-authentication-method=normal",
		"--skip-test-db", "--skip-name-resolve"}, user...)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if out, err := exec.CommandContext(ctx, install, initArgs...).CombinedOutput(); err != nil {
		t.Fatalf("testenv: %s: %v\n%s", install, err, out)
	}
	s.args = append([]string{bin, "--no-defaults", "--datadir=" + data,
		"--port=" + strconv.Itoa(s.port), "--bind-address=127.0.0.1",
		"--socket=" + filepath.Join(s.dir, "mariadbd.sock"), "--pid-file=" + filepath.Join(s.dir, "mariadbd.pid"),
		"--log-error=" + s.logPath(), "--skip-name-resolve", "--skip-log-bin",
		"--innodb-buffer-pool-size=32M", "--innodb-log-file-size=16M", "--innodb-flush-log-at-trx-commit=2",
		"--max-connections=500",
	}, user...)
	s.Start()
	t.Cleanup(s.Kill)
	return s
}

// Addr is the server's host:port; it stays the same across restarts.
func (s *MariaDB) Addr() string { return fmt.Sprintf("127.0.0.1:%d", s.port) }

// Log returns the server's error log (for a failing test's output).
func (s *MariaDB) Log() string {
	b, err := os.ReadFile(s.logPath())
	if err != nil {
		return err.Error()
	}
	return string(b)
}

func (s *MariaDB) logPath() string { return filepath.Join(s.dir, "mariadbd.err") }

// Start (re)starts the process and waits until it answers a ping.
func (s *MariaDB) Start() {
	s.t.Helper()
	s.mu.Lock()
	s.cmd = exec.Command(s.args[0], s.args[1:]...)
	err := s.cmd.Start()
	s.mu.Unlock()
	if err != nil {
		s.t.Fatalf("testenv: start mariadbd: %v", err)
	}
	if err := pingMySQLFor(s.admin(), 60*time.Second); err != nil {
		s.Kill()
		s.t.Fatalf("testenv: mariadbd on %s not ready: %v\n%s", s.Addr(), err, s.Log())
	}
}

// Kill stops the server at once (SIGKILL). Committed transactions survive;
// clients see their connections reset.
func (s *MariaDB) Kill() { s.signal(syscall.SIGKILL) }

// Stop shuts the server down cleanly (SIGTERM) and waits for it.
func (s *MariaDB) Stop() { s.signal(syscall.SIGTERM) }

func (s *MariaDB) signal(sig syscall.Signal) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil || s.cmd.Process == nil {
		return
	}
	_ = s.cmd.Process.Signal(sig)
	_ = s.cmd.Wait()
	s.cmd = nil
}

// NewMySQL creates a fresh database on this server, migrated to the latest
// schema. The database lives as long as the server's data directory.
func (s *MariaDB) NewMySQL(t testing.TB) *MySQL {
	t.Helper()
	name := UniqueName(t, "billing")
	if len(name) > 64 {
		name = name[len(name)-64:]
	}
	admin, err := sql.Open("mysql", s.admin().FormatDSN())
	if err != nil {
		t.Fatalf("testenv: %v", err)
	}
	defer admin.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := admin.ExecContext(ctx, "CREATE DATABASE `"+name+"` CHARACTER SET utf8mb4 COLLATE utf8mb4_bin"); err != nil {
		t.Fatalf("testenv: create database: %v", err)
	}
	cfg := s.admin()
	cfg.DBName = name
	dsn := cfg.FormatDSN()
	m, err := migrate.Open(dsn)
	if err != nil {
		t.Fatalf("testenv: %v", err)
	}
	defer m.Close()
	if _, err := m.Up(); err != nil {
		t.Fatalf("testenv: %v", err)
	}
	gdb, sqlDB := openGorm(t, name, dsn, 16)
	t.Cleanup(func() { sqlDB.Close() })
	return &MySQL{Name: name, DSN: dsn, DB: gdb, SQL: sqlDB}
}

func (s *MariaDB) admin() *mysql.Config {
	cfg := mysql.NewConfig()
	cfg.User = "root"
	cfg.Net = "tcp"
	cfg.Addr = s.Addr()
	cfg.ParseTime = true
	return cfg
}

func pingMySQLFor(cfg *mysql.Config, within time.Duration) error {
	deadline := time.Now().Add(within)
	for {
		err := pingMySQL(cfg)
		if err == nil || time.Now().After(deadline) {
			return err
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// requireMariaDBBinary finds the first of names on PATH or in /usr/sbin (where
// Debian puts mariadbd, outside a normal user's PATH).
func requireMariaDBBinary(t testing.TB, names ...string) string {
	t.Helper()
	for _, n := range names {
		if bin, err := exec.LookPath(n); err == nil {
			return bin
		}
		if bin := filepath.Join("/usr/sbin", n); isExecutable(bin) {
			return bin
		}
	}
	return requireBinary(t, names[0]) // skips or fails, loudly
}

func isExecutable(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && !fi.IsDir() && fi.Mode()&0o111 != 0
}
