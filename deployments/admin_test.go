package deployments_test

import (
	"encoding/base64"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/dynamic"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	"sigs.k8s.io/yaml"

	"github.com/quotaflow/billing/internal/config"
)

// adminPeer is the peer the chart lets reach the read API by default.
var adminPeer = networkingv1.NetworkPolicyPeer{PodSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"billing-admin-client": "true"}}}

// adminWorker is the billing-worker container of a rendering and its pod.
func adminWorker(t *testing.T, m *manifests) (workload, corev1.Container) {
	t.Helper()
	for _, w := range m.workloads() {
		for _, c := range w.pod.Spec.Containers {
			if len(c.Command) > 0 && filepath.Base(c.Command[0]) == "billing-worker" {
				return w, c
			}
		}
	}
	t.Fatalf("%s: no billing-worker container", m.source)
	return workload{}, corev1.Container{}
}

// With the read API on, the worker listens on a port of its own, reads the
// token from a file of a read-only Secret volume mounted whole (a subPath
// mount never sees a rotated Secret), a ClusterIP Service reaches that port,
// and the NetworkPolicy admits only the configured peers to it.
func TestAdminAPIOn(t *testing.T) {
	custom := []any{map[string]any{"namespaceSelector": map[string]any{"matchLabels": map[string]any{"team": "support"}}}}
	customPeer := networkingv1.NetworkPolicyPeer{NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"team": "support"}}}
	tests := []struct {
		name   string
		m      *manifests
		port   int
		rate   string
		secret string
		peer   networkingv1.NetworkPolicyPeer
	}{
		{"helm generated token", renderHelm(t, helmEverything()), 9200, config.DefaultAdminRateLimit, "billing-admin", adminPeer},
		{"helm existing secret", renderHelm(t, map[string]any{"admin": map[string]any{
			"enabled": true, "port": 9300, "rateLimit": "2.5,5", "from": custom,
			"token": map[string]any{"existingSecret": "vault-admin", "key": "bearer"},
		}}), 9300, "2.5,5", "vault-admin", customPeer},
	}
	img := parseDockerfile(t)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := tt.m
			w, c := adminWorker(t, m)
			env := map[string]string{}
			for _, e := range c.Env {
				env[e.Name] = e.Value
			}
			if env["ADMIN_ADDR"] != ":"+strconv.Itoa(tt.port) {
				t.Errorf("ADMIN_ADDR %q, want :%d", env["ADMIN_ADDR"], tt.port)
			}
			if env["ADMIN_RATE_LIMIT"] != tt.rate {
				t.Errorf("ADMIN_RATE_LIMIT %q, want %q", env["ADMIN_RATE_LIMIT"], tt.rate)
			}
			i := slices.IndexFunc(c.Ports, func(p corev1.ContainerPort) bool { return int(p.ContainerPort) == tt.port })
			if i < 0 {
				t.Fatalf("no containerPort %d", tt.port)
			}
			portName := c.Ports[i].Name
			checkAdminTokenMount(t, w, c, env["ADMIN_TOKEN_FILE"], tt.secret)
			if tt.secret != "vault-admin" { // a Secret the rendering holds: the worker's configuration loads with it
				for _, u := range m.units(t, w) {
					if u.program() == "billing-worker" {
						if cfg := checkUnit(t, u, img); cfg.Admin.Addr == "" {
							t.Errorf("%s: the read API is off", u.where)
						}
					}
				}
			}
			checkPodHardening(t, m, w)
			checkAdminService(t, m, w, c, tt.port)
			checkAdminNetworkPolicy(t, m, w, portName, tt.port, tt.peer)
			// Only the worker serves it: the migration and the reconciler never see the token.
			for _, o := range m.workloads() {
				for _, oc := range append(slices.Clone(o.pod.Spec.InitContainers), o.pod.Spec.Containers...) {
					if oc.Name == c.Name && o.name == w.name {
						continue
					}
					env, err := m.env(&o.pod.Spec, oc, o.podNames[0])
					if err != nil {
						t.Fatal(err)
					}
					if env["ADMIN_ADDR"]+env["ADMIN_TOKEN_FILE"] != "" {
						t.Errorf("%s/%s container %s gets the read API's variables", o.kind, o.name, oc.Name)
					}
				}
			}
		})
	}
}

func checkAdminTokenMount(t *testing.T, w workload, c corev1.Container, file, secret string) {
	t.Helper()
	for _, vm := range c.VolumeMounts {
		key, ok := strings.CutPrefix(file, strings.TrimSuffix(vm.MountPath, "/")+"/")
		if !ok {
			continue
		}
		if !vm.ReadOnly || vm.SubPath != "" || vm.SubPathExpr != "" {
			t.Errorf("ADMIN_TOKEN_FILE %s: mount %s readOnly %v subPath %q; want read-only, whole volume", file, vm.Name, vm.ReadOnly, vm.SubPath)
		}
		i := slices.IndexFunc(w.pod.Spec.Volumes, func(v corev1.Volume) bool { return v.Name == vm.Name })
		if i < 0 || w.pod.Spec.Volumes[i].Secret == nil || w.pod.Spec.Volumes[i].Secret.SecretName != secret {
			t.Fatalf("ADMIN_TOKEN_FILE %s: volume %s is no volume of Secret %s", file, vm.Name, secret)
		}
		s := w.pod.Spec.Volumes[i].Secret
		if s.Optional != nil && *s.Optional {
			t.Errorf("Secret volume %s is optional: a missing token should hold the pod, not crash it", vm.Name)
		}
		if len(s.Items) > 0 && !slices.ContainsFunc(s.Items, func(k corev1.KeyToPath) bool { return k.Path == key }) {
			t.Errorf("ADMIN_TOKEN_FILE %s: Secret volume %s projects no %s", file, vm.Name, key)
		}
		return
	}
	t.Errorf("ADMIN_TOKEN_FILE %q is under no volume mount", file)
}

func checkAdminService(t *testing.T, m *manifests, w workload, c corev1.Container, port int) {
	t.Helper()
	reached := false
	for _, svc := range m.services {
		if svc.Spec.ClusterIP == corev1.ClusterIPNone || !selects(svc.Spec.Selector, w.pod.Labels) {
			continue
		}
		for _, p := range svc.Spec.Ports {
			if containerPort(t, c, p.TargetPort) != port {
				continue
			}
			reached = true
			if svc.Spec.Type != "" && svc.Spec.Type != corev1.ServiceTypeClusterIP {
				t.Errorf("Service/%s exposes the read API as %s", svc.Name, svc.Spec.Type)
			}
			if strings.Contains(svc.Name, "metrics") {
				t.Errorf("Service/%s carries the read API beside what Prometheus scrapes", svc.Name)
			}
		}
	}
	if !reached {
		t.Errorf("no ClusterIP Service reaches the read API port %d", port)
	}
}

// checkAdminNetworkPolicy: some policy isolates the worker pods' ingress,
// every rule that admits the read API port names exactly the peers, and the
// HTTP port stays open (probes, scraping).
func checkAdminNetworkPolicy(t *testing.T, m *manifests, w workload, portName string, port int, peer networkingv1.NetworkPolicyPeer) {
	t.Helper()
	admitted, isolated := false, false
	for _, np := range m.networkPolicies {
		if !selects(np.Spec.PodSelector.MatchLabels, w.pod.Labels) || !slices.Contains(np.Spec.PolicyTypes, networkingv1.PolicyTypeIngress) {
			continue
		}
		isolated = true
		for _, r := range np.Spec.Ingress {
			if !admitsPort(r, portName, port) {
				continue
			}
			admitted = true
			if len(r.From) != 1 || !equalYAML(t, r.From[0], peer) {
				t.Errorf("NetworkPolicy/%s admits the read API port from %v, want only %v", np.Name, r.From, peer)
			}
		}
	}
	if !isolated || !admitted {
		t.Errorf("%s: no NetworkPolicy isolates the workers (%v) and admits the read API port (%v)", m.source, isolated, admitted)
	}
}

func admitsPort(r networkingv1.NetworkPolicyIngressRule, name string, port int) bool {
	if len(r.Ports) == 0 {
		return true // every port
	}
	return slices.ContainsFunc(r.Ports, func(p networkingv1.NetworkPolicyPort) bool {
		return p.Port == nil || *p.Port == intstr.FromString(name) || *p.Port == intstr.FromInt(port)
	})
}

func equalYAML(t *testing.T, a, b any) bool {
	t.Helper()
	x, err := yaml.Marshal(a)
	if err != nil {
		t.Fatal(err)
	}
	y, err := yaml.Marshal(b)
	if err != nil {
		t.Fatal(err)
	}
	return string(x) == string(y)
}

// Off (the chart's default), nothing of the read API is rendered.
func TestAdminAPIOff(t *testing.T) {
	for _, m := range []*manifests{renderHelm(t, nil)} {
		for _, w := range m.workloads() {
			for _, c := range append(slices.Clone(w.pod.Spec.InitContainers), w.pod.Spec.Containers...) {
				for _, e := range c.Env {
					if strings.HasPrefix(e.Name, "ADMIN_") {
						t.Errorf("%s %s/%s: %s is set", m.source, w.kind, w.name, e.Name)
					}
				}
				for _, p := range c.Ports {
					if p.Name == "admin" || p.ContainerPort == 9200 {
						t.Errorf("%s %s/%s: port %s/%d", m.source, w.kind, w.name, p.Name, p.ContainerPort)
					}
				}
			}
			for _, v := range w.pod.Spec.Volumes {
				if strings.Contains(v.Name, "admin") {
					t.Errorf("%s %s/%s: volume %s", m.source, w.kind, w.name, v.Name)
				}
			}
		}
		for _, svc := range m.services {
			for _, p := range svc.Spec.Ports {
				if strings.Contains(svc.Name, "admin") || p.TargetPort.StrVal == "admin" {
					t.Errorf("%s Service/%s: port %s", m.source, svc.Name, p.Name)
				}
			}
		}
		for name := range m.secrets {
			if strings.Contains(name, "admin") {
				t.Errorf("%s: Secret %s", m.source, name)
			}
		}
		for _, np := range m.networkPolicies {
			for _, r := range np.Spec.Ingress {
				if slices.ContainsFunc(r.Ports, func(p networkingv1.NetworkPolicyPort) bool { return p.Port != nil && p.Port.StrVal == "admin" }) {
					t.Errorf("%s NetworkPolicy/%s admits an admin port", m.source, np.Name)
				}
			}
		}
	}
}

// The chart's generated token is long enough, differs between installs and
// survives an upgrade (lookup finds the Secret of the release).
func TestHelmAdminToken(t *testing.T) {
	tokenOf := func(m *manifests) string {
		t.Helper()
		s, ok := m.secrets["billing-admin"]
		if !ok {
			t.Fatalf("no Secret billing-admin")
		}
		return s.StringData["token"]
	}
	first, second := tokenOf(renderHelm(t, helmEverything())), tokenOf(renderHelm(t, helmEverything()))
	if len(first) < config.MinAdminTokenChars || first == second || strings.Contains(first, "CHANGE-ME") {
		t.Errorf("generated tokens %q and %q: want random, %d+ characters", first, second, config.MinAdminTokenChars)
	}
	existing := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "Secret",
		"metadata": map[string]any{"name": "billing-admin", "namespace": "billing"},
		"data":     map[string]any{"token": base64.StdEncoding.EncodeToString([]byte("kept-across-upgrades-1234"))}}}
	if got := tokenOf(renderHelmIn(t, helmEverything(), newFakeCluster(existing))); got != "kept-across-upgrades-1234" {
		t.Errorf("an upgrade renders token %q, want the release's Secret's", got)
	}
	// The read API cannot share the port Prometheus scrapes.
	if _, err := helmFiles(t, map[string]any{"admin": map[string]any{"enabled": true, "port": 9100}}, nil); err == nil || !strings.Contains(err.Error(), "admin.port") {
		t.Errorf("admin.port = metrics.port: %v", err)
	}
}

// fakeCluster is a cluster holding objs, for the chart's lookup.
type fakeCluster struct {
	client *dynamicfake.FakeDynamicClient
}

func newFakeCluster(objs ...runtime.Object) fakeCluster {
	return fakeCluster{dynamicfake.NewSimpleDynamicClient(runtime.NewScheme(), objs...)}
}

func (c fakeCluster) GetClientFor(apiVersion, kind string) (dynamic.NamespaceableResourceInterface, bool, error) {
	gv, err := schema.ParseGroupVersion(apiVersion)
	if err != nil {
		return nil, false, err
	}
	return c.client.Resource(gv.WithResource(strings.ToLower(kind) + "s")), true, nil
}
