package deployments_test

import (
	"cmp"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
)

// The statements CronJob is off by default. On, it runs `reconciler export
// --previous` on a UTC schedule, never twice at once, and writes its
// statements and metrics textfile to the mounted volume: the claim given,
// else an emptyDir. cmd/reconciler holds its exit codes and flags.
func TestK8sStatements(t *testing.T) {
	if cj := statementsCronJob(renderHelm(t, nil)); cj != nil {
		t.Fatalf("CronJob/%s rendered with the defaults", cj.Name)
	}
	for _, c := range []struct {
		values map[string]any
		claim  string
	}{
		{map[string]any{"enabled": true, "persistentVolumeClaim": "billing-statements", "previous": "month", "schedule": "30 0 1 * *"}, "billing-statements"},
		{map[string]any{"enabled": true}, ""},
	} {
		cj := statementsCronJob(renderHelm(t, map[string]any{"statements": c.values}))
		if cj == nil {
			t.Fatalf("%v: no statements CronJob", c.values)
		}
		where := "CronJob/" + cj.Name
		if cj.Spec.TimeZone == nil || *cj.Spec.TimeZone != "Etc/UTC" || cj.Spec.ConcurrencyPolicy != batchv1.ForbidConcurrent {
			t.Errorf("%s: time zone %v, concurrency %q; want Etc/UTC (--previous is in UTC) and Forbid", where, cj.Spec.TimeZone, cj.Spec.ConcurrencyPolicy)
		}
		if want, _ := c.values["schedule"].(string); want != "" && cj.Spec.Schedule != want {
			t.Errorf("%s: schedule %q, want %q", where, cj.Spec.Schedule, want)
		}
		pod := cj.Spec.JobTemplate.Spec.Template.Spec
		if pod.RestartPolicy != corev1.RestartPolicyNever || cj.Spec.JobTemplate.Spec.PodFailurePolicy == nil {
			t.Errorf("%s: restartPolicy %q and no podFailurePolicy: exit codes are results", where, pod.RestartPolicy)
		}
		ctr := pod.Containers[0]
		argv := append(slices.Clone(ctr.Command), ctr.Args...)
		previous, _ := c.values["previous"].(string)
		if !slices.Equal(argv[:4], []string{"/usr/local/bin/reconciler", "export", "--previous", cmp.Or(previous, "day")}) {
			t.Errorf("%s: command %v", where, argv)
		}
		var mount string
		for _, vm := range ctr.VolumeMounts {
			if vm.Name == "statements" {
				mount = vm.MountPath
			}
		}
		for _, flag := range []string{"--out", "--metrics-file"} {
			i := slices.Index(argv, flag)
			if mount == "" || i < 0 || !strings.HasPrefix(filepath.Clean(argv[i+1])+"/", filepath.Clean(mount)+"/") {
				t.Errorf("%s: %s %v is not on the statements volume (mounted at %q)", where, flag, argv, mount)
			}
		}
		i := slices.IndexFunc(pod.Volumes, func(v corev1.Volume) bool { return v.Name == "statements" })
		switch {
		case i < 0:
			t.Errorf("%s: no statements volume", where)
		case c.claim != "" && (pod.Volumes[i].PersistentVolumeClaim == nil || pod.Volumes[i].PersistentVolumeClaim.ClaimName != c.claim):
			t.Errorf("%s: volume %+v, want the claim %s", where, pod.Volumes[i], c.claim)
		case c.claim == "" && pod.Volumes[i].EmptyDir == nil:
			t.Errorf("%s: volume %+v, want an emptyDir", where, pod.Volumes[i])
		}
	}
}

func statementsCronJob(m *manifests) *batchv1.CronJob {
	for _, cj := range m.cronJobs {
		if strings.HasSuffix(cj.Name, "-statements") {
			return cj
		}
	}
	return nil
}
