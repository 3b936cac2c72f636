package testenv

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/redis/go-redis/v9"
)

// Server is a server process of the test's own, for tests that kill or restart
// it: never the shared one, which other packages' tests use in parallel. Its
// port and data directory stay the same across restarts; it is killed when
// the test ends.
type Server struct {
	t     testing.TB
	port  int
	args  []string
	ready func(addr string) error
	mu    sync.Mutex
	cmd   *exec.Cmd
	out   strings.Builder
}

// RedisServer is a redis-server of the test's own, without persistence unless asked.
type RedisServer = Server

// MariaDB is a mariadbd of the test's own (root, no password). Commits are
// written to the log at once but synced once a second: a killed process
// loses nothing, only a machine crash would.
type MariaDB struct{ *Server }

func startServer(t testing.TB, port int, ready func(addr string) error, args ...string) *Server {
	t.Helper()
	s := &Server{t: t, port: port, args: args, ready: ready}
	s.Start()
	t.Cleanup(s.Kill)
	return s
}

// Addr is the server's host:port.
func (s *Server) Addr() string { return fmt.Sprintf("127.0.0.1:%d", s.port) }

// Start (re)starts the process and waits until it answers.
func (s *Server) Start() {
	s.t.Helper()
	s.mu.Lock()
	s.out.Reset()
	cmd := exec.Command(s.args[0], s.args[1:]...)
	cmd.Stdout, cmd.Stderr = &s.out, &s.out
	err := cmd.Start()
	if err == nil {
		s.cmd = cmd
	}
	s.mu.Unlock()
	if err == nil {
		err = waitFor(time.Minute, func() error { return s.ready(s.Addr()) })
	}
	if err != nil {
		s.Kill()
		s.t.Fatalf("testenv: %s on %s not ready: %v\n%s", s.args[0], s.Addr(), err, s.out.String())
	}
}

// Kill stops the server at once (SIGKILL). What it had not written to disk is gone.
func (s *Server) Kill() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd != nil {
		_ = s.cmd.Process.Kill()
		_ = s.cmd.Wait()
		s.cmd = nil
	}
}

// StartRedisServer starts redis-server on a spare port in a temporary directory.
func StartRedisServer(t testing.TB, extra ...string) *RedisServer {
	t.Helper()
	port := FreePort(t)
	return startServer(t, port, pingRedis, slices.Concat([]string{requireBinary(t, "redis-server"),
		"--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--dir", t.TempDir(),
		"--save", "", "--appendonly", "no", "--protected-mode", "no", "--loglevel", "warning",
	}, extra)...)
}

// StartRedisCluster starts a three-master Redis Cluster of the test's own and
// returns its node addresses.
func StartRedisCluster(t testing.TB) []string {
	t.Helper()
	cli := requireBinary(t, "redis-cli")
	args := []string{"--cluster", "create"}
	for range 3 {
		s := StartRedisServer(t, "--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf",
			"--cluster-port", strconv.Itoa(FreePort(t)), "--cluster-node-timeout", "5000")
		args = append(args, s.Addr())
	}
	addrs := args[2:]
	if out, err := exec.Command(cli, append(args, "--cluster-replicas", "0", "--cluster-yes")...).CombinedOutput(); err != nil {
		t.Fatalf("testenv: redis-cli --cluster create: %v\n%s", err, out)
	}
	for _, addr := range addrs {
		c := redis.NewClient(&redis.Options{Addr: addr})
		err := waitFor(20*time.Second, func() error {
			info, err := c.ClusterInfo(context.Background()).Result()
			if err == nil && !strings.Contains(info, "cluster_state:ok") {
				err = errors.New(info)
			}
			return err
		})
		c.Close()
		if err != nil {
			t.Fatalf("testenv: cluster node %s not ok: %v", addr, err)
		}
	}
	return addrs
}

// StartMariaDB initialises a data directory with mariadb-install-db and starts
// mariadbd on a spare port of 127.0.0.1 with innodb_flush_log_at_trx_commit=2.
func StartMariaDB(t testing.TB) *MariaDB {
	t.Helper()
	bin := requireBinary(t, "mariadbd", "mysqld")
	install := requireBinary(t, "mariadb-install-db", "mysql_install_db")
	port, dir := FreePort(t), t.TempDir()
	common := []string{"--no-defaults", "--datadir=" + filepath.Join(dir, "data"), "--skip-name-resolve"}
	if os.Geteuid() == 0 {
		common = append(common, "--user=root") // mariadbd refuses to run as root unless told to
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	initArgs := slices.Concat(common, []string{"--auth-root-authentication-method=normal", "--skip-test-db"})
	if out, err := exec.CommandContext(ctx, install, initArgs...).CombinedOutput(); err != nil {
		t.Fatalf("testenv: %s: %v\n%s", install, err, out)
	}
	return &MariaDB{startServer(t, port, func(addr string) error { return pingMySQL(rootAt(addr)) }, slices.Concat([]string{bin}, common, []string{
		"--port=" + strconv.Itoa(port), "--bind-address=127.0.0.1",
		"--socket=" + filepath.Join(dir, "mariadbd.sock"), "--pid-file=" + filepath.Join(dir, "mariadbd.pid"),
		"--skip-log-bin", "--innodb-buffer-pool-size=32M", "--innodb-log-file-size=16M",
		"--innodb-flush-log-at-trx-commit=2", "--max-connections=500",
	})...)}
}

// NewMySQL creates a fresh database on this server, migrated to the latest schema.
func (s *MariaDB) NewMySQL(t testing.TB) *MySQL {
	t.Helper()
	return newDatabase(t, rootAt(s.Addr()), true)
}

func rootAt(addr string) *mysql.Config {
	cfg := mysql.NewConfig()
	cfg.User, cfg.Net, cfg.Addr, cfg.ParseTime = "root", "tcp", addr, true
	return cfg
}
