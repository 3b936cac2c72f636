package deployments_test

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/quotaflow/billing/internal/httpserver"
)

// composeFile is the part of the Compose specification the checks need. The
// list forms of command, entrypoint and healthcheck.test are required (a
// string form fails to decode here, on purpose: it is shell-split by Compose).
type composeFile struct {
	Services map[string]composeService `json:"services"`
}

type composeService struct {
	Image       string         `json:"image"`
	Build       *composeBuild  `json:"build"`
	Command     []string       `json:"command"`
	Entrypoint  []string       `json:"entrypoint"`
	Environment map[string]any `json:"environment"`
	DependsOn   map[string]struct {
		Condition string `json:"condition"`
	} `json:"depends_on"`
	Healthcheck *struct {
		Test []string `json:"test"`
	} `json:"healthcheck"`
	Restart         string   `json:"restart"`
	StopGracePeriod string   `json:"stop_grace_period"`
	Volumes         []string `json:"volumes"`
}

type composeBuild struct {
	Context    string `json:"context"`
	Dockerfile string `json:"dockerfile"`
}

func loadCompose(t *testing.T) composeFile {
	t.Helper()
	var c composeFile
	if err := yaml.Unmarshal(readFile(t, "compose.yaml"), &c); err != nil {
		t.Fatalf("compose.yaml: %v", err)
	}
	if len(c.Services) == 0 {
		t.Fatal("compose.yaml: no services")
	}
	return c
}

func (s composeService) billing() bool {
	repo, _, _ := strings.Cut(s.Image, ":")
	return repo == imageRepo || s.Build != nil
}

func (s composeService) argv(img image) []string {
	if len(s.Command) == 0 {
		return img.cmd
	}
	return slices.Concat(s.Entrypoint, s.Command)
}

// composeUnits are the billing programs of the file, by service name.
func composeUnits(t *testing.T, c composeFile, img image) map[string]unit {
	t.Helper()
	out := map[string]unit{}
	for name, s := range c.Services {
		if !s.billing() {
			continue
		}
		env := map[string]string{}
		for k, v := range s.Environment {
			if v == nil {
				t.Errorf("compose %s: %s has no value (it would leak in from the host)", name, k)
				continue
			}
			env[k] = fmt.Sprint(v)
		}
		out[name] = unit{where: "compose service " + name, command: s.argv(img), env: env}
	}
	return out
}

func TestComposePrograms(t *testing.T) {
	c, img := loadCompose(t), parseDockerfile(t)
	units := composeUnits(t, c, img)
	var workers []string
	ids := map[int]string{}
	for name, u := range units {
		s := c.Services[name]
		if repo, _, _ := strings.Cut(s.Image, ":"); repo != imageRepo {
			t.Errorf("compose %s: image %q, want %s:<tag> (one build for every program)", name, s.Image, imageRepo)
		}
		if s.Build == nil || filepath.Join(s.Build.Context, s.Build.Dockerfile) != filepath.Join("..", "deployments", "Dockerfile") {
			t.Errorf("compose %s: build %+v does not build deployments/Dockerfile from the repository root", name, s.Build)
		}
		cfg := checkUnit(t, u, img)
		switch u.program() {
		case "billing-worker":
			workers = append(workers, name)
			if other, dup := ids[cfg.IDGen.WorkerID]; dup {
				t.Errorf("compose %s and %s share Snowflake worker ID %d", name, other, cfg.IDGen.WorkerID)
			}
			ids[cfg.IDGen.WorkerID] = name
			grace, err := time.ParseDuration(s.StopGracePeriod)
			if err != nil || grace <= cfg.Worker.ShutdownTimeout {
				t.Errorf("compose %s: stop_grace_period %q must exceed SHUTDOWN_TIMEOUT %v (Docker's default 10s SIGKILLs the drain)",
					name, s.StopGracePeriod, cfg.Worker.ShutdownTimeout)
			}
			checkDependsOn(t, c, name, "billingctl migrate", "service_completed_successfully")
			checkDependsOn(t, c, name, "kafka-topics.sh", "service_completed_successfully")
		case "reconciler":
			if !slices.Contains(u.command, "--every") {
				t.Errorf("compose %s: the reconciler should loop (--every 1m), got %q", name, u.command)
			}
		case "billingctl":
			if len(u.command) > 1 && u.command[1] == "migrate" {
				if s.Restart != "no" {
					t.Errorf("compose %s: restart %q, want \"no\" (a one-shot step)", name, s.Restart)
				}
				checkDependsOn(t, c, name, "mysql", "service_healthy")
			}
		}
	}
	if len(workers) < 2 {
		t.Errorf("compose: %d billing-worker(s) %v, want two in one consumer group", len(workers), workers)
	}
	if _, ok := findService(c, "billingctl migrate"); !ok {
		t.Error("compose: no service runs billingctl migrate")
	}
}

// findService returns the service whose image or argv mentions what.
func findService(c composeFile, what string) (string, bool) {
	for name, s := range c.Services {
		if strings.Contains(s.Image+" "+strings.Join(slices.Concat(s.Entrypoint, s.Command), " "), what) {
			return name, true
		}
	}
	return "", false
}

func checkDependsOn(t *testing.T, c composeFile, from, what, condition string) {
	t.Helper()
	target, ok := findService(c, what)
	if !ok {
		t.Errorf("compose %s: no service runs %s", from, what)
		return
	}
	if got := c.Services[from].DependsOn[target].Condition; got != condition {
		t.Errorf("compose %s: depends on %s with condition %q, want %s", from, target, got, condition)
	}
}

func TestComposeDependsOn(t *testing.T) {
	c := loadCompose(t)
	for name, s := range c.Services {
		for dep, d := range s.DependsOn {
			target, ok := c.Services[dep]
			switch {
			case !ok:
				t.Errorf("compose %s: depends on %s, which is no service", name, dep)
			case d.Condition == "service_healthy" && (target.Healthcheck == nil || len(target.Healthcheck.Test) == 0):
				t.Errorf("compose %s: waits for %s to be healthy, which has no healthcheck", name, dep)
			case d.Condition == "service_completed_successfully" && target.Restart != "no":
				t.Errorf("compose %s: waits for %s to complete, whose restart is %q (want \"no\")", name, dep, target.Restart)
			case !slices.Contains([]string{"service_started", "service_healthy", "service_completed_successfully"}, d.Condition):
				t.Errorf("compose %s: depends on %s with condition %q", name, dep, d.Condition)
			}
		}
		for _, v := range s.Volumes {
			src, _, _ := strings.Cut(v, ":")
			if strings.HasPrefix(src, ".") {
				if _, err := os.Stat(src); err != nil {
					t.Errorf("compose %s: mounts %s: %v", name, src, err)
				}
			}
		}
	}
}

// The topic service creates the topics the workers use.
func TestComposeTopics(t *testing.T) {
	c, img := loadCompose(t), parseDockerfile(t)
	name, ok := findService(c, "kafka-topics.sh")
	if !ok {
		t.Fatal("compose: no service creates the topics (kafka-topics.sh)")
	}
	script := strings.Join(slices.Concat(c.Services[name].Entrypoint, c.Services[name].Command), " ")
	for svc, u := range composeUnits(t, c, img) {
		if u.program() != "billing-worker" {
			continue
		}
		cfg := loadUnit(t, u)
		for _, topic := range []string{cfg.Kafka.Topic, cfg.Kafka.GrantsTopic, cfg.Kafka.DLQTopic} {
			if !strings.Contains(script, "--create --if-not-exists --topic "+topic+" ") {
				t.Errorf("compose %s: %s consumes or dead-letters to %s, which %s does not create", name, svc, topic, name)
			}
		}
		// Dead-letter records are keyed by provenance: compaction folds copies.
		if _, dlq, _ := strings.Cut(script, "--topic "+cfg.Kafka.DLQTopic+" "); !strings.Contains(strings.Split(dlq, "\n")[0], "--config cleanup.policy=compact,delete") {
			t.Errorf("compose %s: creates %s without cleanup.policy=compact,delete", name, cfg.Kafka.DLQTopic)
		}
	}
}

// prometheusConfig is the part of prometheus.yml the checks need.
type prometheusConfig struct {
	Global        map[string]string `json:"global"`
	RuleFiles     []string          `json:"rule_files"`
	ScrapeConfigs []struct {
		JobName       string `json:"job_name"`
		MetricsPath   string `json:"metrics_path"`
		StaticConfigs []struct {
			Targets []string `json:"targets"`
		} `json:"static_configs"`
	} `json:"scrape_configs"`
}

// Prometheus scrapes every worker (and the looping reconciler) at its HTTP_ADDR port and loads the alert
// rules from a mounted file.
func TestComposePrometheus(t *testing.T) {
	c, img := loadCompose(t), parseDockerfile(t)
	var pc prometheusConfig
	if err := yaml.UnmarshalStrict(readFile(t, filepath.Join("prometheus", "prometheus.yml")), &pc); err != nil {
		t.Fatalf("prometheus.yml: %v", err)
	}
	targets := map[string]string{} // host:port -> metrics path
	for _, sc := range pc.ScrapeConfigs {
		for _, st := range sc.StaticConfigs {
			for _, tg := range st.Targets {
				targets[tg] = cmpOr(sc.MetricsPath, "/metrics")
			}
		}
	}
	for name, u := range composeUnits(t, c, img) {
		// The worker serves /metrics always, the reconciler in its --every loop.
		if u.program() != "billing-worker" && !(u.program() == "reconciler" && slices.Contains(u.command, "--every")) {
			continue
		}
		cfg := loadUnit(t, u)
		tg := name + ":" + strconv.Itoa(httpPort(t, cfg))
		p, ok := targets[tg]
		if !ok {
			t.Errorf("prometheus.yml does not scrape %s", tg)
		} else if p != httpserver.PathMetrics {
			t.Errorf("prometheus.yml scrapes %s at %s, want %s", tg, p, httpserver.PathMetrics)
		}
	}
	prom, ok := findService(c, "prom/prometheus")
	if !ok {
		t.Fatal("compose: no Prometheus service")
	}
	for _, rf := range pc.RuleFiles {
		if host := hostPath(c.Services[prom], rf); host == "" {
			t.Errorf("prometheus.yml: rule file %s is not mounted into %s", rf, prom)
		} else if _, err := os.Stat(host); err != nil {
			t.Errorf("prometheus.yml: rule file %s: %v", rf, err)
		}
	}
	if len(pc.RuleFiles) == 0 {
		t.Error("prometheus.yml loads no alert rules")
	}
}

// hostPath maps a path inside a container back through its bind mounts.
func hostPath(s composeService, inContainer string) string {
	for _, v := range s.Volumes {
		parts := strings.Split(v, ":")
		if len(parts) < 2 || !strings.HasPrefix(parts[0], ".") {
			continue
		}
		if rel, err := filepath.Rel(parts[1], inContainer); err == nil && !strings.HasPrefix(rel, "..") {
			return filepath.Join(parts[0], rel)
		}
	}
	return ""
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// Grafana gets the dashboard and a datasource with the uid its panels name.
func TestGrafanaProvisioning(t *testing.T) {
	c := loadCompose(t)
	graf, ok := findService(c, "grafana/grafana")
	if !ok {
		t.Fatal("compose: no Grafana service")
	}
	var ds struct {
		Datasources []struct {
			UID string `json:"uid"`
			URL string `json:"url"`
		} `json:"datasources"`
	}
	if err := yaml.Unmarshal(readFile(t, filepath.Join("grafana", "provisioning", "datasources", "prometheus.yaml")), &ds); err != nil {
		t.Fatal(err)
	}
	var uids []string
	for _, d := range ds.Datasources {
		uids = append(uids, d.UID)
	}
	var prov struct {
		Providers []struct {
			Options struct {
				Path string `json:"path"`
			} `json:"options"`
		} `json:"providers"`
	}
	if err := yaml.Unmarshal(readFile(t, filepath.Join("grafana", "provisioning", "dashboards", "billing.yaml")), &prov); err != nil {
		t.Fatal(err)
	}
	if len(prov.Providers) == 0 {
		t.Fatal("no dashboard provider")
	}
	dir := hostPath(c.Services[graf], prov.Providers[0].Options.Path)
	if dir == "" {
		t.Fatalf("the dashboard provider reads %s, which is not mounted into %s", prov.Providers[0].Options.Path, graf)
	}
	if host := hostPath(c.Services[graf], "/etc/grafana/provisioning/datasources"); host == "" {
		t.Errorf("%s does not mount the provisioning directory", graf)
	}
	dashboards, _ := filepath.Glob(filepath.Join(dir, "*.json"))
	if len(dashboards) == 0 {
		t.Fatalf("no dashboard in %s", dir)
	}
	for _, f := range dashboards {
		for _, uid := range datasourceUIDs(decodeJSON(t, f)) {
			// A variable (${datasource}) picks the default data source, which compose provisions.
			if !strings.HasPrefix(uid, "${") && !slices.Contains(uids, uid) {
				t.Errorf("%s names datasource uid %q; provisioned: %v", f, uid, uids)
			}
		}
	}
}

// datasourceUIDs are the uids of every "datasource" object of a dashboard.
func datasourceUIDs(doc any) []string {
	var out []string
	var walk func(any)
	walk = func(v any) {
		switch v := v.(type) {
		case map[string]any:
			for k, x := range v {
				if ds, ok := x.(map[string]any); ok && k == "datasource" {
					if uid, ok := ds["uid"].(string); ok {
						out = append(out, uid)
					}
				}
				walk(x)
			}
		case []any:
			for _, x := range v {
				walk(x)
			}
		}
	}
	walk(doc)
	return out
}
