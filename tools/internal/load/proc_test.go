package load

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

func TestParseStat(t *testing.T) {
	tests := []struct {
		name    string
		line    string
		want    time.Duration
		wantErr bool
	}{
		{name: "plain", want: 1234 * clockTick,
			line: "3811 (mariadbd) S 1 3811 3811 0 -1 4194624 183720 0 12 0 1000 234 0 0 20 0 38 0 1618 1711222784 90233 18446744073709551615 1 1 0 0 0 0 0 4096 1 0 0 0 17 1 0 0 0 0 0"},
		{name: "name with spaces and parentheses", want: 7 * clockTick,
			line: "42 (a (b) c) R 1 42 42 0 -1 0 0 0 0 0 3 4 0 0 20 0 1 0 100 1000 10 0"},
		{name: "zero", want: 0,
			line: "7 (redis-server) S 1 7 7 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 100 1000 10 0\n"},
		{name: "large", want: 9_000_000_001 * clockTick,
			line: "7 (w) S 1 7 7 0 -1 0 0 0 0 0 9000000000 1 0 0 20 0 1 0 100 1000 10 0"},
		{name: "no command", line: "7 w S 1", wantErr: true},
		{name: "short", line: "7 (w) S 1 7 7 0", wantErr: true},
		{name: "not a number", line: "7 (w) S 1 7 7 0 -1 0 0 0 0 0 x 4 0 0", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parseStat(tt.line)
			if (err != nil) != tt.wantErr || got != tt.want {
				t.Fatalf("parseStat = %v, %v; want %v (error %v)", got, err, tt.want, tt.wantErr)
			}
		})
	}
}

func TestParseVmRSS(t *testing.T) {
	tests := []struct {
		name    string
		status  string
		want    int64
		wantErr bool
	}{
		{name: "status file", status: "Name:\tbilling-worker\nVmPeak:\t  900000 kB\nVmRSS:\t   51200 kB\nRssAnon:\t 40000 kB\n", want: 51200 * 1024},
		{name: "kernel thread", status: "Name:\tkthreadd\nState:\tS (sleeping)\n", wantErr: true},
		{name: "odd unit", status: "VmRSS:\t 12 MB\n", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parseVmRSS(tt.status)
			if (err != nil) != tt.wantErr || got != tt.want {
				t.Fatalf("parseVmRSS = %v, %v; want %v (error %v)", got, err, tt.want, tt.wantErr)
			}
		})
	}
}

func TestParseListeners(t *testing.T) {
	const table = `  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 0100007F:18EB 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 4537 1 0000000000000000 100 0 0 10 0
   1: 0100007F:0CEA 00000000:0000 0A 00000000:00000000 00:00000000 00000000   106        0 7183 1 0000000000000000 100 0 0 10 0
   2: 0100007F:0CEA 0100007F:9C40 01 00000000:00000000 00:00000000 00000000   106        0 9999 1 0000000000000000 20 4 30 10 -1
   3: 00000000:0CEA 00000000:0000 0A 00000000:00000000 00:00000000 00000000   106        0 7184 1 0000000000000000 100 0 0 10 0
`
	got := parseListeners(table, 3306)
	if strings.Join(got, ",") != "7183,7184" {
		t.Fatalf("listeners on 3306 = %v, want 7183,7184 (not the established 9999)", got)
	}
	if got := parseListeners(table, 6379); len(got) != 1 || got[0] != "4537" {
		t.Fatalf("listeners on 6379 = %v", got)
	}
	if got := parseListeners(table, 1); len(got) != 0 {
		t.Fatalf("listeners on 1 = %v", got)
	}
}

// serverPID picks, among processes of one name, the one holding the
// listening socket; a fake /proc has two redis-servers, one on 6379.
func TestServerPID(t *testing.T) {
	proc := t.TempDir()
	write := func(path, content string) {
		t.Helper()
		if err := os.MkdirAll(filepath.Dir(filepath.Join(proc, path)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(proc, path), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("net/tcp", "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n"+
		"   0: 0100007F:18EB 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 555 1 0 100 0 0 10 0\n")
	for pid, sock := range map[int]string{10: "socket:[444]", 20: "socket:[555]"} {
		write(strconv.Itoa(pid)+"/comm", "redis-server\n")
		if err := os.MkdirAll(filepath.Join(proc, strconv.Itoa(pid), "fd"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(sock, filepath.Join(proc, strconv.Itoa(pid), "fd", "7")); err != nil {
			t.Fatal(err)
		}
	}
	write("30/comm", "mariadbd\n")
	if pid, err := serverPID(proc, "127.0.0.1:6379", "redis-server"); err != nil || pid != 20 {
		t.Fatalf("redis on 6379: pid %d, %v; want 20", pid, err)
	}
	if _, err := serverPID(proc, "127.0.0.1:6380", "redis-server"); err == nil {
		t.Fatal("two redis-servers, none on 6380: want an error")
	}
	// The only mariadbd, socket tables saying nothing of 3306: taken by name.
	if pid, err := serverPID(proc, "localhost:3306", "mariadbd", "mysqld"); err != nil || pid != 30 {
		t.Fatalf("mariadbd: pid %d, %v; want 30", pid, err)
	}
	if _, err := serverPID(proc, "10.1.2.3:3306", "mariadbd"); err == nil {
		t.Fatal("a remote server: want errNotLocal")
	}
}

func TestParseCPULine(t *testing.T) {
	tests := []struct {
		line    string
		want    time.Duration
		wantErr bool
	}{
		{line: "cpu  139693 0 41968 167806 1090 0 4568 165 0 0", want: (139693 + 41968 + 4568 + 165) * clockTick},
		{line: "cpu  1 2 3 4 5 6 7 8", want: (1 + 2 + 3 + 6 + 7 + 8) * clockTick},
		{line: "cpu0 1 2 3 4 5 6 7 8 0 0", wantErr: true},
		{line: "cpu 1 2 3", wantErr: true},
		{line: "cpu 1 2 x 4 5 6 7 8", wantErr: true},
	}
	for _, tt := range tests {
		got, err := parseCPULine(tt.line)
		if (err != nil) != tt.wantErr || got != tt.want {
			t.Errorf("parseCPULine(%q) = %v, %v; want %v (error %v)", tt.line, got, err, tt.want, tt.wantErr)
		}
	}
}
