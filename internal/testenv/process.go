package testenv

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// RedisServer is a redis-server process of the test's own, for tests that
// stop, kill or restart Redis: never the shared one, which other packages'
// tests use in parallel.
type RedisServer struct {
	t    testing.TB
	port int
	args []string
	mu   sync.Mutex
	cmd  *exec.Cmd
	out  strings.Builder
}

// StartRedisServer starts redis-server without persistence on a spare port in
// a temporary directory; it is killed when the test ends.
func StartRedisServer(t testing.TB, extra ...string) *RedisServer {
	t.Helper()
	bin := requireBinary(t, "redis-server")
	s := &RedisServer{t: t, port: FreePort(t)}
	s.args = append([]string{bin,
		"--port", strconv.Itoa(s.port), "--bind", "127.0.0.1", "--dir", t.TempDir(),
		"--save", "", "--appendonly", "no", "--protected-mode", "no", "--loglevel", "warning",
	}, extra...)
	s.Start()
	t.Cleanup(s.Kill)
	return s
}

// Addr is the server's host:port; it stays the same across restarts.
func (s *RedisServer) Addr() string { return fmt.Sprintf("127.0.0.1:%d", s.port) }

// Start (re)starts the process and waits until it answers PING.
func (s *RedisServer) Start() {
	s.t.Helper()
	s.mu.Lock()
	s.out.Reset()
	s.cmd = exec.Command(s.args[0], s.args[1:]...)
	s.cmd.Stdout, s.cmd.Stderr = &s.out, &s.out
	err := s.cmd.Start()
	s.mu.Unlock()
	if err != nil {
		s.t.Fatalf("testenv: start redis-server: %v", err)
	}
	if err := waitPing(s.Addr(), 10*time.Second); err != nil {
		s.Kill()
		s.t.Fatalf("testenv: redis-server on %s not ready: %v\n%s", s.Addr(), err, s.out.String())
	}
}

// Kill stops the server at once (SIGKILL): its data is gone.
func (s *RedisServer) Kill() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil || s.cmd.Process == nil {
		return
	}
	_ = s.cmd.Process.Kill()
	_ = s.cmd.Wait()
	s.cmd = nil
}

func waitPing(addr string, within time.Duration) error {
	c := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1})
	defer c.Close()
	deadline := time.Now().Add(within)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		err := c.Ping(ctx).Err()
		cancel()
		if err == nil || time.Now().After(deadline) {
			return err
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// StartRedisCluster starts a three-master Redis Cluster of the test's own and
// returns its node addresses.
func StartRedisCluster(t testing.TB) []string {
	t.Helper()
	cli := requireBinary(t, "redis-cli")
	var addrs []string
	for range 3 {
		s := StartRedisServer(t, "--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf",
			"--cluster-port", strconv.Itoa(FreePort(t)), "--cluster-node-timeout", "5000")
		addrs = append(addrs, s.Addr())
	}
	args := append([]string{"--cluster", "create"}, addrs...)
	args = append(args, "--cluster-replicas", "0", "--cluster-yes")
	if out, err := exec.Command(cli, args...).CombinedOutput(); err != nil {
		t.Fatalf("testenv: redis-cli --cluster create: %v\n%s", err, out)
	}
	deadline := time.Now().Add(20 * time.Second)
	for _, addr := range addrs {
		c := redis.NewClient(&redis.Options{Addr: addr})
		for {
			info, err := c.ClusterInfo(context.Background()).Result()
			if err == nil && strings.Contains(info, "cluster_state:ok") {
				break
			}
			if time.Now().After(deadline) {
				c.Close()
				t.Fatalf("testenv: cluster node %s not ok: %v %s", addr, err, info)
			}
			time.Sleep(50 * time.Millisecond)
		}
		c.Close()
	}
	return addrs
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

func requireBinary(t testing.TB, name string) string {
	t.Helper()
	bin, err := exec.LookPath(name)
	if err != nil {
		if os.Getenv(RequireEnv) == "1" {
			t.Fatalf("testenv: %s not on PATH: %v", name, err)
		}
		t.Skipf("INTEGRATION TEST NOT RUN: %s not on PATH: %v", name, err)
	}
	return bin
}
