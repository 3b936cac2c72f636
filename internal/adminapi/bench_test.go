package adminapi_test

import (
	"net/http"
	"testing"

	"github.com/quotaflow/billing/internal/adminapi"
)

// What one request costs on the real databases: a balance (one HGETALL, two
// MySQL queries) and a full ledger page of 1000 rows (two MySQL queries).
func BenchmarkRequest(b *testing.B) {
	g := newRig(b, adminapi.Options{})
	g.grant("m-a", 1_000_000)
	for range 10 {
		g.pay("m-a", 100, 1)
	}
	for _, target := range []string{balanceA, "/v1/merchants/m-a/ledger?limit=1000"} {
		b.Run(target, func(b *testing.B) {
			for b.Loop() {
				if rec := g.do(http.MethodGet, target, testToken); rec.Code != http.StatusOK {
					b.Fatalf("%d %s", rec.Code, rec.Body)
				}
			}
		})
	}
}
