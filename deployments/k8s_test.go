package deployments_test

import (
	"fmt"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/quotaflow/billing/internal/httpserver"
)

// Every container of the base runs a program of this repository with an
// environment config.Load accepts.
func TestK8sPrograms(t *testing.T) {
	m, img := loadManifests(t), parseDockerfile(t)
	ws := m.workloads()
	if len(ws) == 0 {
		t.Fatal("no workloads in the base")
	}
	for _, w := range ws {
		for _, u := range m.units(t, w) {
			checkUnit(t, u, img)
		}
	}
}

func TestK8sWorker(t *testing.T) {
	m := loadManifests(t)
	workers := 0
	for _, w := range m.workloads() {
		if w.kind != "StatefulSet" {
			continue
		}
		s := m.statefulSets[slices.IndexFunc(m.statefulSets, func(x *appsv1.StatefulSet) bool { return x.Name == w.name })]
		for _, c := range s.Spec.Template.Spec.Containers {
			if len(c.Command) == 0 || filepath.Base(c.Command[0]) != "billing-worker" {
				continue
			}
			workers++
			checkWorkerContainer(t, m, s, c, w.podNames)
		}
	}
	if workers == 0 {
		t.Fatal("no StatefulSet runs billing-worker")
	}
}

func checkWorkerContainer(t *testing.T, m *manifests, s *appsv1.StatefulSet, c corev1.Container, podNames []string) {
	t.Helper()
	where := "StatefulSet/" + s.Name
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
	ids := map[int]string{}
	var units []unit
	for _, pod := range podNames {
		env, err := m.env(c, pod)
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
	}{{"liveness", c.LivenessProbe, httpserver.PathHealth}, {"readiness", c.ReadinessProbe, httpserver.PathReady}} {
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
		t.Errorf("StatefulSet/%s: the selector does not match the pod labels", s.Name)
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
		t.Errorf("StatefulSet/%s: serviceName %q is not a headless Service selecting its pods", s.Name, s.Spec.ServiceName)
	}
	if !metrics {
		t.Errorf("StatefulSet/%s: no Service exposes the http port of its pods", s.Name)
	}
	pdb := false
	for _, p := range m.pdbs {
		if p.Spec.Selector != nil && selects(p.Spec.Selector.MatchLabels, labels) {
			pdb = true
			if p.Spec.MaxUnavailable == nil || p.Spec.MaxUnavailable.IntValue() != 1 {
				t.Errorf("PodDisruptionBudget/%s: maxUnavailable %v, want 1", p.Name, p.Spec.MaxUnavailable)
			}
		}
	}
	if !pdb {
		t.Errorf("StatefulSet/%s: no PodDisruptionBudget", s.Name)
	}
}

func TestK8sReconcilerCronJob(t *testing.T) {
	m := loadManifests(t)
	found := false
	for _, cj := range m.cronJobs {
		for _, c := range cj.Spec.JobTemplate.Spec.Template.Spec.Containers {
			if len(c.Command) == 0 || filepath.Base(c.Command[0]) != "reconciler" {
				continue
			}
			found = true
			if !slices.Contains(append(c.Command, c.Args...), "--once") {
				t.Errorf("CronJob/%s: the reconciler runs without --once", cj.Name)
			}
		}
		if cj.Spec.ConcurrencyPolicy != batchv1.ForbidConcurrent {
			t.Errorf("CronJob/%s: concurrencyPolicy %q, want Forbid", cj.Name, cj.Spec.ConcurrencyPolicy)
		}
		if rp := cj.Spec.JobTemplate.Spec.Template.Spec.RestartPolicy; rp != corev1.RestartPolicyNever {
			t.Errorf("CronJob/%s: restartPolicy %q, want Never (exit codes 1 and 2 are results, not crashes)", cj.Name, rp)
		}
	}
	if !found {
		t.Error("no CronJob runs the reconciler")
	}
}

func TestK8sMigrateJob(t *testing.T) {
	m := loadManifests(t)
	for _, j := range m.jobs {
		for _, c := range j.Spec.Template.Spec.Containers {
			if argv := append(slices.Clone(c.Command), c.Args...); len(argv) >= 2 && filepath.Base(argv[0]) == "billingctl" && argv[1] == "migrate" {
				return
			}
		}
	}
	t.Error("no Job runs billingctl migrate")
}

// Every pod runs as non-root on a read-only root, without capabilities, with
// requests and limits, from the one image.
func TestK8sPodHardening(t *testing.T) {
	m := loadManifests(t)
	if !slices.Contains(m.images, imageRepo) {
		t.Errorf("kustomization.yaml images: %v lacks %s (overlays set its tag there)", m.images, imageRepo)
	}
	for _, w := range m.workloads() {
		spec := w.pod.Spec
		podNonRoot := spec.SecurityContext != nil && spec.SecurityContext.RunAsNonRoot != nil && *spec.SecurityContext.RunAsNonRoot
		for _, c := range append(slices.Clone(spec.InitContainers), spec.Containers...) {
			where := fmt.Sprintf("%s/%s container %s", w.kind, w.name, c.Name)
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
		}
	}
}

// The Secret holds only placeholders: real credentials never enter the repository.
func TestK8sSecretPlaceholders(t *testing.T) {
	m := loadManifests(t)
	known := knownVariables()
	for _, s := range m.secrets {
		if len(s.Data) > 0 {
			t.Errorf("Secret/%s: use stringData with CHANGE-ME placeholders, not data", s.Name)
		}
		for k, v := range s.StringData {
			if !strings.Contains(v, "CHANGE-ME") {
				t.Errorf("Secret/%s: %s is not an obvious CHANGE-ME placeholder", s.Name, k)
			}
			if !known[k].Secret {
				t.Errorf("Secret/%s: %s is not a secret variable of config (put it in the ConfigMap)", s.Name, k)
			}
		}
	}
	if len(m.secrets) == 0 {
		t.Error("the base has no Secret for MYSQL_DSN, REDIS_PASSWORD, KAFKA_SASL_PASSWORD")
	}
}
