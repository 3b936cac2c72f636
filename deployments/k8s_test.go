package deployments_test

import (
	"fmt"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/quotaflow/billing/internal/httpserver"
)

// Every container of both renderings runs a program of this repository with
// an environment config.Load accepts.
func TestK8sPrograms(t *testing.T) {
	img := parseDockerfile(t)
	for _, m := range renderings(t) {
		ws := m.workloads()
		if len(ws) == 0 {
			t.Fatalf("%s: no workloads", m.source)
		}
		for _, w := range ws {
			for _, u := range m.units(t, w) {
				checkUnit(t, u, img)
			}
		}
	}
}

func TestK8sWorker(t *testing.T) {
	for _, m := range renderings(t) {
		workers := 0
		for _, s := range m.statefulSets {
			w := m.workloads()[slices.IndexFunc(m.workloads(), func(x workload) bool { return x.kind == "StatefulSet" && x.name == s.Name })]
			for _, c := range s.Spec.Template.Spec.Containers {
				if len(c.Command) == 0 || filepath.Base(c.Command[0]) != "billing-worker" {
					continue
				}
				workers++
				checkWorkerContainer(t, m, s, c, w.podNames)
			}
		}
		if workers == 0 {
			t.Fatalf("%s: no StatefulSet runs billing-worker", m.source)
		}
	}
}

func checkWorkerContainer(t *testing.T, m *manifests, s *appsv1.StatefulSet, c corev1.Container, podNames []string) {
	t.Helper()
	where := m.source + " StatefulSet/" + s.Name
	for _, e := range c.Env {
		switch e.Name {
		case "POD_NAME":
			if e.ValueFrom == nil || e.ValueFrom.FieldRef == nil || e.ValueFrom.FieldRef.FieldPath != "metadata.name" {
				t.Errorf("%s: POD_NAME must come from fieldRef metadata.name (the ordinal is the worker ID)", where)
			}
		case "POD_IP":
			if e.ValueFrom == nil || e.ValueFrom.FieldRef == nil || e.ValueFrom.FieldRef.FieldPath != "status.podIP" {
				t.Errorf("%s: POD_IP must come from fieldRef status.podIP", where)
			}
		}
	}
	checkGOMAXPROCS(t, where, c)
	ids := map[int]string{}
	var units []unit
	for _, pod := range podNames {
		env, err := m.env(&s.Spec.Template.Spec, c, pod)
		if err != nil {
			t.Fatalf("%s: %v", where, err)
		}
		if _, ok := env["POD_NAME"]; !ok {
			t.Errorf("%s: POD_NAME is not set", where)
		}
		if v, ok := env["IDGEN_WORKER_ID"]; ok {
			t.Errorf("%s: IDGEN_WORKER_ID=%q gives every replica the same Snowflake worker ID; leave it to POD_NAME", where, v)
		}
		u := unit{where: where + " pod " + pod, command: c.Command, env: env}
		units = append(units, u)
		cfg := loadUnit(t, u)
		if other, dup := ids[cfg.IDGen.WorkerID]; dup && other != pod {
			t.Errorf("%s: pods %s and %s get worker ID %d", where, other, pod, cfg.IDGen.WorkerID)
		}
		ids[cfg.IDGen.WorkerID] = pod
	}
	cfg := loadUnit(t, units[0])
	port := httpPort(t, cfg)

	if !slices.ContainsFunc(c.Ports, func(p corev1.ContainerPort) bool { return int(p.ContainerPort) == port }) {
		t.Errorf("%s: no containerPort %d, where the worker listens (HTTP_ADDR %q)", where, port, cfg.HTTPAddr)
	}
	checkWorkerServices(t, m, s, c, port)
	for _, p := range []struct {
		name  string
		probe *corev1.Probe
		path  string
	}{{"startup", c.StartupProbe, httpserver.PathHealth}, {"liveness", c.LivenessProbe, httpserver.PathHealth}, {"readiness", c.ReadinessProbe, httpserver.PathReady}} {
		if p.probe == nil || p.probe.HTTPGet == nil {
			t.Errorf("%s: no HTTP %s probe", where, p.name)
			continue
		}
		if p.probe.HTTPGet.Path != p.path {
			t.Errorf("%s: %s probe on %s, want %s", where, p.name, p.probe.HTTPGet.Path, p.path)
		}
		if got := containerPort(t, c, p.probe.HTTPGet.Port); got != port {
			t.Errorf("%s: %s probe on port %d, the worker listens on %d", where, p.name, got, port)
		}
	}
	// /healthz answers during the worker-ID lease wait (up to two lease TTLs),
	// and the startup probe gives the start that long before liveness counts.
	if sp := c.StartupProbe; sp != nil {
		budget := time.Duration(sp.PeriodSeconds*sp.FailureThreshold) * time.Second
		if want := 2*cfg.IDGen.LeaseTTL + 10*time.Second; budget < want {
			t.Errorf("%s: the startup probe allows %v, the lease wait alone may take %v", where, budget, 2*cfg.IDGen.LeaseTTL)
		}
	}
	if c.LivenessProbe != nil && c.LivenessProbe.InitialDelaySeconds > 0 {
		t.Errorf("%s: liveness initialDelaySeconds %d: the startup probe covers the start", where, c.LivenessProbe.InitialDelaySeconds)
	}
	ann := s.Spec.Template.Annotations
	if ann["prometheus.io/scrape"] != "true" || ann["prometheus.io/port"] != strconv.Itoa(port) || ann["prometheus.io/path"] != httpserver.PathMetrics {
		t.Errorf("%s: scrape annotations %v, want port %d path %s", where, ann, port, httpserver.PathMetrics)
	}
	grace := s.Spec.Template.Spec.TerminationGracePeriodSeconds
	if grace == nil || time.Duration(*grace)*time.Second <= cfg.Worker.ShutdownTimeout {
		t.Errorf("%s: terminationGracePeriodSeconds must exceed SHUTDOWN_TIMEOUT %v, or SIGKILL cuts the drain", where, cfg.Worker.ShutdownTimeout)
	}
}

// containerPort resolves a port by number or by name.
func containerPort(t *testing.T, c corev1.Container, p intstr.IntOrString) int {
	t.Helper()
	if p.Type == intstr.Int {
		return p.IntValue()
	}
	for _, cp := range c.Ports {
		if cp.Name == p.StrVal {
			return int(cp.ContainerPort)
		}
	}
	t.Errorf("container %s has no port named %q", c.Name, p.StrVal)
	return -1
}

func selects(sel map[string]string, labels map[string]string) bool {
	if len(sel) == 0 {
		return false
	}
	for k, v := range sel {
		if labels[k] != v {
			return false
		}
	}
	return true
}

// checkWorkerServices: the governing headless Service, a Service reaching the
// HTTP port, and a PodDisruptionBudget, all selecting the worker's pods.
func checkWorkerServices(t *testing.T, m *manifests, s *appsv1.StatefulSet, c corev1.Container, port int) {
	t.Helper()
	labels := s.Spec.Template.Labels
	if s.Spec.Selector == nil || !selects(s.Spec.Selector.MatchLabels, labels) {
		t.Errorf("%s StatefulSet/%s: the selector does not match the pod labels", m.source, s.Name)
	}
	var headless, metrics bool
	for _, svc := range m.services {
		if !selects(svc.Spec.Selector, labels) {
			continue
		}
		if svc.Spec.ClusterIP == corev1.ClusterIPNone {
			headless = headless || svc.Name == s.Spec.ServiceName
			continue
		}
		for _, p := range svc.Spec.Ports {
			target := p.TargetPort
			if target.IntValue() == 0 && target.StrVal == "" {
				target = intstr.FromInt32(p.Port) // targetPort defaults to port
			}
			if containerPort(t, c, target) == port {
				metrics = true
			}
		}
	}
	if !headless {
		t.Errorf("%s StatefulSet/%s: serviceName %q is not a headless Service selecting its pods", m.source, s.Name, s.Spec.ServiceName)
	}
	if !metrics {
		t.Errorf("%s StatefulSet/%s: no Service exposes the http port of its pods", m.source, s.Name)
	}
	pdb := false
	for _, p := range m.pdbs {
		if p.Spec.Selector != nil && selects(p.Spec.Selector.MatchLabels, labels) {
			pdb = true
			if p.Spec.MaxUnavailable == nil || p.Spec.MaxUnavailable.IntValue() != 1 {
				t.Errorf("%s PodDisruptionBudget/%s: maxUnavailable %v, want 1", m.source, p.Name, p.Spec.MaxUnavailable)
			}
			// In an outage every worker is NotReady; the default policy would
			// then block every node drain.
			if pol := p.Spec.UnhealthyPodEvictionPolicy; pol == nil || *pol != policyv1.AlwaysAllow {
				t.Errorf("%s PodDisruptionBudget/%s: unhealthyPodEvictionPolicy %v, want AlwaysAllow", m.source, p.Name, pol)
			}
		}
	}
	if !pdb {
		t.Errorf("%s StatefulSet/%s: no PodDisruptionBudget", m.source, s.Name)
	}
}

// The reconciler runs in one of two shapes. The loop: one replica replaced
// (never two at once), `--every`, its HTTP port reached by a Service the
// ServiceMonitor scrapes, since its metrics are what the reconcile alerts
// read. The CronJob: `--once`, never two runs at once, and exit codes are
// results (cmd/reconciler checks its podFailurePolicy against them).
func TestK8sReconciler(t *testing.T) {
	for _, m := range renderings(t) {
		runs := 0
		for _, w := range m.workloads() {
			for _, c := range w.pod.Spec.Containers {
				argv := append(slices.Clone(c.Command), c.Args...)
				if len(argv) == 0 || filepath.Base(argv[0]) != "reconciler" || slices.Contains(argv, "export") {
					continue // the statements: TestK8sStatements
				}
				runs++
				switch w.kind {
				case "Deployment":
					checkReconcilerLoop(t, m, w.name, c, argv)
				case "CronJob":
					if !slices.Contains(argv, "--once") {
						t.Errorf("%s CronJob/%s: the reconciler runs without --once", m.source, w.name)
					}
				default:
					t.Errorf("%s %s/%s runs the reconciler", m.source, w.kind, w.name)
				}
			}
		}
		if runs != 1 {
			t.Errorf("%s: %d reconcilers, want one", m.source, runs)
		}
		for _, cj := range m.cronJobs {
			if cj.Spec.ConcurrencyPolicy != batchv1.ForbidConcurrent {
				t.Errorf("%s CronJob/%s: concurrencyPolicy %q, want Forbid", m.source, cj.Name, cj.Spec.ConcurrencyPolicy)
			}
			if rp := cj.Spec.JobTemplate.Spec.Template.Spec.RestartPolicy; rp != corev1.RestartPolicyNever {
				t.Errorf("%s CronJob/%s: restartPolicy %q, want Never (exit codes are results, not crashes)", m.source, cj.Name, rp)
			}
			if cj.Spec.JobTemplate.Spec.PodFailurePolicy == nil {
				t.Errorf("%s CronJob/%s: no podFailurePolicy", m.source, cj.Name)
			}
		}
	}
}

func checkReconcilerLoop(t *testing.T, m *manifests, name string, c corev1.Container, argv []string) {
	t.Helper()
	where := m.source + " Deployment/" + name
	i := slices.IndexFunc(m.deployments, func(d *appsv1.Deployment) bool { return d.Name == name })
	d := m.deployments[i]
	if !slices.Contains(argv, "--every") {
		t.Errorf("%s: the reconciler runs without --every", where)
	}
	if d.Spec.Replicas == nil || *d.Spec.Replicas != 1 || d.Spec.Strategy.Type != appsv1.RecreateDeploymentStrategyType {
		t.Errorf("%s: replicas %v strategy %q, want 1 and Recreate (two loops contend for the merchant locks)", where, d.Spec.Replicas, d.Spec.Strategy.Type)
	}
	if d.Spec.Selector == nil || !selects(d.Spec.Selector.MatchLabels, d.Spec.Template.Labels) {
		t.Errorf("%s: the selector does not match the pod labels", where)
	}
	// No readiness probe: an unready pod leaves the Service, and its failed
	// runs (MySQL down) would never be scraped.
	if c.ReadinessProbe != nil {
		t.Errorf("%s: a readiness probe hides the reconciler from Prometheus while a dependency is down", where)
	}
	port := -1
	for _, u := range m.units(t, workload{"Deployment", name, &d.Spec.Template, []string{name + "-x"}, nil}) {
		port = httpPort(t, loadUnit(t, u))
	}
	if c.LivenessProbe == nil || c.LivenessProbe.HTTPGet == nil || c.LivenessProbe.HTTPGet.Path != httpserver.PathHealth || containerPort(t, c, c.LivenessProbe.HTTPGet.Port) != port {
		t.Errorf("%s: no liveness probe on %s at port %d", where, httpserver.PathHealth, port)
	}
	scraped := false
	for _, sm := range m.serviceMonitors {
		for _, svc := range m.services {
			if !selects(sm.Spec.Selector.MatchLabels, svc.Labels) || !selects(svc.Spec.Selector, d.Spec.Template.Labels) {
				continue
			}
			for _, p := range svc.Spec.Ports {
				for _, ep := range sm.Spec.Endpoints {
					scraped = scraped || (p.Name == ep.Port && ep.Path == httpserver.PathMetrics && containerPort(t, c, p.TargetPort) == port)
				}
			}
		}
	}
	if !scraped {
		t.Errorf("%s: no ServiceMonitor scrapes its port %d", where, port)
	}
}

// Rollout order, as the tools apply each rendering: Helm runs pre-install and
// pre-upgrade hooks to completion (by weight) before it applies anything else;
// kubectl applies everything at once; a pod runs its init containers to
// completion, in order, before its containers. A plain Job therefore races the
// workers, an init container or a hook does not. Every billing-worker must
// start after a `billingctl migrate` of its own image has finished. (The
// worker's schema gate would hold it anyway, internal/worker
// TestWorkerWaitsForTheSchema; this keeps it from waiting on the rollout itself.)
func TestK8sRolloutMigratesBeforeWorkersStart(t *testing.T) {
	for _, m := range renderings(t) {
		for _, p := range rolloutProblems(m) {
			t.Errorf("%s: %s", m.source, p)
		}
	}
	// The check itself: the first release's shape (a plain migrate Job beside
	// the workers) fails it.
	old := renderHelm(t, nil)
	for _, j := range old.jobs {
		j.Annotations = nil
	}
	if got := rolloutProblems(old); len(got) != 2 {
		t.Errorf("a plain migrate Job: %d problems, want 2 (the race and the immutable template): %v", len(got), got)
	}
}

func rolloutProblems(m *manifests) []string {
	isMigrate := func(c corev1.Container) bool {
		argv := append(slices.Clone(c.Command), c.Args...)
		return len(argv) >= 2 && filepath.Base(argv[0]) == "billingctl" && argv[1] == "migrate"
	}
	var problems []string
	migrated := false // the schema is at the image's version
	run := func(cs []corev1.Container) {
		migrated = migrated || slices.ContainsFunc(cs, isMigrate)
	}
	for _, w := range m.workloads() { // 1. hooks (every pre-upgrade hook also runs pre-install here)
		if w.kind == "Job" && slices.Contains(w.hooks, "pre-upgrade") && slices.Contains(w.hooks, "pre-install") {
			run(w.pod.Spec.Containers)
		}
	}
	workers := 0
	for _, w := range m.workloads() { // 2. everything else; each pod: init containers, then containers
		if w.hooks != nil {
			continue
		}
		run(w.pod.Spec.InitContainers)
		for _, c := range w.pod.Spec.Containers {
			if len(c.Command) > 0 && filepath.Base(c.Command[0]) == "billing-worker" {
				workers++
				if !migrated {
					problems = append(problems, fmt.Sprintf("%s/%s: billing-worker may start before billingctl migrate finished", w.kind, w.name))
				}
			}
		}
		if w.kind == "Job" { // a plain Job runs beside the pods: at best after them
			run(w.pod.Spec.Containers)
		}
	}
	if workers == 0 || !migrated {
		problems = append(problems, fmt.Sprintf("%d billing-worker(s), migrated: %v", workers, migrated))
	}
	// A Job applied by kubectl keeps its immutable template: a new image tag
	// fails the apply. Only hooks (deleted before re-creation) may be Jobs.
	for _, j := range m.jobs {
		if hooks(j.ObjectMeta) == nil {
			problems = append(problems, fmt.Sprintf("Job/%s is a plain Job: its template is immutable, so the next image tag fails kubectl apply", j.Name))
		} else if p := j.Annotations["helm.sh/hook-delete-policy"]; !strings.Contains(p, "before-hook-creation") {
			problems = append(problems, fmt.Sprintf("Job/%s: hook-delete-policy %q lacks before-hook-creation", j.Name, p))
		}
	}
	return problems
}

// Every pod runs as non-root on a read-only root, without capabilities, with
// requests and limits, from the one image.
func TestK8sPodHardening(t *testing.T) {
	for _, m := range renderings(t) {
		for _, w := range m.workloads() {
			checkPodHardening(t, m, w)
		}
	}
}

func checkPodHardening(t *testing.T, m *manifests, w workload) {
	t.Helper()
	spec := w.pod.Spec
	podNonRoot := spec.SecurityContext != nil && spec.SecurityContext.RunAsNonRoot != nil && *spec.SecurityContext.RunAsNonRoot
	if spec.AutomountServiceAccountToken == nil || *spec.AutomountServiceAccountToken {
		t.Errorf("%s %s/%s: automountServiceAccountToken is not false (no program calls the Kubernetes API)", m.source, w.kind, w.name)
	}
	for _, c := range append(slices.Clone(spec.InitContainers), spec.Containers...) {
		where := fmt.Sprintf("%s %s/%s container %s", m.source, w.kind, w.name, c.Name)
		if repo, _, _ := strings.Cut(c.Image, ":"); repo != imageRepo {
			t.Errorf("%s: image %q, want %s", where, c.Image, imageRepo)
		}
		sc := c.SecurityContext
		if sc == nil {
			t.Errorf("%s: no securityContext", where)
			continue
		}
		if !podNonRoot && (sc.RunAsNonRoot == nil || !*sc.RunAsNonRoot) {
			t.Errorf("%s: runAsNonRoot is not set", where)
		}
		if sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem {
			t.Errorf("%s: readOnlyRootFilesystem is not true", where)
		}
		if sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation {
			t.Errorf("%s: allowPrivilegeEscalation is not false", where)
		}
		if sc.Capabilities == nil || !slices.Contains(sc.Capabilities.Drop, "ALL") {
			t.Errorf("%s: capabilities do not drop ALL", where)
		}
		for _, r := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
			req, lim := c.Resources.Requests[r], c.Resources.Limits[r]
			if req.IsZero() || lim.IsZero() {
				t.Errorf("%s: %s request %v / limit %v, want both", where, r, &req, &lim)
			} else if req.Cmp(lim) > 0 {
				t.Errorf("%s: %s request %v above the limit %v", where, r, &req, &lim)
			}
		}
		checkMemoryLimit(t, where, c)
	}
}

// checkGOMAXPROCS: the worker runs one P or a few, a whole number no larger
// than its CPU limit (more Ps than the limit's cores only get it throttled).
func checkGOMAXPROCS(t *testing.T, where string, c corev1.Container) {
	t.Helper()
	v, ok := runtimeEnv(t, where, c, "GOMAXPROCS")
	if !ok {
		return
	}
	n, err := strconv.Atoi(v)
	lim := c.Resources.Limits[corev1.ResourceCPU]
	if err != nil || n < 1 || int64(n)*1000 > lim.MilliValue() {
		t.Errorf("%s: GOMAXPROCS %q, want a whole number from 1 to the CPU limit %v", where, v, &lim)
	}
}

// runtimeEnv is the value of the container's variable name, reported missing
// when it is not set.
func runtimeEnv(t *testing.T, where string, c corev1.Container, name string) (string, bool) {
	t.Helper()
	i := slices.IndexFunc(c.Env, func(e corev1.EnvVar) bool { return e.Name == name })
	if i < 0 {
		t.Errorf("%s: no %s", where, name)
		return "", false
	}
	return c.Env[i].Value, true
}

// GOMEMLIMIT is 85–95% of the container's memory limit: the GC works harder
// near the limit instead of the kernel killing the pod, with room for the
// memory Go does not count.
func checkMemoryLimit(t *testing.T, where string, c corev1.Container) {
	t.Helper()
	limit, ok := runtimeEnv(t, where, c, "GOMEMLIMIT")
	if !ok {
		return
	}
	v, ok := strings.CutSuffix(limit, "MiB")
	n, err := strconv.ParseInt(v, 10, 64)
	if !ok || err != nil {
		t.Errorf("%s: GOMEMLIMIT %q, want <n>MiB", where, limit)
		return
	}
	lim := c.Resources.Limits[corev1.ResourceMemory]
	if share := float64(n<<20) / float64(lim.Value()); share < 0.85 || share > 0.95 {
		t.Errorf("%s: GOMEMLIMIT %s is %.0f%% of the memory limit %v, want 85-95%%", where, limit, share*100, &lim)
	}
}

// Secrets reach the programs only as files (*_FILE): never in the pod spec,
// never in the environment, and every key of a Secret the chart makes is read
// through a *_FILE variable config knows.
func TestK8sSecrets(t *testing.T) {
	known := knownVariables()
	for _, m := range renderings(t) {
		read := map[string]string{} // secret.key -> the *_FILE variable that reads it
		for _, w := range m.workloads() {
			for _, c := range append(slices.Clone(w.pod.Spec.InitContainers), w.pod.Spec.Containers...) {
				where := fmt.Sprintf("%s %s/%s container %s", m.source, w.kind, w.name, c.Name)
				for _, from := range c.EnvFrom {
					if from.SecretRef != nil {
						t.Errorf("%s: envFrom Secret %s puts secrets in the environment; mount it and use *_FILE", where, from.SecretRef.Name)
					}
				}
				for _, e := range c.Env {
					if e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil {
						t.Errorf("%s: %s from a secretKeyRef; mount the Secret and use %s_FILE", where, e.Name, e.Name)
					}
				}
				env, err := m.env(&w.pod.Spec, c, w.podNames[0])
				if err != nil {
					t.Errorf("%s: %v", where, err)
					continue
				}
				for k, v := range env {
					if !strings.HasSuffix(k, "_FILE") || !strings.HasPrefix(v, m.secretDir) {
						continue
					}
					if _, ok := known[k]; !ok {
						t.Errorf("%s: %s is not a variable config reads", where, k)
					}
					read[strings.TrimPrefix(v, m.secretDir+"/")] = k
				}
			}
		}
		for _, s := range m.secrets {
			if len(s.Data) > 0 {
				t.Errorf("%s Secret/%s: use stringData, not data", m.source, s.Name)
			}
			for k := range s.StringData {
				if read[s.Name+"."+k] == "" {
					t.Errorf("%s Secret/%s: key %s is read by no *_FILE variable of any container", m.source, s.Name, k)
				}
			}
		}
		if len(m.secrets) == 0 {
			t.Errorf("%s: no Secret (the MySQL and Redis passwords)", m.source)
		}
	}
}

// An edit of the configuration or of the chart-made Secret changes the pod
// templates that read it (checksum annotations), so applying it rolls the pods.
func TestK8sConfigChangeRollsPods(t *testing.T) {
	checkRolls(t, renderHelm(t, nil), renderHelm(t, map[string]any{"config": map[string]any{"LOG_LEVEL": "debug"}}))
	checkRolls(t, renderHelm(t, nil), renderHelm(t, map[string]any{"secrets": map[string]any{"values": map[string]any{"mysql-password": "another-s3cret", "redis-password": "redis-s3cret"}}}))
}

func checkRolls(t *testing.T, before, after *manifests) {
	t.Helper()
	templates := func(m *manifests) map[string]*corev1.PodTemplateSpec {
		out := map[string]*corev1.PodTemplateSpec{}
		for _, w := range m.workloads() {
			if w.hooks == nil {
				out[w.kind+"/"+w.name] = w.pod
			}
		}
		return out
	}
	b, a := templates(before), templates(after)
	if len(b) == 0 {
		t.Fatalf("%s: no workloads", before.source)
	}
	for name, pod := range b {
		if reflect.DeepEqual(pod, a[name]) {
			t.Errorf("%s %s: the pod template did not change with the configuration: its pods would keep the old one", before.source, name)
		}
	}
}
