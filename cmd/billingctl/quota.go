package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"go.uber.org/zap"

	"github.com/quotaflow/billing/internal/cli"
	"github.com/quotaflow/billing/internal/config"
	"github.com/quotaflow/billing/internal/deduct"
	"github.com/quotaflow/billing/internal/event"
	"github.com/quotaflow/billing/internal/ledger"
	"github.com/quotaflow/billing/internal/logging"
	"github.com/quotaflow/billing/internal/operator"
	"github.com/quotaflow/billing/internal/quotaevent"
	"github.com/quotaflow/billing/internal/shard"
)

const shardsUsage = `billingctl quota shards: split a hot merchant's quota over S shards (1..64)

  billingctl quota shards --merchant M --shards S [--output text|json]

Each shard is its own Redis hash and lock (quota:{M#s}, lock:quota:{M#s}; with
S=1 quota:{M}), so a merchant's events run in parallel lanes and spread over
Redis Cluster nodes. Safe under load: the merchant's quota is folded into the
new layout under the locks of the old and the new shards; deductions in flight
move to their events' new shards. Workers route by the new count within a second.
Exit codes: 0 done, 1 failed, 2 bad command line or environment, 3 merchant
unknown to billing (nothing was changed).
`

const grantUsage = `billingctl quota grant: credit a merchant (MySQL ledger and balance, then Redis)

  billingctl quota grant --merchant M --amount N --id GRANT_ID [--priority P] [--expires-at T [--rollover-max R]] [--output text|json]

Granting the same id twice credits once (outcome duplicate); the same id with
another merchant or amount is refused. Debits burn a merchant's grants down by
--priority (0..100, lower first, default 50), then the earliest expiry (grants
without --expires-at, an RFC 3339 time, never expire and go last), then the
oldest. At expiry (at once for a time already past) the grant's remainder
leaves the balance through one expire ledger row; --rollover-max carries up to
R of it into a new grant. Each command leases a free Snowflake worker ID of the
operator pool for its lifetime, so grants run in parallel.
Exit codes: 0 granted or duplicate, 1 failed or refused, 2 bad command line or environment.
`

const revokeUsage = `billingctl quota revoke: end a grant now; its unused remainder leaves the balance

  billingctl quota revoke --grant G [--merchant M] [--output text|json]

Like an expiry, under the merchant's locks and in one ledger transaction, the
remainder leaves through one expire ledger row, revoke:G (reason revoked;
quota.expired and any low-balance event follow), the grant ends (state expired)
without a rollover, and the Redis quota is dropped for the next deduction to
reload. Once ever: revoking it again is a no-op (already_revoked); a grant
expired or used up writes nothing (nothing_left). A deduction in flight keeps
its units: it commits against the balance after the revoke, as after an expiry.
--merchant, when given, must be the grant's.
Exit codes: 0 revoked, already revoked or nothing left, 1 failed, 2 bad command
line or environment, 3 the grant is unknown (or not the merchant's; nothing was changed).
`

const showUsage = `billingctl quota show: Redis remain, MySQL credits and debits, expected, pending side by side

  billingctl quota show --merchant M [--output text|json]

It leases no worker ID, and with Redis unreachable it prints the MySQL side
and exits 1. Exit codes: 0 shown, 1 failed, 2 bad command line or environment,
3 the merchant is unknown to billing (no merchant_balance row; the view is printed).
`

func (c *ctl) quotaCommands() []cli.Command {
	return []cli.Command{
		{Name: "grant", Usage: grantUsage, Run: c.runGrant}, {Name: "revoke", Usage: revokeUsage, Run: c.runRevoke}, {Name: "show", Usage: showUsage, Run: c.runShow},
		{Name: "alerts", Usage: alertsUsage, Run: c.runAlerts}, {Name: "policy", Usage: policyUsage, Run: c.runPolicy},
		{Name: "shards", Usage: shardsUsage, Run: c.runShards}, {Name: "plan", Usage: planUsage, Run: c.runPlan},
	}
}

func (c *ctl) quotaUsage() string {
	return cli.Usage("billingctl quota: grant and revoke quota, show a merchant's balance, set its alerts, policy, plan and shards",
		c.quotaCommands(), "Run 'billingctl quota COMMAND --help' for its flags.\n")
}

func (c *ctl) runQuota(ctx context.Context, args []string) error {
	return cli.Dispatch(ctx, "billingctl quota", c.quotaUsage(), c.quotaCommands(), args, c.stdout, c.stderr)
}

// grantResult is what quota grant prints.
type grantResult struct {
	GrantID    string `json:"grant_id"`
	MerchantID string `json:"merchant_id"`
	Amount     int64  `json:"amount"`
	Outcome    string `json:"outcome"`
}

func (c *ctl) runGrant(ctx context.Context, args []string) error {
	fs := c.flags("quota grant", grantUsage)
	merchant := fs.String("merchant", "", "merchant id")
	amount := fs.Int64("amount", 0, "quota units to grant, 1..10^12")
	id := fs.String("id", "", "grant id: granting the same id twice credits once")
	prio := fs.Int("priority", event.DefaultGrantPriority, "burn-down priority, 0..100: lower burns first")
	expires := fs.String("expires-at", "", "RFC 3339 time at which the grant's remainder expires (default: never)")
	rollover := fs.Int64("rollover-max", 0, "at expiry, carry up to this much of the remainder into a new grant")
	output := fs.Output()
	if err := fs.Parse(args); err != nil {
		return err
	}
	var exp *time.Time
	if *expires != "" {
		t, err := time.Parse(time.RFC3339Nano, *expires)
		switch {
		case err != nil:
			return fs.Fail("--expires-at %q is not an RFC 3339 time", *expires)
		case t.IsZero():
			return fs.Fail("--expires-at %q is the zero time: leave it out for a grant that never expires", *expires)
		}
		exp = &t
	}
	switch {
	case !event.ValidID(*merchant):
		return fs.Fail("--merchant %q is not 1..64 characters of [A-Za-z0-9_.:-]", *merchant)
	case *amount < 1 || *amount > event.MaxAmount:
		return fs.Fail("--amount %d is outside 1..10^12", *amount)
	case !event.ValidID(*id):
		return fs.Fail("--id %q is not 1..64 characters of [A-Za-z0-9_.:-]", *id)
	case reserved(*id):
		return fs.Fail("--id %q starts with a prefix reserved for the ids billing derives (expire:, rollover:, opening:, plan:, billed:, revoke:, refund:, refund-grants:)", *id)
	case *prio < event.MinGrantPriority || *prio > event.MaxGrantPriority:
		return fs.Fail("--priority %d is outside 0..100", *prio)
	case *rollover < 0 || *rollover > event.MaxAmount:
		return fs.Fail("--rollover-max %d is outside 0..10^12", *rollover)
	case *rollover > 0 && exp == nil:
		return fs.Fail("--rollover-max needs --expires-at: a grant that never expires has nothing to roll over")
	}
	op, closeOp, err := c.operator(ctx, true)
	if err != nil {
		return err
	}
	defer closeOp()
	// The worker's grants topic takes this very path (deduct.GrantBatch).
	results, err := op.Deductor.GrantBatch(ctx, []event.GrantCommand{{GrantID: *id, MerchantID: *merchant, Amount: *amount, Source: "billingctl",
		Priority: prio, ExpiresAt: exp, RolloverMax: *rollover}})
	if err == nil {
		err = results[0].Err
	}
	if err != nil {
		return err
	}
	res := grantResult{GrantID: *id, MerchantID: *merchant, Amount: *amount, Outcome: string(results[0].Outcome)}
	if *output == cli.JSON {
		return writeJSON(c.stdout, res)
	}
	_, err = fmt.Fprintf(c.stdout, "grant %s: %s (%d to %s)\n", res.GrantID, res.Outcome, res.Amount, res.MerchantID)
	return err
}

// revokeResult is what quota revoke prints.
type revokeResult struct {
	GrantID    string `json:"grant_id"`
	MerchantID string `json:"merchant_id"`
	Amount     int64  `json:"amount"` // what left the balance (by the first revoke)
	Outcome    string `json:"outcome"`
}

func (c *ctl) runRevoke(ctx context.Context, args []string) error {
	fs := c.flags("quota revoke", revokeUsage)
	id := fs.String("grant", "", "grant id")
	merchant := fs.String("merchant", "", "the grant's merchant (optional: a check)")
	output := fs.Output()
	if err := fs.Parse(args); err != nil {
		return err
	}
	switch {
	case !event.ValidID(*id):
		return fs.Fail("--grant %q is not 1..64 characters of [A-Za-z0-9_.:-]", *id)
	case *merchant != "" && !event.ValidID(*merchant):
		return fs.Fail("--merchant %q is not 1..64 characters of [A-Za-z0-9_.:-]", *merchant)
	}
	op, closeOp, err := c.operator(ctx, true)
	if err != nil {
		return err
	}
	defer closeOp()
	owner, outcome, amount, err := op.Deductor.Revoke(ctx, *merchant, *id)
	if err != nil {
		return err
	}
	res := revokeResult{GrantID: *id, MerchantID: owner, Amount: amount, Outcome: string(outcome)}
	if *output == cli.JSON {
		return writeJSON(c.stdout, res)
	}
	_, err = fmt.Fprintf(c.stdout, "grant %s: %s (%d of %s)\n", res.GrantID, strings.ReplaceAll(res.Outcome, "_", " "), res.Amount, res.MerchantID)
	return err
}

func (c *ctl) runShow(ctx context.Context, args []string) error {
	fs := c.flags("quota show", showUsage)
	merchant := fs.String("merchant", "", "merchant id")
	output := fs.Output()
	if err := fs.Parse(args); err != nil {
		return err
	}
	if !event.ValidID(*merchant) {
		return fs.Fail("--merchant %q is not 1..64 characters of [A-Za-z0-9_.:-]", *merchant)
	}
	op, closeOp, err := c.operator(ctx, false)
	if err != nil {
		return err
	}
	defer closeOp()
	view, err := op.Deductor.Show(ctx, *merchant)
	if err != nil {
		return err
	}
	if *output == cli.JSON {
		err = writeJSON(c.stdout, newQuotaView(view, op.DefaultAlerts))
	} else {
		err = writeView(c.stdout, view, op.DefaultAlerts)
	}
	switch {
	case err != nil:
	case view.RedisErr != nil:
		err = view.RedisErr // after the MySQL side
	case !view.Known:
		err = fmt.Errorf("%s: %w", *merchant, errUnknownMerchant)
	}
	return err
}

// shardsResult is what quota shards prints.
type shardsResult struct {
	MerchantID string `json:"merchant_id"`
	Shards     int    `json:"shards"`
	Previous   int    `json:"previous"`
}

func (c *ctl) runShards(ctx context.Context, args []string) error {
	fs := c.flags("quota shards", shardsUsage)
	merchant := fs.String("merchant", "", "merchant id")
	n := fs.Int("shards", 0, "quota shards, 1..64 (1: not sharded)")
	output := fs.Output()
	if err := fs.Parse(args); err != nil {
		return err
	}
	switch {
	case !event.ValidID(*merchant):
		return fs.Fail("--merchant %q is not 1..64 characters of [A-Za-z0-9_.:-]", *merchant)
	case *n < 1 || *n > shard.Max:
		return fs.Fail("--shards %d is outside 1..%d", *n, shard.Max)
	}
	op, closeOp, err := c.operator(ctx, true)
	if err != nil {
		return err
	}
	defer closeOp()
	// Merchants are never removed: one known now still is when resharded.
	bals, err := op.Ledger.Balances(ctx, []string{*merchant})
	if err != nil {
		return err
	}
	if _, known := bals[*merchant]; !known {
		return fmt.Errorf("%s: %w", *merchant, errUnknownMerchant)
	}
	l, err := op.Deductor.Reshard(ctx, *merchant, *n)
	if err != nil {
		return err
	}
	res := shardsResult{MerchantID: *merchant, Shards: l.Shards, Previous: l.FoldingFrom}
	if *output == cli.JSON {
		return writeJSON(c.stdout, res)
	}
	_, err = fmt.Fprintf(c.stdout, "merchant %s: %d shard(s), folded from %d\n", res.MerchantID, res.Shards, res.Previous)
	return err
}

// operator opens the write path on the environment's services: with a leased
// worker ID for a command that writes ledger rows, else without (no Redis
// needed to start).
func (c *ctl) operator(ctx context.Context, lease bool) (*operator.Operator, func(), error) {
	cfg, err := config.Load(c.getenv)
	if err != nil {
		return nil, nil, err
	}
	level := cfg.LogLevel
	if c.getenv("LOG_LEVEL") == "" {
		level = "warn" // a person is reading stdout; the lease chatter is noise unless asked for
	}
	log, err := logging.Build(logging.Options{Level: level, Format: cfg.LogFormat, Sampling: cfg.LogSampling})
	if err != nil {
		return nil, nil, err
	}
	open := operator.NewReader
	if lease {
		open = operator.New
	}
	op, err := open(ctx, cfg, log)
	if err != nil {
		return nil, nil, err
	}
	return op, func() {
		if err := op.Close(); err != nil {
			log.Warn("closing", zap.Error(err))
		}
		_ = log.Sync()
	}, nil
}

// quotaView is quota show's JSON document.
type quotaView struct {
	MerchantID string           `json:"merchant_id"`
	Known      bool             `json:"known"`  // has a merchant_balance row
	Cached     bool             `json:"cached"` // Redis holds a remain
	Remain     *int64           `json:"redis_remain"`
	Ver        *int64           `json:"redis_ver"`
	Credited   int64            `json:"credited"`
	Debited    int64            `json:"debited"`
	Expected   int64            `json:"expected_remain"`
	Drift      *int64           `json:"drift"` // null when not cached
	Pending    []deduct.Pending `json:"pending"`
	Policy     string           `json:"overdraft_policy"` // reject, floor or overage
	Floor      int64            `json:"overdraft_floor"`
	Low        string           `json:"low"`            // thresholds as set: "1000,10%" or "none"
	LowDefault bool             `json:"low_default"`    // they are QUOTA_LOW_DEFAULT's
	LowUnits   []int64          `json:"low_thresholds"` // in units of today's base (ledger.Balance.LowBase), highest first
	Shards     []shardView      `json:"shards"`
	Grants     []ledger.Grant   `json:"grants"` // active in burn-down order, then the last ended
	RedisError string           `json:"redis_error,omitempty"`
}

type shardView struct {
	Tag     string `json:"tag"` // quota:{tag} in Redis
	Cached  bool   `json:"cached"`
	Remain  int64  `json:"redis_remain"`
	Ver     int64  `json:"redis_ver"`
	Pending int    `json:"pending"`
	Folding bool   `json:"folding"` // of the layout a resharding is folding away
}

// alertsOf are the merchant's thresholds in effect, and whether they are the default.
func alertsOf(v deduct.View, def quotaevent.Alerts) (quotaevent.Alerts, bool) {
	if v.Alerts != nil {
		return *v.Alerts, false
	}
	return def, true
}

func newQuotaView(v deduct.View, def quotaevent.Alerts) quotaView {
	a, isDefault := alertsOf(v, def)
	q := quotaView{MerchantID: v.MerchantID, Known: v.Known, Cached: v.Cached, Credited: v.Credited, Debited: v.Debited,
		Expected: v.Expected, Pending: append([]deduct.Pending{}, v.Pending...), Grants: append([]ledger.Grant{}, v.Grants...), Policy: string(v.Policy.Kind), Floor: v.Policy.Floor, Low: a.String(), LowDefault: isDefault, LowUnits: a.Thresholds(v.LowBase)}
	if q.LowUnits == nil {
		q.LowUnits = []int64{}
	}
	if v.Cached {
		q.Remain, q.Ver, q.Drift = new(v.Remain), new(v.Ver), new(v.Drift)
	}
	if v.RedisErr != nil {
		q.RedisError = v.RedisErr.Error()
	}
	for k, s := range v.Shards {
		q.Shards = append(q.Shards, shardView{Tag: s.Tag, Cached: s.Cached, Remain: s.Remain, Ver: s.Ver,
			Pending: s.Pending, Folding: k >= v.Layout.Shards})
	}
	return q
}

// writeJSON writes v as indented JSON.
func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

func writeView(w io.Writer, v deduct.View, def quotaevent.Alerts) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "merchant\t%s\n", v.MerchantID)
	if !v.Known {
		fmt.Fprintf(tw, "mysql\tunknown to billing (no merchant_balance row)\n")
	} else {
		fmt.Fprintf(tw, "mysql credited\t%d\n", v.Credited)
		fmt.Fprintf(tw, "mysql debited\t%d\n", v.Debited)
		fmt.Fprintf(tw, "expected remain\t%d\t(credited - debited - pending not yet in the ledger)\n", v.Expected)
		fmt.Fprintf(tw, "overdraft policy\t%s\n", v.Policy)
		a, isDefault := alertsOf(v, def)
		from := ""
		if isDefault {
			from = ", the default"
		}
		fmt.Fprintf(tw, "low thresholds\t%s\t(%v units now%s)\n", a, a.Thresholds(v.LowBase), from)
	}
	if v.Cached {
		fmt.Fprintf(tw, "redis remain\t%d\t(ver %d)\n", v.Remain, v.Ver)
		fmt.Fprintf(tw, "drift\t%d\n", v.Drift)
	} else if v.RedisErr != nil {
		fmt.Fprintf(tw, "redis remain\tunreadable\t(%v)\n", v.RedisErr)
	} else {
		fmt.Fprintf(tw, "redis remain\tnot loaded\t(hydrated from MySQL on the next deduction)\n")
	}
	if len(v.Shards) > 1 {
		fmt.Fprintf(tw, "shards\t%d\n", v.Layout.Shards)
		for k, s := range v.Shards {
			state := "not loaded"
			if s.Cached {
				state = fmt.Sprintf("remain %d (ver %d), %d pending", s.Remain, s.Ver, s.Pending)
			}
			if k >= v.Layout.Shards {
				state += ", being folded away"
			}
			fmt.Fprintf(tw, "  quota:{%s}\t%s\n", s.Tag, state)
		}
	}
	fmt.Fprintf(tw, "grants\t%d\t(active in burn-down order, then the last ended)\n", len(v.Grants))
	for _, g := range v.Grants {
		exp := "never expires"
		if g.ExpiresAt != nil {
			exp = "expires " + g.ExpiresAt.UTC().Format(time.RFC3339)
		}
		fmt.Fprintf(tw, "  %s\t%d of %d\tpriority %d, %s, %s\n", g.ID, g.Remaining, g.Amount, g.Priority, exp, g.State)
	}
	fmt.Fprintf(tw, "pending\t%d\n", len(v.Pending))
	for _, p := range v.Pending {
		state := "not in the ledger"
		if p.InLedger {
			state = "in the ledger, settle pending"
		}
		fmt.Fprintf(tw, "  %s\t%d\t%s old, %s\n", p.EventID, p.Amount, p.Age.Round(time.Millisecond), state)
	}
	return tw.Flush()
}

func reserved(id string) bool {
	_, ok := event.Reserved(id)
	return ok
}
