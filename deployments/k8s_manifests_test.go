package deployments_test

import (
	"bytes"
	"fmt"
	"path/filepath"
	"slices"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"
)

// manifests are the objects of the Kustomize base, decoded strictly into the
// Kubernetes API types (an unknown or misplaced field fails the test).
type manifests struct {
	images       []string // names the kustomization rewrites
	statefulSets []*appsv1.StatefulSet
	services     []*corev1.Service
	configMaps   map[string]*corev1.ConfigMap
	secrets      map[string]*corev1.Secret
	jobs         []*batchv1.Job
	cronJobs     []*batchv1.CronJob
	pdbs         []*policyv1.PodDisruptionBudget
}

const k8sDir = "k8s"

func loadManifests(t *testing.T) *manifests {
	t.Helper()
	var kust struct {
		Resources []string `json:"resources"`
		Images    []struct {
			Name string `json:"name"`
		} `json:"images"`
	}
	if err := yaml.Unmarshal(readFile(t, filepath.Join(k8sDir, "kustomization.yaml")), &kust); err != nil {
		t.Fatalf("kustomization.yaml: %v", err)
	}
	m := &manifests{configMaps: map[string]*corev1.ConfigMap{}, secrets: map[string]*corev1.Secret{}}
	for _, img := range kust.Images {
		m.images = append(m.images, img.Name)
	}
	files, _ := filepath.Glob(filepath.Join(k8sDir, "*.y*ml"))
	for _, f := range files {
		if base := filepath.Base(f); base != "kustomization.yaml" && !slices.Contains(kust.Resources, base) {
			t.Errorf("%s is not in kustomization.yaml's resources", f)
		}
	}
	for _, r := range kust.Resources {
		for i, doc := range splitYAML(readFile(t, filepath.Join(k8sDir, r))) {
			if err := m.add(doc); err != nil {
				t.Errorf("%s (document %d): %v", r, i+1, err)
			}
		}
	}
	return m
}

func splitYAML(b []byte) [][]byte {
	var docs [][]byte
	for _, d := range bytes.Split(b, []byte("\n---")) {
		if len(bytes.TrimSpace(d)) > 0 {
			docs = append(docs, d)
		}
	}
	return docs
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
	case "v1 Service":
		o := &corev1.Service{}
		m.services, obj = append(m.services, o), o
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
}

func (m *manifests) workloads() []workload {
	var out []workload
	for _, s := range m.statefulSets {
		n := int32(1)
		if s.Spec.Replicas != nil {
			n = *s.Spec.Replicas
		}
		out = append(out, workload{"StatefulSet", s.Name, &s.Spec.Template,
			[]string{fmt.Sprintf("%s-0", s.Name), fmt.Sprintf("%s-%d", s.Name, n-1)}})
	}
	for _, j := range m.jobs {
		out = append(out, workload{"Job", j.Name, &j.Spec.Template, []string{j.Name + "-x7k2p"}})
	}
	for _, c := range m.cronJobs {
		out = append(out, workload{"CronJob", c.Name, &c.Spec.JobTemplate.Spec.Template, []string{c.Name + "-29000000-x7k2p"}})
	}
	return out
}

// env is the environment the kubelet gives container c of pod podName.
func (m *manifests) env(c corev1.Container, podName string) (map[string]string, error) {
	env := map[string]string{}
	for _, from := range c.EnvFrom {
		switch {
		case from.ConfigMapRef != nil:
			cm, ok := m.configMaps[from.ConfigMapRef.Name]
			if !ok {
				return nil, fmt.Errorf("envFrom ConfigMap %q is not in the base", from.ConfigMapRef.Name)
			}
			for k, v := range cm.Data {
				env[from.Prefix+k] = v
			}
		case from.SecretRef != nil:
			s, ok := m.secrets[from.SecretRef.Name]
			if !ok {
				return nil, fmt.Errorf("envFrom Secret %q is not in the base", from.SecretRef.Name)
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
				return nil, fmt.Errorf("%s: ConfigMap %q is not in the base", e.Name, vf.ConfigMapKeyRef.Name)
			}
			env[e.Name] = cm.Data[vf.ConfigMapKeyRef.Key]
		case vf.SecretKeyRef != nil:
			s, ok := m.secrets[vf.SecretKeyRef.Name]
			if !ok {
				return nil, fmt.Errorf("%s: Secret %q is not in the base", e.Name, vf.SecretKeyRef.Name)
			}
			env[e.Name] = s.StringData[vf.SecretKeyRef.Key] + string(s.Data[vf.SecretKeyRef.Key])
		default:
			return nil, fmt.Errorf("%s: a valueFrom this test does not model", e.Name)
		}
	}
	return env, nil
}

// units are the programs a workload runs, one per container and pod name.
func (m *manifests) units(t *testing.T, w workload) []unit {
	t.Helper()
	var out []unit
	for _, c := range append(slices.Clone(w.pod.Spec.InitContainers), w.pod.Spec.Containers...) {
		for _, pod := range w.podNames {
			env, err := m.env(c, pod)
			if err != nil {
				t.Errorf("%s/%s container %s: %v", w.kind, w.name, c.Name, err)
				continue
			}
			out = append(out, unit{where: fmt.Sprintf("k8s %s/%s (pod %s, container %s)", w.kind, w.name, pod, c.Name),
				command: append(slices.Clone(c.Command), c.Args...), env: env})
		}
	}
	return out
}
