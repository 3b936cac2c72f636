package demo

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"time"

	"github.com/quotaflow/billing/internal/dlq"
	"github.com/quotaflow/billing/internal/invariant"
	"github.com/quotaflow/billing/internal/reconcile"
	"github.com/quotaflow/billing/internal/scenario"
)

// Summary is what the demo did and found.
type Summary struct {
	Database, Prefix string
	HTTPAddr         string
	Rate             float64

	Traffic     scenario.Traffic
	Unknown     int // merchants never granted
	NearlyEmpty int
	Restarts    int
	ConsumeTime time.Duration

	Outcomes                           map[string]int64
	DLQ                                map[dlq.Class]int
	LatencyP50, LatencyP99, LatencyMax float64 // ms, occurred_at to ledger row

	Corrupted  []corruption
	Reconcile  *reconcile.Report
	Recheck    *reconcile.Report
	Invariants *invariant.Report
	Events     eventsSummary
	Refunds    refundsSummary
	// MidwayGrant is the merchant granted while the traffic ran ("" if none).
	MidwayGrant string
}

// Throughput is messages per second from the first produce to the last commit.
func (s *Summary) Throughput() float64 {
	if s.ConsumeTime <= 0 {
		return 0
	}
	return float64(len(s.Traffic.Messages)) / s.ConsumeTime.Seconds()
}

// failure says which check did not hold, or nil.
func (s *Summary) failure() error {
	var errs []error
	if s.Invariants == nil || !s.Invariants.OK() {
		errs = append(errs, errors.New("invariants broken"))
	}
	if len(s.Refunds.Mismatch) > 0 {
		errs = append(errs, errors.New("refunds differ from the reference"))
	}
	if len(s.Events.Mismatch) > 0 || s.Events.ByType == nil {
		errs = append(errs, errors.New("balance events differ from the ledger's"))
	}
	if s.Reconcile != nil {
		found := map[string]bool{}
		for _, f := range s.Reconcile.Findings {
			found[f.MerchantID+" "+string(f.Kind)] = true
		}
		for _, c := range s.Corrupted {
			if !found[c.merchant+" "+string(c.kind)] {
				errs = append(errs, fmt.Errorf("reconciler missed %s on %s", c.kind, c.merchant))
			}
		}
		// A grant or a refund drops the quota hash: a merchant granted midway
		// or refunded may have had no event since, a routine missing_key the
		// reconciler hydrates.
		routine := s.RoutineMissing()
		if len(s.Reconcile.Findings)-routine != len(s.Corrupted) {
			errs = append(errs, fmt.Errorf("reconciler reported %d findings for %d corruptions", len(s.Reconcile.Findings), len(s.Corrupted)))
		}
		unrepaired := slices.ContainsFunc(s.Reconcile.Findings, func(f reconcile.Finding) bool { return f.Action != reconcile.ActionRepaired })
		if s.Reconcile.Status != reconcile.StatusRepaired || unrepaired {
			errs = append(errs, fmt.Errorf("reconciler did not repair everything (status %s)", s.Reconcile.Status))
		}
	}
	if s.Recheck != nil && (s.Recheck.Status != reconcile.StatusClean || len(s.Recheck.Findings) > 0) {
		errs = append(errs, fmt.Errorf("second reconciler pass not clean (status %s, %d findings)", s.Recheck.Status, len(s.Recheck.Findings)))
	}
	want := map[dlq.Class]int{dlq.ClassInvalid: s.Traffic.Malformed, dlq.ClassConflict: s.Traffic.Conflicts + s.Refunds.DeadLettered}
	for c, n := range want {
		if s.DLQ[c] != n {
			errs = append(errs, fmt.Errorf("DLQ holds %d %s records, want %d", s.DLQ[c], c, n))
		}
	}
	return errors.Join(errs...)
}

// RoutineMissing counts the reconciler's missing keys of merchants whose
// hash no corruption removed: dropped by a grant or a refund, hydrated.
func (s *Summary) RoutineMissing() int {
	n := 0
	for _, f := range s.Reconcile.Findings {
		if f.Kind == reconcile.KindMissingKey && !slices.Contains(s.Corrupted, corruption{f.MerchantID, reconcile.KindMissingKey}) {
			n++
		}
	}
	return n
}

// Write prints the summary for a person.
func (s *Summary) Write(w io.Writer) {
	t := s.Traffic
	fmt.Fprintf(w, "\n== billing demo ==\n")
	fmt.Fprintf(w, "traffic      %d messages: %d valid, %d duplicates, %d malformed, %d conflicting duplicates (3 channels)\n",
		len(t.Messages), t.Valid, t.Duplicates, t.Malformed, t.Conflicts)
	fmt.Fprintf(w, "merchants    %d granted (%d nearly empty), %d unknown to billing\n", len(t.Merchants())-s.Unknown, s.NearlyEmpty, s.Unknown)
	fmt.Fprintf(w, "workers      2 in one consumer group, %d restart(s) midway\n", s.Restarts)
	if s.Rate > 0 {
		fmt.Fprintf(w, "paced        produced at %.0f events/s, occurred_at stamped at send time\n", s.Rate)
	}
	fmt.Fprintf(w, "throughput   %.0f events/s end to end (%d messages in %s)\n", s.Throughput(), len(t.Messages), s.ConsumeTime.Round(time.Millisecond))
	if s.Rate > 0 {
		fmt.Fprintf(w, "latency      produce -> ledger row: p50 %.1f ms, p99 %.1f ms, max %.1f ms\n", s.LatencyP50, s.LatencyP99, s.LatencyMax)
	} else {
		fmt.Fprintf(w, "latency      not measured: the traffic was produced in one burst (use --rate N to measure produce -> ledger)\n")
	}
	fmt.Fprintf(w, "outcomes    ")
	for _, k := range slices.Sorted(maps.Keys(s.Outcomes)) {
		fmt.Fprintf(w, " %s=%d", k, s.Outcomes[k])
	}
	fmt.Fprintf(w, "\ndead letters")
	for _, c := range slices.Sorted(maps.Keys(s.DLQ)) {
		fmt.Fprintf(w, " %s=%d", c, s.DLQ[c])
	}
	fmt.Fprintln(w)
	if s.Reconcile != nil {
		kinds := map[reconcile.Kind]int{}
		for _, f := range s.Reconcile.Findings {
			kinds[f.Kind]++
		}
		fmt.Fprintf(w, "reconciler   corrupted %d by hand; found %d drifted merchants", len(s.Corrupted), s.Reconcile.Drifted)
		for _, k := range slices.Sorted(maps.Keys(kinds)) {
			fmt.Fprintf(w, " %s=%d", k, kinds[k])
		}
		fmt.Fprintf(w, "; repaired %d, hydrated %d; second pass: %d findings\n", s.Reconcile.Repaired, s.Reconcile.Hydrated, len(s.Recheck.Findings))
	}
	if s.Events.ByType != nil {
		s.Events.write(w)
	}
	if s.Refunds.IDs > 0 {
		s.Refunds.write(w)
	}
	if s.Invariants != nil {
		fmt.Fprintf(w, "final check  Redis == MySQL for every loaded merchant, one ledger row per valid event, every poison message in the DLQ once by provenance:\n%s", s.Invariants)
	}
	if err := s.failure(); err != nil {
		fmt.Fprintf(w, "RESULT       FAILED: %v\n", err)
	} else {
		fmt.Fprintf(w, "RESULT       OK\n")
	}
}

// URL is the address of an ops endpoint of the demo's first worker.
func (s *Summary) URL(path string) string { return "http://" + s.HTTPAddr + path }

// keep leaves everything running until ctx ends, for exploration, the read
// API served and the grants topic created (by all).
func (r *run) keep(ctx context.Context) {
	env := r.st.WorkerEnv(9, r.o.RedisAddrs, "", r.o.LogLevel)
	r.say("\n--keep: broker and workers stay up until Ctrl-C. Try, in another shell:")
	r.say("  export KAFKA_BROKERS=%s KAFKA_TOPIC=%s KAFKA_DLQ_TOPIC=%s KAFKA_GROUP=%s KAFKA_GRANTS_TOPIC=%s", env["KAFKA_BROKERS"], env["KAFKA_TOPIC"], env["KAFKA_DLQ_TOPIC"], env["KAFKA_GROUP"], r.grantsTopic())
	r.say("  export MYSQL_DSN='%s' REDIS_ADDR=%s REDIS_KEY_PREFIX=%s", env["MYSQL_DSN"], env["REDIS_ADDR"], env["REDIS_KEY_PREFIX"])
	r.say("  go run ./cmd/billingctl quota show --merchant m-000001")
	r.say("  go run ./cmd/billingctl dlq ls --list")
	r.say("  go run -C tools ./cmd/billing-sim produce --total 1000 --merchants %d", r.o.Merchants)
	r.say("  curl -s %s | grep billing_events_total", r.sum.URL("/metrics"))
	r.say("  curl -s %s", r.sum.URL("/readyz"))
	r.say("The read API, with the bearer token %s:", r.token)
	r.say("  curl -s -H 'Authorization: Bearer %s' http://%s/v1/merchants/m-000001/balance", r.token, r.adminAddr)
	r.say("  curl -s -H 'Authorization: Bearer %s' http://%s/v1/merchants/m-000001/ledger", r.token, r.adminAddr)
	r.say("A grant command on the grants topic (the workers apply it as billingctl quota grant would; any Kafka producer):")
	r.say(`  echo '{"grant_id":"try-1","merchant_id":"m-000001","amount":1000,"source":"demo"}' | kcat -P -b $KAFKA_BROKERS -t $KAFKA_GRANTS_TOPIC -k m-000001`)
	<-ctx.Done()
}
