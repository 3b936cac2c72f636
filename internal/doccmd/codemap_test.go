package doccmd

import (
	"bufio"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/quotaflow/billing/internal/testenv"
)

// maxPathFiles bounds the production files one batch touches from the
// worker's handler to the SQL: the README's target, and today's count. Lower it as the
// path shrinks, never raise it.
const maxPathFiles = 20

// The README's code map names exactly the files one lane batch touches, as
// measured: the worker package's TestOneBatch runs twice under coverage,
// once with its warm-up batch only, and a file counts when a statement of it
// ran more often with the measured batch.
func TestCodeMapIsTheMeasuredPath(t *testing.T) {
	measured := measurePath(t)
	listed := codeMap(t, "../../README.md")
	if len(measured) > maxPathFiles {
		t.Errorf("one batch touches %d files, more than %d:\n%s", len(measured), maxPathFiles, strings.Join(measured, "\n"))
	}
	if !slices.Equal(measured, listed) {
		t.Errorf("the README's code map lists\n%s\none batch touches\n%s", strings.Join(listed, "\n"), strings.Join(measured, "\n"))
	}
}

// measurePath returns the module-relative production files whose statements
// one batch ran, sorted.
func measurePath(t *testing.T) []string {
	module := modulePath(t)
	var runs [2]map[string]int64
	for i, warmupOnly := range []bool{true, false} {
		profile := filepath.Join(t.TempDir(), "cover.out")
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
		cmd := exec.CommandContext(ctx, testenv.GoTool(), "test", "-count=1", "-covermode=atomic",
			"-coverpkg="+module+"/internal/...", "-coverprofile="+profile, "-run", "^TestOneBatch$", "./internal/worker/")
		cmd.Dir = "../.."
		cmd.Env = os.Environ()
		if warmupOnly {
			cmd.Env = append(cmd.Env, "BILLING_CODEMAP_WARMUP_ONLY=1")
		}
		out, err := cmd.CombinedOutput()
		cancel()
		if err != nil {
			t.Fatalf("%s: %v\n%s", cmd, err, out)
		}
		runs[i] = blockCounts(t, profile)
	}
	var files []string
	for block, n := range runs[1] {
		if n > runs[0][block] {
			f, _, _ := strings.Cut(block, ":")
			files = append(files, strings.TrimPrefix(f, module+"/"))
		}
	}
	slices.Sort(files)
	return slices.Compact(files)
}

// blockCounts reads a text coverage profile: each block's count.
func blockCounts(t *testing.T, path string) map[string]int64 {
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]int64{}
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n")[1:] { // after "mode: atomic"
		f := strings.Fields(line) // file:start,end statements count
		n, err := strconv.ParseInt(f[len(f)-1], 10, 64)
		if err != nil {
			t.Fatalf("%s: %q: %v", path, line, err)
		}
		out[f[0]] += n
	}
	return out
}

func modulePath(t *testing.T) string {
	b, err := os.ReadFile("../../go.mod")
	if err != nil {
		t.Fatal(err)
	}
	first, _, _ := strings.Cut(string(b), "\n")
	return strings.TrimSpace(strings.TrimPrefix(first, "module"))
}

var codeSpan = regexp.MustCompile("`([^`]+)`")

// codeMap reads the files the README's section "One batch, file by file"
// lists: each line names a folder (`internal/deduct/`) and then its files
// (`apply.go`), sorted.
func codeMap(t *testing.T, readme string) []string {
	f, err := os.Open(readme)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var files []string
	in := false
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "#") {
			in = strings.Contains(line, "One batch, file by file")
			continue
		}
		if !in {
			continue
		}
		dir := ""
		for _, m := range codeSpan.FindAllStringSubmatch(line, -1) {
			switch s := m[1]; {
			case strings.HasSuffix(s, "/"):
				dir = s
			case strings.HasSuffix(s, ".go") && dir != "":
				files = append(files, dir+s)
			}
		}
	}
	if len(files) == 0 {
		t.Fatalf("%s: no section \"One batch, file by file\" listing files", readme)
	}
	slices.Sort(files)
	return files
}
