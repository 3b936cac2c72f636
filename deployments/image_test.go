package deployments_test

import (
	"bytes"
	"encoding/json"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/moby/patternmatcher"
	"github.com/moby/patternmatcher/ignorefile"
)

// stage is one FROM of a Dockerfile, its instructions with continuations joined.
type stage struct {
	from, name string
	lines      []string
}

// image is what the manifests need to know of the runtime image.
type image struct {
	builder stage
	runtime stage
	binDir  string   // where the programs are
	cmd     []string // default command (exec form)
	user    string
}

var argRef = regexp.MustCompile(`\$\{?([A-Za-z_][A-Za-z0-9_]*)\}?`)

// parseDockerfile reads deployments/Dockerfile: the first stage builds, the
// last one runs.
func parseDockerfile(t *testing.T) image {
	t.Helper()
	args := map[string]string{}
	var stages []stage
	var logical []string
	var cur strings.Builder
	for _, line := range strings.Split(string(readFile(t, "Dockerfile")), "\n") {
		trimmed := strings.TrimSpace(line)
		if strings.HasPrefix(trimmed, "#") || (trimmed == "" && cur.Len() == 0) {
			continue
		}
		if cont, ok := strings.CutSuffix(trimmed, `\`); ok {
			cur.WriteString(cont + " ")
			continue
		}
		cur.WriteString(trimmed)
		logical = append(logical, cur.String())
		cur.Reset()
	}
	for _, l := range logical {
		instr, rest, _ := strings.Cut(l, " ")
		switch strings.ToUpper(instr) {
		case "ARG":
			if len(stages) == 0 {
				name, def, _ := strings.Cut(rest, "=")
				args[name] = def
			}
		case "FROM":
			f := strings.Fields(rest)
			var s stage
			for _, w := range f {
				if !strings.HasPrefix(w, "--") {
					s.from = argRef.ReplaceAllStringFunc(w, func(ref string) string { return args[argRef.FindStringSubmatch(ref)[1]] })
					break
				}
			}
			if len(f) >= 2 && strings.EqualFold(f[len(f)-2], "AS") {
				s.name = f[len(f)-1]
			}
			stages = append(stages, s)
		}
		if len(stages) > 0 {
			stages[len(stages)-1].lines = append(stages[len(stages)-1].lines, l)
		}
	}
	if len(stages) < 2 {
		t.Fatalf("Dockerfile: %d stage(s), want a builder and a runtime stage", len(stages))
	}
	img := image{builder: stages[0], runtime: stages[len(stages)-1]}
	for _, l := range img.runtime.lines {
		instr, rest, _ := strings.Cut(l, " ")
		switch strings.ToUpper(instr) {
		case "COPY":
			if f := strings.Fields(rest); strings.HasPrefix(f[0], "--from=") {
				img.binDir = strings.TrimSuffix(f[len(f)-1], "/")
			}
		case "CMD":
			if err := json.Unmarshal([]byte(rest), &img.cmd); err != nil {
				t.Errorf("Dockerfile: CMD %s is not the exec form: %v", rest, err)
			}
		case "USER":
			img.user = rest
		}
	}
	return img
}

func TestDockerfile(t *testing.T) {
	img := parseDockerfile(t)
	if want := "golang:" + goMinor(t); img.builder.from != want {
		t.Errorf("builder FROM %q, want %q (the go directive of go.mod)", img.builder.from, want)
	}
	build := ""
	for _, l := range img.builder.lines {
		if strings.Contains(l, "go build") {
			build = l
		}
	}
	if build == "" {
		t.Fatal("the builder stage runs no go build")
	}
	builder := strings.Join(img.builder.lines, "\n")
	for _, want := range []string{`-s -w`, "--mount=type=cache,target=/go/pkg/mod"} {
		if !strings.Contains(build, want) {
			t.Errorf("the go build line lacks %s: %s", want, build)
		}
	}
	builds := goCommands(build, "build")
	for _, b := range builds {
		for _, want := range []string{"-trimpath", "-ldflags"} {
			if !strings.Contains(b.args, want) {
				t.Errorf("a go build lacks %s: %s", want, b.args)
			}
		}
	}
	checkBuildIdentity(t, img, build)
	if !strings.Contains(builder, "CGO_ENABLED=0") {
		t.Error("the builder does not set CGO_ENABLED=0: the binaries would need libc")
	}
	for p, module := range programs(t) {
		if !slices.ContainsFunc(builds, func(b goCommand) bool {
			return b.module == module && (strings.Contains(b.args, "./cmd/...") || strings.Contains(b.args, "./cmd/"+p))
		}) {
			t.Errorf("the image does not build %s (in the module %s)", p, module)
		}
	}
	var downloads []goCommand
	for _, l := range img.builder.lines {
		downloads = append(downloads, goCommands(l, "mod download")...)
	}
	for _, module := range modules {
		if !slices.ContainsFunc(downloads, func(d goCommand) bool { return d.module == module }) {
			t.Errorf("the builder downloads the dependencies of the module %s in no layer of their own", module)
		}
	}

	rt := img.runtime.from
	if rt != "scratch" && !(strings.HasPrefix(rt, "gcr.io/distroless/static") && strings.Contains(rt, ":nonroot")) {
		t.Errorf("runtime FROM %q: want distroless static :nonroot or scratch", rt)
	}
	uid, _, _ := strings.Cut(img.user, ":")
	if n, err := strconv.Atoi(uid); err != nil || n == 0 {
		t.Errorf("runtime USER %q: want a numeric non-root uid (runAsNonRoot can only verify a number)", img.user)
	}
	if img.binDir == "" {
		t.Error("the runtime stage copies no binaries from the builder")
	}
	if len(img.cmd) == 0 || programs(t)[filepath.Base(img.cmd[0])] == "" || filepath.Dir(img.cmd[0]) != img.binDir {
		t.Errorf("CMD %q is not a program in %s", img.cmd, img.binDir)
	}
}

// goCommand is one go command of a RUN line.
type goCommand struct {
	module string // the directory it runs in: -C's, else "."
	args   string // after the subcommand
}

// goCommands are the commands "go <sub>" of a RUN line (commands joined by &&).
func goCommands(run, sub string) []goCommand {
	var out []goCommand
	for _, c := range strings.Split(run, "&&") {
		_, args, ok := strings.Cut(c, "go "+sub)
		if !ok {
			continue
		}
		cmd := goCommand{module: ".", args: strings.TrimSpace(args)}
		if dir, ok := strings.CutPrefix(cmd.args, "-C "); ok {
			cmd.module, cmd.args, _ = strings.Cut(dir, " ")
		}
		out = append(out, cmd)
	}
	return out
}

// .dockerignore keeps the repository's history and clutter out of the build
// context and lets in everything the build needs.
func TestDockerignore(t *testing.T) {
	patterns, err := ignorefile.ReadAll(bytes.NewReader(readFile(t, repoPath(".dockerignore"))))
	if err != nil {
		t.Fatal(err)
	}
	pm, err := patternmatcher.New(patterns)
	if err != nil {
		t.Fatal(err)
	}
	ignored := func(name string) bool {
		ok, err := pm.MatchesOrParentMatches(filepath.ToSlash(name))
		if err != nil {
			t.Fatal(err)
		}
		return ok
	}
	for _, name := range []string{".git", "deployments/compose.yaml"} {
		if !ignored(name) {
			t.Errorf(".dockerignore lets %s into the build context", name)
		}
	}
	needed := []string{"go.mod", "go.sum", "tools/go.mod", "tools/go.sum"}
	for _, dir := range []string{"cmd", "internal", "migrations", "tools"} {
		err := filepath.WalkDir(repoPath(dir), func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if d.IsDir() && d.Name() == "testdata" {
				return filepath.SkipDir
			}
			if !d.IsDir() && !strings.HasSuffix(p, "_test.go") {
				rel, _ := filepath.Rel("..", p)
				needed = append(needed, rel)
			}
			return nil
		})
		if err != nil && !os.IsNotExist(err) {
			t.Fatal(err)
		}
	}
	for _, name := range needed {
		if ignored(name) {
			t.Errorf(".dockerignore leaves out %s, which the build needs", name)
		}
	}
}

// buildinfoVar matches a package-level string variable of internal/buildinfo.
var buildinfoVar = regexp.MustCompile(`(?m)^\s+(Version|Commit|Date)\s+string`)

// The image says which build it is: the linker sets buildinfo's variables
// (they exist there) from build arguments, and the runtime stage carries the
// same values as OCI labels.
func checkBuildIdentity(t *testing.T, img image, build string) {
	t.Helper()
	const pkg = "github.com/quotaflow/billing/internal/buildinfo"
	src := string(readFile(t, repoPath("internal", "buildinfo", "buildinfo.go")))
	labels := strings.Join(img.runtime.lines, "\n")
	for v, label := range map[string]string{"Version": "org.opencontainers.image.version", "Commit": "org.opencontainers.image.revision", "Date": "org.opencontainers.image.created"} {
		if !slices.ContainsFunc(buildinfoVar.FindAllStringSubmatch(src, -1), func(m []string) bool { return m[1] == v }) {
			t.Errorf("internal/buildinfo declares no string variable %s", v)
		}
		arg := strings.ToUpper(v)
		if want := "-X " + pkg + "." + v + "=${" + arg + "}"; !strings.Contains(build, want) {
			t.Errorf("the go build line lacks %s", want)
		}
		if want := label + `="${` + arg + `}"`; !strings.Contains(labels, want) {
			t.Errorf("the runtime stage lacks LABEL %s", want)
		}
		for _, st := range []stage{img.builder, img.runtime} {
			if !slices.ContainsFunc(st.lines, func(l string) bool { return strings.HasPrefix(l, "ARG ") && strings.Contains(l, arg+"=") }) {
				t.Errorf("stage FROM %s declares no ARG %s (an ARG is scoped to its stage)", st.from, arg)
			}
		}
	}
	for _, label := range []string{"org.opencontainers.image.source", "org.opencontainers.image.title"} {
		if !strings.Contains(labels, label+"=") {
			t.Errorf("the runtime stage lacks LABEL %s", label)
		}
	}
}
