package deployments_test

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"
)

// manifests are the objects of one rendering of the chart (as helm template
// does), decoded strictly into the Kubernetes API types: an unknown or
// misplaced field fails the test.
type manifests struct {
	source          string // the rendering, for messages
	statefulSets    []*appsv1.StatefulSet
	deployments     []*appsv1.Deployment
	services        []*corev1.Service
	serviceAccounts []*corev1.ServiceAccount
	configMaps      map[string]*corev1.ConfigMap
	secrets         map[string]*corev1.Secret
	jobs            []*batchv1.Job
	cronJobs        []*batchv1.CronJob
	pdbs            []*policyv1.PodDisruptionBudget
	networkPolicies []*networkingv1.NetworkPolicy
	serviceMonitors []*serviceMonitor
	prometheusRules []*prometheusRule
	secretDir       string // where mounted Secret keys are written for config.Load to read
}

// serviceMonitor and prometheusRule are the parts of the Prometheus Operator
// kinds the tests read (its Go types are not a dependency).
type serviceMonitor struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata"`
	Spec              struct {
		PodTargetLabels []string             `json:"podTargetLabels"`
		Selector        metav1.LabelSelector `json:"selector"`
		Endpoints       []struct {
			Port     string `json:"port"`
			Path     string `json:"path"`
			Interval string `json:"interval"`
		} `json:"endpoints"`
	} `json:"spec"`
}

type prometheusRule struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata"`
	Spec              ruleFile `json:"spec"`
}

func newManifests(t *testing.T, source string) *manifests {
	return &manifests{source: source, configMaps: map[string]*corev1.ConfigMap{}, secrets: map[string]*corev1.Secret{}, secretDir: t.TempDir()}
}

func (m *manifests) addAll(t *testing.T, stream []byte) {
	t.Helper()
	for i, doc := range splitYAML(stream) {
		if err := m.add(doc); err != nil {
			t.Errorf("%s (document %d): %v", m.source, i+1, err)
		}
	}
}

func splitYAML(b []byte) [][]byte {
	var docs [][]byte
	for _, d := range bytes.Split(b, []byte("\n---")) {
		if len(bytes.TrimSpace(d)) > 0 && len(bytes.TrimSpace(stripComments(d))) > 0 {
			docs = append(docs, d)
		}
	}
	return docs
}

func stripComments(b []byte) []byte {
	var out [][]byte
	for _, l := range bytes.Split(b, []byte("\n")) {
		if !bytes.HasPrefix(bytes.TrimSpace(l), []byte("#")) {
			out = append(out, l)
		}
	}
	return bytes.Join(out, []byte("\n"))
}

func (m *manifests) add(doc []byte) error {
	var tm metav1.TypeMeta
	if err := yaml.Unmarshal(doc, &tm); err != nil {
		return err
	}
	var obj any
	switch tm.APIVersion + " " + tm.Kind {
	case "apps/v1 StatefulSet":
		o := &appsv1.StatefulSet{}
		m.statefulSets, obj = append(m.statefulSets, o), o
	case "apps/v1 Deployment":
		o := &appsv1.Deployment{}
		m.deployments, obj = append(m.deployments, o), o
	case "v1 Service":
		o := &corev1.Service{}
		m.services, obj = append(m.services, o), o
	case "v1 ServiceAccount":
		o := &corev1.ServiceAccount{}
		m.serviceAccounts, obj = append(m.serviceAccounts, o), o
	case "v1 ConfigMap":
		o := &corev1.ConfigMap{}
		obj = o
		defer func() { m.configMaps[o.Name] = o }()
	case "v1 Secret":
		o := &corev1.Secret{}
		obj = o
		defer func() { m.secrets[o.Name] = o }()
	case "batch/v1 Job":
		o := &batchv1.Job{}
		m.jobs, obj = append(m.jobs, o), o
	case "batch/v1 CronJob":
		o := &batchv1.CronJob{}
		m.cronJobs, obj = append(m.cronJobs, o), o
	case "policy/v1 PodDisruptionBudget":
		o := &policyv1.PodDisruptionBudget{}
		m.pdbs, obj = append(m.pdbs, o), o
	case "networking.k8s.io/v1 NetworkPolicy":
		o := &networkingv1.NetworkPolicy{}
		m.networkPolicies, obj = append(m.networkPolicies, o), o
	case "monitoring.coreos.com/v1 ServiceMonitor":
		o := &serviceMonitor{}
		m.serviceMonitors, obj = append(m.serviceMonitors, o), o
	case "monitoring.coreos.com/v1 PrometheusRule":
		o := &prometheusRule{}
		m.prometheusRules, obj = append(m.prometheusRules, o), o
	default:
		return fmt.Errorf("%s %s: a kind this test does not decode (add it)", tm.APIVersion, tm.Kind)
	}
	return yaml.UnmarshalStrict(doc, obj)
}

// workload is a pod template and the names its pods get.
type workload struct {
	kind, name string
	pod        *corev1.PodTemplateSpec
	podNames   []string // the first and the last pod
	hooks      []string // Helm hooks (helm.sh/hook) of the object
}

func (m *manifests) workloads() []workload {
	var out []workload
	for _, s := range m.statefulSets {
		n := int32(1)
		if s.Spec.Replicas != nil {
			n = *s.Spec.Replicas
		}
		out = append(out, workload{"StatefulSet", s.Name, &s.Spec.Template,
			[]string{fmt.Sprintf("%s-0", s.Name), fmt.Sprintf("%s-%d", s.Name, n-1)}, nil})
	}
	for _, d := range m.deployments {
		out = append(out, workload{"Deployment", d.Name, &d.Spec.Template, []string{d.Name + "-5d8f7c9b4-x7k2p"}, nil})
	}
	for _, j := range m.jobs {
		out = append(out, workload{"Job", j.Name, &j.Spec.Template, []string{j.Name + "-x7k2p"}, hooks(j.ObjectMeta)})
	}
	for _, c := range m.cronJobs {
		out = append(out, workload{"CronJob", c.Name, &c.Spec.JobTemplate.Spec.Template, []string{c.Name + "-29000000-x7k2p"}, nil})
	}
	return out
}

func hooks(o metav1.ObjectMeta) []string {
	if h := o.Annotations["helm.sh/hook"]; h != "" {
		return strings.Split(h, ",")
	}
	return nil
}

// env is the environment the kubelet gives container c of pod podName. A
// variable naming a file of a mounted Secret gets a path where the test wrote
// that key, so config.Load reads what the pod would.
func (m *manifests) env(spec *corev1.PodSpec, c corev1.Container, podName string) (map[string]string, error) {
	env := map[string]string{}
	for _, from := range c.EnvFrom {
		switch {
		case from.ConfigMapRef != nil:
			cm, ok := m.configMaps[from.ConfigMapRef.Name]
			if !ok {
				return nil, fmt.Errorf("envFrom ConfigMap %q is not in the %s output", from.ConfigMapRef.Name, m.source)
			}
			for k, v := range cm.Data {
				env[from.Prefix+k] = v
			}
		case from.SecretRef != nil:
			s, ok := m.secrets[from.SecretRef.Name]
			if !ok {
				return nil, fmt.Errorf("envFrom Secret %q is not in the %s output", from.SecretRef.Name, m.source)
			}
			for k, v := range s.Data {
				env[from.Prefix+k] = string(v)
			}
			for k, v := range s.StringData {
				env[from.Prefix+k] = v
			}
		}
	}
	for _, e := range c.Env {
		switch vf := e.ValueFrom; {
		case vf == nil:
			env[e.Name] = e.Value
		case vf.FieldRef != nil:
			switch vf.FieldRef.FieldPath {
			case "metadata.name":
				env[e.Name] = podName
			case "status.podIP":
				env[e.Name] = "10.1.2.3"
			case "metadata.namespace":
				env[e.Name] = "billing"
			default:
				return nil, fmt.Errorf("%s: fieldRef %s is not modelled by this test", e.Name, vf.FieldRef.FieldPath)
			}
		case vf.ConfigMapKeyRef != nil:
			cm, ok := m.configMaps[vf.ConfigMapKeyRef.Name]
			if !ok {
				return nil, fmt.Errorf("%s: ConfigMap %q is not in the %s output", e.Name, vf.ConfigMapKeyRef.Name, m.source)
			}
			env[e.Name] = cm.Data[vf.ConfigMapKeyRef.Key]
		case vf.SecretKeyRef != nil:
			s, ok := m.secrets[vf.SecretKeyRef.Name]
			if !ok {
				return nil, fmt.Errorf("%s: Secret %q is not in the %s output", e.Name, vf.SecretKeyRef.Name, m.source)
			}
			env[e.Name] = s.StringData[vf.SecretKeyRef.Key] + string(s.Data[vf.SecretKeyRef.Key])
		default:
			return nil, fmt.Errorf("%s: a valueFrom this test does not model", e.Name)
		}
	}
	for k, v := range env {
		if !strings.HasSuffix(k, "_FILE") {
			continue
		}
		local, err := m.secretFile(spec, c, v)
		if err != nil {
			return nil, fmt.Errorf("%s=%s: %w", k, v, err)
		}
		if local != "" {
			env[k] = local
		}
	}
	return env, nil
}

// secretFile writes the Secret key that path names inside container c (when
// a Secret volume is mounted there) to a local file and returns its name.
func (m *manifests) secretFile(spec *corev1.PodSpec, c corev1.Container, path string) (string, error) {
	for _, vm := range c.VolumeMounts {
		key, ok := strings.CutPrefix(path, strings.TrimSuffix(vm.MountPath, "/")+"/")
		if !ok {
			continue
		}
		i := slices.IndexFunc(spec.Volumes, func(v corev1.Volume) bool { return v.Name == vm.Name })
		if i < 0 || spec.Volumes[i].Secret == nil {
			return "", fmt.Errorf("volume %q is no Secret volume of the pod", vm.Name)
		}
		s, ok := m.secrets[spec.Volumes[i].Secret.SecretName]
		if !ok {
			return "", fmt.Errorf("Secret %q is not in the %s output", spec.Volumes[i].Secret.SecretName, m.source)
		}
		v, ok := s.StringData[key]
		if !ok {
			if b, inData := s.Data[key]; inData {
				v, ok = string(b), true
			}
		}
		if !ok {
			return "", fmt.Errorf("Secret %q has no key %q", s.Name, key)
		}
		local := filepath.Join(m.secretDir, s.Name+"."+key)
		return local, os.WriteFile(local, []byte(v), 0o600)
	}
	return "", nil // not a Secret file: config.Load judges the path
}

// units are the programs a workload runs, one per container and pod name.
func (m *manifests) units(t *testing.T, w workload) []unit {
	t.Helper()
	var out []unit
	for _, c := range append(slices.Clone(w.pod.Spec.InitContainers), w.pod.Spec.Containers...) {
		for _, pod := range w.podNames {
			env, err := m.env(&w.pod.Spec, c, pod)
			if err != nil {
				t.Errorf("%s %s/%s container %s: %v", m.source, w.kind, w.name, c.Name, err)
				continue
			}
			out = append(out, unit{where: fmt.Sprintf("%s %s/%s (pod %s, container %s)", m.source, w.kind, w.name, pod, c.Name),
				command: append(slices.Clone(c.Command), c.Args...), env: env})
		}
	}
	return out
}
