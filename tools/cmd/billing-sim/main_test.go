package main

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

func env(kv map[string]string) func(string) string {
	return func(k string) string { return kv[k] }
}

func TestDispatch(t *testing.T) {
	quiet := env(map[string]string{"LOG_LEVEL": "error"})
	tests := []struct {
		name string
		args []string
		code int
	}{
		{"no command", nil, 2},
		{"unknown command", []string{"simulate"}, 2},
		{"demo with a bad flag", []string{"demo", "--events", "lots"}, 2},
		{"produce without brokers", []string{"produce"}, 2},
		{"produce with a stray argument", []string{"produce", "--brokers", "127.0.0.1:1", "extra"}, 2},
		{"bench with a bad flag", []string{"bench", "--callers", "many"}, 2},
		{"bench with a bad output", []string{"bench", "--output", "bench.json"}, 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out, errOut bytes.Buffer
			if code := run(context.Background(), tt.args, &out, &errOut, quiet); code != tt.code {
				t.Fatalf("run(%q) = %d, want %d (stderr %q)", tt.args, code, tt.code, errOut.String())
			}
		})
	}
	var out bytes.Buffer
	if code := run(context.Background(), []string{"help"}, &out, &out, quiet); code != 0 || !bytes.Contains(out.Bytes(), []byte("billing-sim produce")) {
		t.Fatalf("help: %d, %q", code, out.String())
	}
}

// Every command: --help prints its usage once to stdout and exits 0,
// --version prints the build, a bad flag and a bad environment exit 2 with
// the problem on stderr.
func TestCommandLine(t *testing.T) {
	for _, cmd := range [][]string{{}, {"produce"}, {"bench"}, {"demo"}, {"load"}} {
		name := strings.Join(cmd, " ")
		exec := func(e map[string]string, args ...string) (int, string, string) {
			var stdout, stderr bytes.Buffer
			code := run(context.Background(), append(append([]string{}, cmd...), args...), &stdout, &stderr, env(e))
			return code, stdout.String(), stderr.String()
		}
		t.Run("help "+name, func(t *testing.T) {
			code, out, errOut := exec(nil, "--help")
			usage := out
			if code != 0 || !strings.HasPrefix(usage, strings.TrimSpace("billing-sim "+name)) {
				t.Fatalf("exit %d\nstdout: %s\nstderr: %s", code, out, errOut)
			}
			if first := strings.SplitN(usage, "\n", 2)[0]; strings.Count(usage, first) != 1 {
				t.Fatalf("usage printed more than once:\n%s", usage)
			}
		})
		t.Run("version "+name, func(t *testing.T) {
			code, out, errOut := exec(nil, "--version")
			if code != 0 || !strings.HasPrefix(out, "billing-sim version ") || errOut != "" {
				t.Fatalf("exit %d\nstdout: %s\nstderr: %s", code, out, errOut)
			}
		})
		t.Run("bad flag "+name, func(t *testing.T) {
			if code, out, errOut := exec(nil, "--nope"); code != 2 || out != "" || !strings.Contains(errOut, "-nope") {
				t.Fatalf("exit %d\nstdout: %s\nstderr: %s", code, out, errOut)
			}
		})
		if name == "" {
			continue
		}
		t.Run("bad environment "+name, func(t *testing.T) {
			code, out, errOut := exec(map[string]string{"LOCK_TTL": "soon"})
			if code != 2 || out != "" || !strings.Contains(errOut, "LOCK_TTL") || !strings.Contains(errOut, "soon") {
				t.Fatalf("exit %d\nstdout: %s\nstderr: %s", code, out, errOut)
			}
		})
	}
}

func TestRateFlag(t *testing.T) {
	tests := []struct {
		in      string
		want    float64
		wantErr bool
	}{
		{"500", 500, false}, {"500/s", 500, false}, {"0", 0, false}, {"2.5/s", 2.5, false},
		{"-1", 0, true}, {"fast", 0, true}, {"10/m", 0, true},
	}
	for _, tt := range tests {
		var r rateFlag
		err := r.Set(tt.in)
		if (err != nil) != tt.wantErr || (!tt.wantErr && float64(r) != tt.want) {
			t.Errorf("Set(%q) = %v, %v; want %v (error %v)", tt.in, float64(r), err, tt.want, tt.wantErr)
		}
	}
}

func TestSkewFlags(t *testing.T) {
	tests := []struct {
		s       skewFlags
		want    string
		wantErr bool
	}{
		{skewFlags{hot: 0.2}, "hot:0.2", false},
		{skewFlags{}, "uniform", false},
		{skewFlags{hot: 0.2, skew: "zipf:1.1"}, "zipf:1.1", false},
		{skewFlags{hot: 2}, "", true},
		{skewFlags{skew: "zipf:0.9"}, "", true},
	}
	for _, tt := range tests {
		got, err := tt.s.value()
		if (err != nil) != tt.wantErr || (!tt.wantErr && got.String() != tt.want) {
			t.Errorf("%+v -> %v, %v; want %s (error %v)", tt.s, got, err, tt.want, tt.wantErr)
		}
	}
}
