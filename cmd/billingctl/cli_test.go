package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

// Every command: --help prints its usage once to stdout and exits 0,
// --version prints the build, a bad flag and a bad environment exit 2 with
// the problem on stderr. None of these dials a service.
func TestCommandLine(t *testing.T) {
	commands := [][]string{{}, {"migrate"}, {"quota"}, {"quota", "grant"}, {"quota", "show"}, {"quota", "shards"}, {"quota", "plan"}, {"quota", "plan", "ls"}, {"quota", "plan", "cancel"}, {"dlq"}, {"dlq", "ls"}, {"dlq", "replay"}}
	valid := map[string][]string{ // flags that pass validation, so only the environment is wrong
		"migrate": {"--status"}, "quota grant": {"--merchant", "m-1", "--amount", "1", "--id", "g-1"},
		"quota show": {"--merchant", "m-1"}, "quota shards": {"--merchant", "m-1", "--shards", "8"},
		"quota plan": {"--merchant", "m-1", "--amount", "1", "--every", "1mo"}, "quota plan ls": nil, "quota plan cancel": {"--merchant", "m-1"}, "dlq ls": nil, "dlq replay": {"--dry-run"},
	}
	badEnv := map[string]string{"LOCK_TTL": "soon", "KAFKA_BROKERS": "127.0.0.1:1"}
	for _, cmd := range commands {
		name := strings.Join(cmd, " ")
		exec := func(env map[string]string, args ...string) (int, string, string) {
			var stdout, stderr bytes.Buffer
			code := run(context.Background(), append(append([]string{}, cmd...), args...), &stdout, &stderr, func(k string) string { return env[k] })
			return code, stdout.String(), stderr.String()
		}
		t.Run("help "+name, func(t *testing.T) {
			code, out, errOut := exec(nil, "--help")
			head := "billingctl"
			if name != "" {
				head = "billingctl " + name + ":"
			}
			if code != 0 || strings.Count(out, head) < 1 || errOut != "" {
				t.Fatalf("exit %d\nstdout: %s\nstderr: %s", code, out, errOut)
			}
			if first := strings.SplitN(out, "\n", 2)[0]; strings.Count(out, first) != 1 {
				t.Fatalf("usage printed more than once:\n%s", out)
			}
		})
		t.Run("version "+name, func(t *testing.T) {
			if code, out, errOut := exec(nil, "--version"); code != 0 || !strings.HasPrefix(out, "billingctl version ") || errOut != "" {
				t.Fatalf("exit %d\nstdout: %s\nstderr: %s", code, out, errOut)
			}
		})
		t.Run("bad flag "+name, func(t *testing.T) {
			code, out, errOut := exec(nil, "--nope")
			if code != 2 || out != "" || !strings.Contains(errOut, "-nope") || !strings.Contains(errOut, "--help") {
				t.Fatalf("exit %d\nstdout: %s\nstderr: %s", code, out, errOut)
			}
		})
		args, leaf := valid[name]
		if !leaf {
			continue
		}
		t.Run("bad environment "+name, func(t *testing.T) {
			code, out, errOut := exec(badEnv, args...)
			if code != 2 || out != "" || !strings.Contains(errOut, "LOCK_TTL") || !strings.Contains(errOut, "soon") {
				t.Fatalf("exit %d\nstdout: %s\nstderr: %s", code, out, errOut)
			}
		})
	}
}
