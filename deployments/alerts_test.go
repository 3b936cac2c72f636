package deployments_test

import (
	"context"
	"log/slog"
	"maps"
	"regexp"
	"slices"
	"testing"
	"time"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/model/rulefmt"
	"github.com/prometheus/prometheus/promql"
	"github.com/prometheus/prometheus/promql/parser"
	"github.com/prometheus/prometheus/promql/promqltest"
	"github.com/prometheus/prometheus/rules"
)

// alertCase is one story of synthetic series (promqltest's load syntax, one
// sample a minute from time 0) and whether the alert fires after `at` of
// evaluations every minute, as Prometheus would run them.
type alertCase struct {
	name   string
	series string
	at     time.Duration
	fires  bool
}

// alertCases: every alert of the chart's files/alerts.yml has a case that fires and
// one that does not; the test fails for an alert without both.
func alertCases() map[string][]alertCase {
	return map[string][]alertCase{
		"BillingWorkerDown": {
			{"compose job", `up{job="billing-worker",instance="w0:9100"} 1x5 0x10`, 12 * time.Minute, true},
			{"ServiceMonitor job", `up{job="billing-worker-metrics",instance="10.1.2.3:9100"} 0x10`, 10 * time.Minute, true},
			{"ServiceMonitor of a Helm release", `up{job="prod-billing-worker-metrics",instance="10.1.2.3:9100"} 0x10`, 10 * time.Minute, true},
			{"annotation scraping", `up{job="kubernetes-pods",app_kubernetes_io_name="billing-worker",instance="10.1.2.3:9100"} 0x10`, 10 * time.Minute, true},
			{"up", `up{job="billing-worker-metrics",instance="10.1.2.3:9100"} 1x20`, 20 * time.Minute, false},
			{"a blip shorter than for", `up{job="billing-worker",instance="w0:9100"} 1x5 0 1x10`, 15 * time.Minute, false},
			{"another service down", "up{job=\"payments-api\"} 0x20\nup{job=\"kubernetes-pods\",app_kubernetes_io_name=\"other\"} 0x20", 20 * time.Minute, false},
		},
		"BillingWorkersAbsent": {
			{"no worker target at all", `up{job="prometheus"} 1x20`, 10 * time.Minute, true},
			{"every worker down", `up{job="billing-worker-metrics",instance="a"} 0x20`, 10 * time.Minute, true},
			{"one of two up", "up{job=\"billing-worker-metrics\",instance=\"a\"} 1x20\nup{job=\"billing-worker-metrics\",instance=\"b\"} 0x20", 20 * time.Minute, false},
			{"annotation-scraped worker up", `up{job="kubernetes-pods",app_kubernetes_io_name="billing-worker"} 1x20`, 20 * time.Minute, false},
		},
		"BillingConsumerLagGrowing": {
			{"growing", `billing_consumer_lag{partition="0"} 0+100x60`, 40 * time.Minute, true},
			{"high but flat", `billing_consumer_lag{partition="0"} 5000x60`, 40 * time.Minute, false},
			{"growing but small", `billing_consumer_lag{partition="0"} 0+1x60`, 40 * time.Minute, false},
		},
		"BillingEventLagHigh": {
			{"p99 between 60 and 300 s", "billing_event_lag_seconds_bucket{le=\"1\"} 0x30\nbilling_event_lag_seconds_bucket{le=\"60\"} 0x30\nbilling_event_lag_seconds_bucket{le=\"300\"} 0+10x30\nbilling_event_lag_seconds_bucket{le=\"+Inf\"} 0+10x30", 25 * time.Minute, true},
			{"p99 under a second", "billing_event_lag_seconds_bucket{le=\"1\"} 0+10x30\nbilling_event_lag_seconds_bucket{le=\"60\"} 0+10x30\nbilling_event_lag_seconds_bucket{le=\"300\"} 0+10x30\nbilling_event_lag_seconds_bucket{le=\"+Inf\"} 0+10x30", 25 * time.Minute, false},
		},
		"BillingDependencyOutage": {
			{"outage retries", `billing_retries_total{kind="outage",instance="w0"} 0+5x30`, 20 * time.Minute, true},
			{"item retries only", `billing_retries_total{kind="item",instance="w0"} 0+5x30`, 20 * time.Minute, false},
		},
		"BillingOffsetCommitErrors": {
			{"failing commits", `billing_consumer_commits_total{result="error",instance="w0"} 0+1x30`, 25 * time.Minute, true},
			{"good commits", `billing_consumer_commits_total{result="ok",instance="w0"} 0+1x30`, 25 * time.Minute, false},
		},
		"BillingDLQRate": {
			{"one a second", `billing_dlq_published_total{class="invalid"} 0+60x30`, 25 * time.Minute, true},
			{"one a minute", `billing_dlq_published_total{class="invalid"} 0+1x30`, 25 * time.Minute, false},
		},
		"BillingDLQConflict": {
			{"one conflict", `billing_dlq_published_total{class="conflict"} 0x5 1x20`, 10 * time.Minute, true},
			{"invalid only", `billing_dlq_published_total{class="invalid"} 0+1x20`, 10 * time.Minute, false},
		},
		"BillingLockLost": {
			{"one loss", `billing_lock_lost_total{reason="expired"} 0x5 1x20`, 8 * time.Minute, true},
			{"none", `billing_lock_lost_total{reason="expired"} 0x20`, 8 * time.Minute, false},
		},
		"BillingIDGenLeaseLost": {
			{"lost", `billing_idgen_lease_renew_failures_total{reason="lost",instance="w0"} 0x5 1x10`, 8 * time.Minute, true},
			{"renew errors only", `billing_idgen_lease_renew_failures_total{reason="error",instance="w0"} 0+1x10`, 8 * time.Minute, false},
		},
		"BillingWorkerSteppedAside": {
			{"aside for ten minutes", `billing_idgen_stepped_aside{instance="w0"} 0x2 1x12`, 12 * time.Minute, true},
			{"aside for two minutes", `billing_idgen_stepped_aside{instance="w0"} 0x2 1x2 0x10`, 12 * time.Minute, false},
		},
		"BillingIDGenLeaseRenewErrors": {
			{"renew errors", `billing_idgen_lease_renew_failures_total{reason="error",instance="w0"} 0+1x20`, 15 * time.Minute, true},
			{"one lost lease", `billing_idgen_lease_renew_failures_total{reason="lost",instance="w0"} 0x5 1x15`, 15 * time.Minute, false},
		},
		"BillingLedgerDeadlocks": {
			{"two a second", `billing_ledger_deadlock_retries_total 0+120x40`, 30 * time.Minute, true},
			{"one every two seconds", `billing_ledger_deadlock_retries_total 0+30x40`, 30 * time.Minute, false},
		},
		"BillingDriftFound": {
			{"redis high", `billing_reconcile_findings_total{kind="redis_high"} 0x5 1x20`, 8 * time.Minute, true},
			{"missing key is no drift", `billing_reconcile_findings_total{kind="missing_key"} 0x5 1x20`, 8 * time.Minute, false},
		},
		"BillingLedgerInconsistent": {
			{"ledger mismatch", `billing_reconcile_findings_total{kind="ledger_mismatch"} 0x5 1x20`, 8 * time.Minute, true},
			{"grants mismatch", `billing_reconcile_findings_total{kind="grants_mismatch"} 0x5 1x20`, 8 * time.Minute, true},
			{"redis drift only", `billing_reconcile_findings_total{kind="redis_high"} 0x5 1x20`, 8 * time.Minute, false},
		},
		"BillingReconcileFailed": {
			// The loop starts at minute 5 with every status born at 0
			// (TestAlertedCountersAreBornAtZero); its first run fails.
			{"the first run fails", `billing_reconcile_runs_total{status="failed"} _x5 0 1x20`, 8 * time.Minute, true},
			{"a later run fails", `billing_reconcile_runs_total{status="failed"} 0x5 1x20`, 8 * time.Minute, true},
			// What born-at-0 prevents: a series created by its first failure is
			// one sample with no increase.
			{"a counter born at 1 is missed", `billing_reconcile_runs_total{status="failed"} _x5 1x20`, 8 * time.Minute, false},
			{"clean runs", `billing_reconcile_runs_total{status="clean"} 0+1x20`, 8 * time.Minute, false},
		},
		"BillingReconcilerJobFailed": {
			{"a run left drift", "kube_job_status_failed{namespace=\"billing\",job_name=\"billing-reconciler-29000000\"} 0 1x10\n" +
				"kube_job_status_active{namespace=\"billing\",job_name=\"billing-reconciler-29000000\"} 1 0x10\n" +
				"kube_job_status_succeeded{namespace=\"billing\",job_name=\"billing-reconciler-29000000\"} 0x11", 5 * time.Minute, true},
			{"a failed run being retried", "kube_job_status_failed{namespace=\"billing\",job_name=\"prod-billing-reconciler-29000000\"} 0 1x10\n" +
				"kube_job_status_active{namespace=\"billing\",job_name=\"prod-billing-reconciler-29000000\"} 1x11", 5 * time.Minute, false},
			{"a retry that succeeded", "kube_job_status_failed{namespace=\"billing\",job_name=\"billing-reconciler-29000000\"} 0 1x10\n" +
				"kube_job_status_succeeded{namespace=\"billing\",job_name=\"billing-reconciler-29000000\"} 0 0 1x9", 5 * time.Minute, false},
			{"another CronJob's Job", "kube_job_status_failed{namespace=\"billing\",job_name=\"nightly-export-29000000\"} 1x10", 5 * time.Minute, false},
		},
		"BillingReconcileStale": {
			{"loop stopped running", `billing_reconcile_last_run_timestamp_seconds 0 60 120 180x40`, 40 * time.Minute, true},
			{"CronJob not succeeding", `kube_cronjob_status_last_successful_time{cronjob="billing-reconciler",namespace="billing"} 0x40`, 40 * time.Minute, true},
			{"loop running", `billing_reconcile_last_run_timestamp_seconds 0+60x40`, 40 * time.Minute, false},
			{"CronJob succeeding", `kube_cronjob_status_last_successful_time{cronjob="prod-billing-reconciler",namespace="billing"} 0+60x40`, 40 * time.Minute, false},
		},
		"BillingStatementsNotExported": {
			{"the last run failed", "kube_cronjob_status_last_schedule_time{namespace=\"billing\",cronjob=\"billing-statements\"} 3600x200\n" +
				"kube_cronjob_status_last_successful_time{namespace=\"billing\",cronjob=\"billing-statements\"} 60x200", 150 * time.Minute, true},
			{"never succeeded", `kube_cronjob_status_last_schedule_time{namespace="billing",cronjob="prod-billing-statements"} 3600x200`, 150 * time.Minute, true},
			{"a run that took 40 minutes", "kube_cronjob_status_last_schedule_time{namespace=\"billing\",cronjob=\"billing-statements\"} 0x59 3600x140\n" +
				"kube_cronjob_status_last_successful_time{namespace=\"billing\",cronjob=\"billing-statements\"} 60x99 6000x100", 180 * time.Minute, false},
			{"succeeding", "kube_cronjob_status_last_schedule_time{namespace=\"billing\",cronjob=\"billing-statements\"} 3600x200\n" +
				"kube_cronjob_status_last_successful_time{namespace=\"billing\",cronjob=\"billing-statements\"} 3700x200", 150 * time.Minute, false},
			{"the reconciler's CronJob", `kube_cronjob_status_last_schedule_time{namespace="billing",cronjob="billing-reconciler"} 3600x200`, 150 * time.Minute, false},
		},
		"BillingReconcilerUnmonitored": {
			{"nothing to see", `up{job="prometheus"} 1x80`, 70 * time.Minute, true},
			{"CronJob visible", `kube_cronjob_status_last_successful_time{cronjob="billing-reconciler"} 0+60x80`, 70 * time.Minute, false},
			{"loop visible", `billing_reconcile_last_run_timestamp_seconds 0+60x80`, 70 * time.Minute, false},
		},
		"BillingQuotaEventsStuck": {
			{"relay failing", "billing_quota_outbox_oldest_unsent_seconds{instance=\"w0\"} 0+60x30\nbilling_quota_outbox_oldest_unsent_seconds{instance=\"w1\"} 0x30", 20 * time.Minute, true},
			{"relay keeping up", `billing_quota_outbox_oldest_unsent_seconds{instance="w0"} 0x10 1 0x20`, 30 * time.Minute, false},
		},
		"BillingRefundsPendingOverdue": {
			{"one overdue on one worker", "billing_refunds_pending_overdue{instance=\"w0\"} 0x5 1x30\nbilling_refunds_pending_overdue{instance=\"w1\"} 0x35", 25 * time.Minute, true},
			{"pending but not overdue", `billing_refunds_pending_overdue{instance="w0"} 0x30`, 25 * time.Minute, false},
			{"overdue for less than 15m", `billing_refunds_pending_overdue{instance="w0"} 0x5 1x5 0x20`, 25 * time.Minute, false},
		},
		"BillingConsumerGroupLagHigh": {
			{"broker-side lag with no worker up", `kafka_consumergroup_lag{consumergroup="billing-worker",topic="payment.succeeded",partition="0"} 0+100x40`, 35 * time.Minute, true},
			{"another group", `kafka_consumergroup_lag{consumergroup="analytics",topic="payment.succeeded",partition="0"} 0+100x40`, 35 * time.Minute, false},
		},
	}
}

var backticked = regexp.MustCompile("`[^`]+`")

// Every alert expression parses with Prometheus' own rule parser and
// evaluates, minute by minute, against synthetic series: it fires in the
// stories where it should and in no other.
func TestAlertsFire(t *testing.T) {
	file := alertsFile
	p := parser.NewParser(parser.Options{})
	groups, errs := rulefmt.ParseFile(file, false, model.UTF8Validation, p, slog.New(slog.DiscardHandler))
	if len(errs) > 0 {
		t.Fatalf("%s: %v", file, errs)
	}
	cases := alertCases()
	seen := map[string]bool{}
	for _, g := range groups.Groups {
		for _, r := range g.Rules {
			if r.Alert == "" {
				continue
			}
			seen[r.Alert] = true
			if !backticked.MatchString(r.Annotations["runbook"]) {
				t.Errorf("%s: no runbook annotation with a `command` to start from", r.Alert)
			}
			cs := cases[r.Alert]
			if !slices.ContainsFunc(cs, func(c alertCase) bool { return c.fires }) || !slices.ContainsFunc(cs, func(c alertCase) bool { return !c.fires }) {
				t.Errorf("%s: alertCases needs a story where it fires and one where it does not", r.Alert)
			}
			for _, c := range cs {
				t.Run(r.Alert+"/"+c.name, func(t *testing.T) {
					if got := evalAlert(t, p, r, c); got != c.fires {
						t.Errorf("fires = %v, want %v; expr %s over:\n%s", got, c.fires, r.Expr, c.series)
					}
				})
			}
		}
	}
	for name := range maps.Keys(cases) {
		if !seen[name] {
			t.Errorf("alertCases has %s, which %s does not define", name, file)
		}
	}
}

// evalAlert runs rule r every minute from 0 to c.at and says whether it fires then.
func evalAlert(t *testing.T, p parser.Parser, r rulefmt.Rule, c alertCase) bool {
	t.Helper()
	expr, err := p.ParseExpr(r.Expr)
	if err != nil {
		t.Fatal(err)
	}
	storage := promqltest.LoadedStorage(t, "load 1m\n"+c.series)
	t.Cleanup(func() { _ = storage.Close() })
	engine := promql.NewEngine(promql.EngineOpts{MaxSamples: 1_000_000, Timeout: 10 * time.Second,
		NoStepSubqueryIntervalFn: func(int64) int64 { return time.Minute.Milliseconds() }, Parser: p})
	t.Cleanup(func() { _ = engine.Close() })
	rule := rules.NewAlertingRule(r.Alert, expr, time.Duration(r.For), time.Duration(r.KeepFiringFor),
		labels.FromMap(r.Labels), labels.FromMap(r.Annotations), labels.EmptyLabels(), "", true, slog.New(slog.DiscardHandler))
	query := rules.EngineQueryFunc(engine, storage)
	for ts := time.Duration(0); ts <= c.at; ts += time.Minute {
		if _, err := rule.Eval(context.Background(), 0, time.Unix(0, 0).Add(ts), query, nil, 0); err != nil {
			t.Fatalf("eval at %v: %v", ts, err)
		}
	}
	return slices.ContainsFunc(rule.ActiveAlerts(), func(a *rules.Alert) bool { return a.State == rules.StateFiring })
}
