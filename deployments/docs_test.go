package deployments_test

import (
	"bufio"
	"context"
	"database/sql"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/cli"
	"helm.sh/helm/v3/pkg/cli/values"
	"helm.sh/helm/v3/pkg/getter"
	"helm.sh/helm/v3/pkg/lint"
	"helm.sh/helm/v3/pkg/lint/support"

	"github.com/quotaflow/billing/internal/doccmd"
	"github.com/quotaflow/billing/internal/testenv"
)

var deploymentDoc = repoPath("docs", "deployment.md")

// docBlocks are the lines of the fenced blocks of a Markdown file, by
// language, with backslash continuations joined.
func docBlocks(t *testing.T, name string) map[string][]string {
	t.Helper()
	out := map[string][]string{}
	lang, fenced, pending := "", false, ""
	sc := bufio.NewScanner(strings.NewReader(string(readFile(t, name))))
	for sc.Scan() {
		line := sc.Text()
		if l, ok := strings.CutPrefix(strings.TrimSpace(line), "```"); ok {
			fenced, lang = !fenced, strings.TrimSpace(l)
			continue
		}
		if !fenced || strings.TrimSpace(line) == "" {
			continue
		}
		if s, ok := strings.CutSuffix(line, `\`); ok {
			pending += s
			continue
		}
		out[lang] = append(out[lang], strings.Join(strings.Fields(pending+line), " "))
		pending = ""
	}
	return out
}

// Every command of docs/deployment.md runs here: its SQL on the local server,
// then, as the user it makes, the documented billingctl commands and the
// programs' own work (a grant, a reconciler run); its helm commands through
// Helm's Go API as the helm CLI runs them; its Compose commands against
// compose.yaml (parsed: this test has no Docker daemon). A shell line of any
// other tool fails the test: add a way to run it.
func TestDeploymentDocCommands(t *testing.T) {
	blocks := docBlocks(t, deploymentDoc)
	if len(blocks["sql"]) == 0 || len(blocks["sh"]) == 0 {
		t.Fatalf("%s: no sql or sh block", deploymentDoc)
	}
	var programs []string
	for _, line := range blocks["sh"] {
		f := strings.Fields(line)
		switch {
		case f[0] == "helm":
			t.Run(line, func(t *testing.T) { runHelm(t, f[1:]) })
		case f[0] == "docker" && len(f) > 1 && f[1] == "compose":
			t.Run(line, func(t *testing.T) { checkComposeCommand(t, f[2:]) })
		case slices.Contains(doccmd.Programs, f[0]):
			programs = append(programs, line)
		default:
			t.Errorf("%s: no test runs %q", deploymentDoc, line)
		}
	}
	t.Run("database", func(t *testing.T) { runDatabaseSetup(t, blocks["sql"], programs) })
}

// helmArgs are a helm command line: positional arguments and values.
type helmArgs struct {
	positional  []string
	namespace   string
	kubeVersion string
	values      values.Options
}

func parseHelmArgs(t *testing.T, args []string) helmArgs {
	t.Helper()
	var h helmArgs
	for i := 0; i < len(args); i++ {
		a := args[i]
		if !strings.HasPrefix(a, "-") {
			h.positional = append(h.positional, a)
			continue
		}
		if a == "--create-namespace" {
			continue
		}
		if i+1 >= len(args) {
			t.Fatalf("%s without a value", a)
		}
		i++
		switch v := args[i]; a {
		case "--namespace", "-n":
			h.namespace = v
		case "--kube-version":
			h.kubeVersion = v
		case "--set":
			h.values.Values = append(h.values.Values, v)
		case "--set-string":
			h.values.StringValues = append(h.values.StringValues, v)
		case "--set-file":
			h.values.FileValues = append(h.values.FileValues, v)
		case "-f", "--values":
			h.values.ValueFiles = append(h.values.ValueFiles, repoPath(v))
		default:
			t.Fatalf("flag %s: not modelled by this test", a)
		}
	}
	return h
}

// runHelm runs helm lint, template or install (the last against no cluster:
// rendered as for one of Kubernetes 1.27, the chart's minimum).
func runHelm(t *testing.T, args []string) {
	t.Helper()
	h := parseHelmArgs(t, args[1:])
	vals, err := h.values.MergeValues(getter.All(cli.New()))
	if err != nil {
		t.Fatal(err)
	}
	switch args[0] {
	case "lint":
		res := lint.All(repoPath(h.positional[0]), vals, "billing", false)
		for _, m := range res.Messages {
			if m.Severity >= support.ErrorSev {
				t.Errorf("helm lint: %s", m)
			}
		}
	case "template", "install":
		kube := h.kubeVersion
		if args[0] == "install" {
			kube = "1.27.0" // the cluster's
		}
		if _, err := helmInstall(t, h, vals, kube); err != nil {
			t.Fatal(err)
		}
		if args[0] == "template" { // what the page says of Helm's default
			if _, err := helmInstall(t, h, vals, ""); err == nil || !strings.Contains(err.Error(), "kubeVersion") {
				t.Errorf("without --kube-version: %v, want the chart's kubeVersion refused", err)
			}
		}
	default:
		t.Fatalf("helm %s: not modelled by this test", args[0])
	}
}

// helmInstall renders as helm template does (a client-only dry run); an empty
// kube is Helm's default version.
func helmInstall(t *testing.T, h helmArgs, vals map[string]any, kube string) (string, error) {
	t.Helper()
	if len(h.positional) != 2 {
		t.Fatalf("want RELEASE CHART, got %v", h.positional)
	}
	chart, err := loader.Load(repoPath(h.positional[1]))
	if err != nil {
		t.Fatal(err)
	}
	inst := action.NewInstall(&action.Configuration{Log: func(string, ...any) {}})
	inst.ClientOnly, inst.DryRun, inst.Replace = true, true, true
	inst.ReleaseName, inst.Namespace = h.positional[0], h.namespace
	if kube != "" {
		if inst.KubeVersion, err = chartutil.ParseKubeVersion(kube); err != nil {
			t.Fatal(err)
		}
	}
	rel, err := inst.Run(chart, vals)
	if err != nil {
		return "", err
	}
	return rel.Manifest, nil
}

// checkComposeCommand: the file loads, and a `run` names a service of it and
// a command doccmd finds (so the programs' tests run it).
func checkComposeCommand(t *testing.T, args []string) {
	t.Helper()
	if len(args) < 3 || args[0] != "-f" || args[1] != "deployments/compose.yaml" {
		t.Fatalf("want -f deployments/compose.yaml, got %v", args)
	}
	c := loadCompose(t)
	switch sub := args[2]; sub {
	case "up", "down", "ps", "logs":
	case "run":
		rest := slices.DeleteFunc(slices.Clone(args[3:]), func(a string) bool { return a == "--rm" })
		if _, ok := c.Services[rest[0]]; !ok {
			t.Fatalf("no service %s", rest[0])
		}
		if cmds := doccmd.Parse("doc", "`"+strings.Join(rest[1:], " ")+"`"); len(cmds) != 1 {
			t.Errorf("%v is no command of the programs", rest[1:])
		}
	default:
		t.Fatalf("docker compose %s: not modelled by this test", sub)
	}
}

var sqlUser = regexp.MustCompile(`'billing'@`)
var sqlDatabase = regexp.MustCompile(`\bbilling\b`)

// runDatabaseSetup runs the page's SQL as the administrator (the database and
// the user renamed for this test), then, as that user, the page's program
// commands and the work the worker and the reconciler do.
func runDatabaseSetup(t *testing.T, statements, programs []string) {
	scratch := testenv.NewEmptyMySQL(t) // a unique name, dropped after the test
	server, err := mysql.ParseDSN(scratch.DSN)
	if err != nil {
		t.Fatal(err)
	}
	admin, err := sql.Open("mysql", scratch.DSN)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	if _, err := admin.ExecContext(ctx, "DROP DATABASE `"+scratch.Name+"`"); err != nil {
		t.Fatal(err)
	}
	user, password := "u"+scratch.Name[max(0, len(scratch.Name)-20):], "pw-"+scratch.Name
	t.Cleanup(func() { _, _ = admin.Exec("DROP USER IF EXISTS '" + user + "'@'%'") })
	for _, s := range statements {
		s = sqlUser.ReplaceAllString(s, "'"+user+"'@")
		s = sqlDatabase.ReplaceAllString(strings.ReplaceAll(s, "'CHANGE-ME'", "'"+password+"'"), scratch.Name)
		if _, err := admin.ExecContext(ctx, s); err != nil {
			t.Fatalf("%s: %v", s, err)
		}
	}
	dsn := mysql.NewConfig()
	dsn.User, dsn.Net, dsn.Addr, dsn.DBName, dsn.ParseTime = user, server.Net, server.Addr, scratch.Name, true
	pwFile := filepath.Join(t.TempDir(), "mysql-password")
	if err := os.WriteFile(pwFile, []byte(password), 0o600); err != nil {
		t.Fatal(err)
	}
	r := testenv.NewRedis(t)
	env := append(os.Environ(), "MYSQL_DSN="+dsn.FormatDSN(), "MYSQL_PASSWORD_FILE="+pwFile,
		"REDIS_ADDR="+r.Addr, "REDIS_KEY_PREFIX="+r.Keys.Prefix(), "LOG_LEVEL=error", "HTTP_ADDR=127.0.0.1:0")
	bin := buildPrograms(t, ctx, "billingctl", "reconciler")
	work := slices.Concat(programs, []string{"billingctl quota grant --merchant m-1 --amount 100 --id g-1", "reconciler --once"})
	for _, line := range work {
		f := strings.Fields(line)
		cmd := exec.CommandContext(ctx, filepath.Join(bin, f[0]), f[1:]...)
		cmd.Env = env
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("%s as the documented user: %v\n%s", line, err, out)
		}
	}
}

// buildPrograms builds the root module's programs into a directory.
func buildPrograms(t *testing.T, ctx context.Context, names ...string) string {
	t.Helper()
	dir := t.TempDir()
	args := []string{"build", "-o", dir + string(filepath.Separator)}
	for _, n := range names {
		args = append(args, "./cmd/"+n)
	}
	cmd := exec.CommandContext(ctx, testenv.GoTool(), args...)
	cmd.Dir = repoPath()
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return dir
}
