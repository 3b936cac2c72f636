package adminapi

import (
	"cmp"
	"strconv"
	"time"

	"github.com/quotaflow/billing/internal/deduct"
	"github.com/quotaflow/billing/internal/ledger"
)

// The response documents, as api/openapi.yaml describes them.

type balanceView struct {
	MerchantID string    `json:"merchant_id"`
	MySQL      mysqlView `json:"mysql"`
	Redis      redisView `json:"redis"`
	// Pending are the deductions Redis holds that MySQL has not confirmed;
	// PendingAmount sums those not yet in the ledger.
	Pending        []deduct.Pending `json:"pending"`
	PendingAmount  int64            `json:"pending_amount"`
	ExpectedRemain int64            `json:"expected_remain"` // available - pending_amount
	Drift          *int64           `json:"drift,omitempty"` // redis remain - expected_remain; absent without a key
	// Shards are the merchant's quota shards, present when it has more than
	// one (or a resharding is folding the old layout).
	Shards []shardView `json:"shards,omitempty"`
	// Grants are the active grants in burn-down order, then the last ended.
	Grants []ledger.Grant `json:"grants"`
}

type shardView struct {
	Tag     string `json:"tag"` // the hash tag: quota:{tag} in Redis
	Exists  bool   `json:"exists"`
	Remain  *int64 `json:"remain,omitempty"`
	Version *int64 `json:"version,omitempty"`
	Pending int    `json:"pending"`
	Folding bool   `json:"folding"` // of the layout a resharding is folding away
}

type mysqlView struct {
	Credited        int64  `json:"credited"`
	Debited         int64  `json:"debited"`
	Available       int64  `json:"available"`
	OverdraftPolicy string `json:"overdraft_policy"` // reject, floor or overage
	OverdraftFloor  int64  `json:"overdraft_floor"`  // how far below zero floor lets it go
}

type redisView struct {
	Exists  bool   `json:"exists"`
	Remain  *int64 `json:"remain,omitempty"`
	Version *int64 `json:"version,omitempty"`
}

func newBalanceView(v deduct.View) balanceView {
	b := balanceView{MerchantID: v.MerchantID,
		MySQL: mysqlView{Credited: v.Credited, Debited: v.Debited, Available: v.Credited - v.Debited,
			OverdraftPolicy: cmp.Or(string(v.Policy.Kind), string(ledger.PolicyReject)), OverdraftFloor: v.Policy.Floor},
		Redis:   redisView{Exists: v.Cached},
		Pending: append([]deduct.Pending{}, v.Pending...), ExpectedRemain: v.Expected, Grants: append([]ledger.Grant{}, v.Grants...)}
	if v.Cached {
		b.Redis.Remain, b.Redis.Version, b.Drift = new(v.Remain), new(v.Ver), new(v.Drift)
	}
	if len(v.Shards) > 1 {
		for k, sh := range v.Shards {
			view := shardView{Tag: sh.Tag, Exists: sh.Cached, Pending: sh.Pending, Folding: k >= v.Layout.Shards}
			if sh.Cached {
				view.Remain, view.Version = new(sh.Remain), new(sh.Ver)
			}
			b.Shards = append(b.Shards, view)
		}
	}
	for _, p := range v.Pending {
		if !p.InLedger {
			b.PendingAmount += p.Amount
		}
	}
	return b
}

type pageView struct {
	MerchantID string    `json:"merchant_id"`
	Rows       []rowView `json:"rows"`
	Next       string    `json:"next,omitempty"` // the after of the next page; absent on the last
}

type rowView struct {
	ID           string    `json:"id"`  // Snowflake: a string, as JSON numbers lose 64-bit precision
	Seq          int64     `json:"seq"` // the row's place in the merchant's ledger: the cursor
	EventID      string    `json:"event_id"`
	MerchantID   string    `json:"merchant_id"`
	Kind         string    `json:"kind"`
	Amount       int64     `json:"amount"`
	BalanceAfter *int64    `json:"balance_after,omitempty"` // nil only on rows without a seq, which pages do not list
	Overage      int64     `json:"overage"`                 // a debit's part below zero under the overage policy
	GrantID      *string   `json:"grant_id,omitempty"`      // the grant that paid a whole debit, or that an expire row ends
	Reason       string    `json:"reason"`
	PaymentID    string    `json:"payment_id"`
	Source       string    `json:"source"`
	OccurredAt   time.Time `json:"occurred_at"`
	CreatedAt    time.Time `json:"created_at"`
}

// newPageView keeps the first limit rows; a row beyond them means a next page.
func newPageView(merchantID string, rows []ledger.Row, limit int) pageView {
	p := pageView{MerchantID: merchantID, Rows: make([]rowView, 0, min(len(rows), limit))}
	if len(rows) > limit {
		rows = rows[:limit]
		p.Next = strconv.FormatInt(*rows[limit-1].Seq, 10)
	}
	for _, r := range rows {
		p.Rows = append(p.Rows, rowView{ID: strconv.FormatInt(r.ID, 10), Seq: *r.Seq, EventID: r.EventID, MerchantID: r.MerchantID,
			Kind: string(r.Kind), Amount: r.Amount, BalanceAfter: r.BalanceAfter, Overage: r.Overage, GrantID: r.GrantID, Reason: r.Reason, PaymentID: r.PaymentID,
			Source: r.Source, OccurredAt: r.OccurredAt.UTC(), CreatedAt: r.CreatedAt.UTC()})
	}
	return p
}
