package adminapi_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/quotaflow/billing/internal/adminapi"
	"github.com/quotaflow/billing/internal/ledger"
	"github.com/quotaflow/billing/internal/quota"
)

const balanceA = "/v1/merchants/m-a/balance"

// A request without the token, with another scheme or with a wrong token is
// refused with 401 and a WWW-Authenticate challenge, whatever its method.
func TestAuthRefused(t *testing.T) {
	g := newRig(t, adminapi.Options{})
	g.grant("m-a", 10)
	for _, tt := range []struct {
		name, method, auth, challenge string
	}{
		{"no header", http.MethodGet, "", `Bearer realm="billing"`},
		{"basic scheme", http.MethodGet, "Basic " + testToken, `Bearer realm="billing"`},
		{"empty bearer", http.MethodGet, "Bearer ", `Bearer realm="billing", error="invalid_token"`},
		{"wrong token", http.MethodGet, "Bearer wrong-token-0123456789", `Bearer realm="billing", error="invalid_token"`},
		{"token prefix", http.MethodGet, "Bearer " + testToken[:len(testToken)-1], `Bearer realm="billing", error="invalid_token"`},
		{"token with more", http.MethodGet, "Bearer " + testToken + "x", `Bearer realm="billing", error="invalid_token"`},
		{"post without token", http.MethodPost, "", `Bearer realm="billing"`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			req, rec := httptest.NewRequest(tt.method, balanceA, nil), httptest.NewRecorder()
			if tt.auth != "" {
				req.Header.Set("Authorization", tt.auth)
			}
			g.api.ServeHTTP(rec, req)
			if rec.Code != http.StatusUnauthorized || rec.Header().Get("WWW-Authenticate") != tt.challenge {
				t.Fatalf("%d, WWW-Authenticate %q; want 401, %q", rec.Code, rec.Header().Get("WWW-Authenticate"), tt.challenge)
			}
			if strings.Contains(rec.Body.String(), "credited") {
				t.Fatalf("a refused request got the balance: %s", rec.Body)
			}
		})
	}
	if rec := g.do(http.MethodGet, balanceA, testToken); rec.Code != http.StatusOK {
		t.Fatalf("with the token: %d %s", rec.Code, rec.Body)
	}
}

// A rotated token file takes effect at the next request: the old token is
// refused, the new one accepted; a removed file refuses everything until it is back.
func TestTokenFileRotation(t *testing.T) {
	g := newRig(t, adminapi.Options{})
	g.grant("m-a", 10)
	const rotated = "rotated-token-abcdefghijkl"
	g.writeToken(rotated)
	if code := g.do(http.MethodGet, balanceA, testToken).Code; code != http.StatusUnauthorized {
		t.Fatalf("old token after rotation: %d, want 401", code)
	}
	if code := g.do(http.MethodGet, balanceA, rotated).Code; code != http.StatusOK {
		t.Fatalf("new token after rotation: %d, want 200", code)
	}
	if err := os.Remove(g.tokenPath); err != nil {
		t.Fatal(err)
	}
	if code := g.do(http.MethodGet, balanceA, rotated).Code; code != http.StatusUnauthorized {
		t.Fatalf("token file removed: %d, want 401", code)
	}
	g.writeToken(testToken)
	if code := g.do(http.MethodGet, balanceA, testToken).Code; code != http.StatusOK {
		t.Fatalf("token file back: %d, want 200", code)
	}
}

// A rotated file holding a token too short to be one (under 16 characters) is
// as unusable as an empty file: every request is refused, the short token too,
// and the breakage is logged once, not per request.
func TestTokenFileRotatedToShortToken(t *testing.T) {
	g := newRig(t, adminapi.Options{})
	g.grant("m-a", 10)
	g.writeToken("x")
	for _, token := range []string{"x", testToken, "x"} {
		if code := g.do(http.MethodGet, balanceA, token).Code; code != http.StatusUnauthorized {
			t.Fatalf("token %q with the file holding x: %d, want 401", token, code)
		}
	}
	if n := g.logs.FilterMessageSnippet("unusable").Len(); n != 1 {
		t.Fatalf("the short token was logged %d times, want once", n)
	}
	g.writeToken(testToken)
	if code := g.do(http.MethodGet, balanceA, testToken).Code; code != http.StatusOK {
		t.Fatalf("token file fixed: %d, want 200", code)
	}
}

// The balance shows MySQL's truth, Redis's cache and the pending deductions,
// each of the merchant asked for only.
func TestBalance(t *testing.T) {
	g := newRig(t, adminapi.Options{})
	g.grant("m-a", 100)
	g.grant("m-b", 5000)
	g.pay("m-a", 3, 10)
	g.pay("m-b", 1, 7)
	var b balance
	g.get(balanceA, &b)
	if b.MerchantID != "m-a" || b.MySQL.Credited != 100 || b.MySQL.Debited != 30 || b.MySQL.Available != 70 {
		t.Fatalf("mysql of m-a: %+v", b)
	}
	if !b.Redis.Exists || b.Redis.Remain == nil || *b.Redis.Remain != 70 || b.Redis.Version == nil || b.Drift == nil || *b.Drift != 0 {
		t.Fatalf("redis of m-a: %+v", b)
	}
	if len(b.Pending) != 0 || b.ExpectedRemain != 70 {
		t.Fatalf("pending of m-a: %+v", b)
	}

	// A deduction in flight: in Redis, not yet in MySQL.
	ctx := context.Background()
	key := g.redis.Keys.Quota("m-a")
	if err := g.redis.Client.HSet(ctx, key, "remain", 66, quota.PendingField("evt-inflight"), quota.FormatPending(4, time.Now())).Err(); err != nil {
		t.Fatal(err)
	}
	b = balance{}
	g.get(balanceA, &b)
	if len(b.Pending) != 1 || b.Pending[0].EventID != "evt-inflight" || b.Pending[0].Amount != 4 || b.Pending[0].InLedger ||
		b.PendingAmount != 4 || b.ExpectedRemain != 66 || *b.Drift != 0 {
		t.Fatalf("with a deduction in flight: %+v", b)
	}

	if err := g.redis.Client.Del(ctx, key).Err(); err != nil {
		t.Fatal(err)
	}
	b = balance{}
	g.get(balanceA, &b)
	if b.Redis.Exists || b.Redis.Remain != nil || b.Redis.Version != nil || b.Drift != nil || b.MySQL.Available != 70 {
		t.Fatalf("without a key: %+v", b)
	}
}

// A sharded merchant's balance lists its shards, whose remains sum to the
// Redis view and to MySQL's available; its policy is MySQL's.
func TestBalanceOfShardedMerchant(t *testing.T) {
	g := newRig(t, adminapi.Options{})
	ctx := context.Background()
	g.grant("m-s", 402)
	if err := g.d.SetPolicy(ctx, "m-s", ledger.Policy{Kind: ledger.PolicyFloor, Floor: 42}); err != nil {
		t.Fatal(err)
	}
	if _, err := g.d.Reshard(ctx, "m-s", 4); err != nil { // lays the quota out from MySQL
		t.Fatal(err)
	}
	var b struct {
		balance
		Shards []struct {
			Tag     string `json:"tag"`
			Exists  bool   `json:"exists"`
			Remain  *int64 `json:"remain"`
			Folding bool   `json:"folding"`
		} `json:"shards"`
	}
	g.get("/v1/merchants/m-s/balance", &b)
	if b.MySQL.Available != 402 || b.MySQL.OverdraftPolicy != "floor" || b.MySQL.OverdraftFloor != 42 {
		t.Fatalf("mysql of m-s: %+v", b.MySQL)
	}
	if len(b.Shards) != 4 {
		t.Fatalf("%d shards, want 4: %+v", len(b.Shards), b.Shards)
	}
	var sum, floors int64
	for k, sh := range b.Shards {
		if want := fmt.Sprintf("m-s#%d", k); sh.Tag != want || sh.Folding || !sh.Exists {
			t.Fatalf("shard %d: %+v, want tag %s, present, not folding", k, sh, want)
		}
		sum += *sh.Remain
		floor, err := g.redis.Client.HGet(ctx, g.redis.Keys.Quota(sh.Tag), "floor").Int64()
		if err != nil {
			t.Fatalf("floor of shard %s: %v", sh.Tag, err)
		}
		floors += floor
	}
	// The shards hold the merchant's available and its floor between them.
	if !b.Redis.Exists || b.Redis.Remain == nil || *b.Redis.Remain != sum || sum != 402 || floors != 42 {
		t.Fatalf("redis %+v, shards' remains sum to %d (want 402), floors to %d (want 42)", b.Redis, sum, floors)
	}
	var one balance
	g.grant("m-one", 5)
	g.get("/v1/merchants/m-one/balance", &one)
	if one.MySQL.OverdraftPolicy != "reject" {
		t.Fatalf("an unsharded merchant: %+v", one)
	}
}

// All pages of a merchant's ledger hold each of its rows exactly once, in id
// order, and none of another merchant's, though the two interleave in ids.
func TestLedgerPagesCoverEveryRowOnce(t *testing.T) {
	g := newRig(t, adminapi.Options{})
	for i := range 4 {
		g.grant("m-a", 1000)
		g.grant("m-b", 1000)
		g.pay("m-a", 10+i, 1)
		g.pay("m-b", 5, 1)
	}
	g.pay("m-a", 1, 1_000_000) // a rejected row
	want := g.ledgerIDs("m-a")
	if len(want) != 4+46+1 {
		t.Fatalf("m-a has %d ledger rows, want 51", len(want))
	}
	for _, limit := range []string{"1", "7", "51", "1000", ""} {
		var got []string
		after := ""
		for pages := 0; ; pages++ {
			if pages > len(want)+1 {
				t.Fatalf("limit %s: more pages than rows", limit)
			}
			var p page
			g.get("/v1/merchants/m-a/ledger?limit="+limit+"&after="+after, &p)
			for _, r := range p.Rows {
				if r.MerchantID != "m-a" {
					t.Fatalf("limit %s: a row of %s in m-a's ledger", limit, r.MerchantID)
				}
				got = append(got, r.ID)
			}
			if p.Next == "" {
				break
			}
			after = p.Next
		}
		if !slices.Equal(got, want) {
			t.Fatalf("limit %s: pages hold %d rows %v, want %d %v", limit, len(got), got, len(want), want)
		}
	}
}

// A cursor is a seq of a merchant's ledger: one taken from merchant B's pages,
// used with A's id, returns A's rows after that seq and nothing of B's.
func TestCursorOfAnotherMerchant(t *testing.T) {
	g := newRig(t, adminapi.Options{})
	for range 3 {
		g.grant("m-a", 100)
		g.grant("m-b", 100)
	}
	var pb page
	g.get("/v1/merchants/m-b/ledger?limit=1", &pb)
	if pb.Next != "1" || pb.Rows[0].MerchantID != "m-b" || pb.Rows[0].Seq != 1 {
		t.Fatalf("B's first page: %+v", pb)
	}
	var pa page
	g.get("/v1/merchants/m-a/ledger?after="+pb.Next, &pa)
	want := g.ledgerIDs("m-a")[1:]
	var got []string
	for _, r := range pa.Rows {
		if r.MerchantID != "m-a" {
			t.Fatalf("B's cursor with A's id returned a row of %s", r.MerchantID)
		}
		got = append(got, r.ID)
	}
	if len(want) == 0 || !slices.Equal(got, want) {
		t.Fatalf("A's rows after B's cursor %s: %v, want %v", pb.Next, got, want)
	}
}

// Malformed input is 400, an unknown merchant 404 (both with a JSON error),
// other methods 405, HEAD is served.
func TestStatuses(t *testing.T) {
	g := newRig(t, adminapi.Options{})
	g.grant("m-a", 10)
	for _, tt := range []struct {
		method, target string
		code           int
	}{
		{http.MethodGet, "/v1/merchants/m-a/ledger", 200},
		{http.MethodHead, balanceA, 200},
		{http.MethodHead, "/v1/merchants/m-a/ledger", 200},
		{http.MethodGet, "/v1/merchants/m%7Bx%7D/balance", 400},
		{http.MethodGet, "/v1/merchants/" + strings.Repeat("m", 65) + "/ledger", 400},
		{http.MethodGet, "/v1/merchants/m-a/ledger?limit=0", 400},
		{http.MethodGet, "/v1/merchants/m-a/ledger?limit=1001", 400},
		{http.MethodGet, "/v1/merchants/m-a/ledger?limit=ten", 400},
		{http.MethodGet, "/v1/merchants/m-a/ledger?after=-1", 400},
		{http.MethodGet, "/v1/merchants/m-a/ledger?after=abc", 400},
		{http.MethodGet, "/v1/merchants/m-a/ledger?after=99999999999999999999", 400},
		{http.MethodGet, "/v1/merchants/m-nobody/balance", 404},
		{http.MethodGet, "/v1/merchants/m-nobody/ledger", 404},
		{http.MethodGet, "/v1/merchants", 404},
		{http.MethodGet, "/metrics", 404},
		{http.MethodPost, balanceA, 405},
		{http.MethodPut, "/v1/merchants/m-a/ledger", 405},
		{http.MethodDelete, balanceA, 405},
		{http.MethodPatch, balanceA, 405},
	} {
		rec := g.do(tt.method, tt.target, testToken)
		if rec.Code != tt.code {
			t.Errorf("%s %s = %d %s, want %d", tt.method, tt.target, rec.Code, rec.Body, tt.code)
			continue
		}
		if tt.code == 405 && rec.Header().Get("Allow") != "GET, HEAD" {
			t.Errorf("%s %s: Allow %q", tt.method, tt.target, rec.Header().Get("Allow"))
		}
		if tt.code != 200 && (!strings.HasPrefix(rec.Header().Get("Content-Type"), "application/json") || !strings.Contains(rec.Body.String(), `"error":`)) {
			t.Errorf("%s %s: %q %s, want a JSON error", tt.method, tt.target, rec.Header().Get("Content-Type"), rec.Body)
		}
		if tt.method == http.MethodHead && rec.Code == 200 && rec.Header().Get("Content-Type") != "application/json" {
			t.Errorf("HEAD %s: Content-Type %q", tt.target, rec.Header().Get("Content-Type"))
		}
	}
	// POST wrote nothing: the balance is what the grant made it.
	var b balance
	g.get(balanceA, &b)
	if b.MySQL.Credited != 10 || b.MySQL.Debited != 0 {
		t.Fatalf("after the refused writes: %+v", b.MySQL)
	}
}

// A burst beyond the bucket gets 429 with Retry-After; the metrics count it
// by route and code, with no merchant id anywhere.
func TestRateLimit(t *testing.T) {
	// One token per 1000 s: the fourth request finds the bucket empty
	// however slowly the test runs.
	g := newRig(t, adminapi.Options{Rate: 0.001, Burst: 3})
	g.grant("m-a", 10)
	for i := range 3 {
		if rec := g.do(http.MethodGet, balanceA, testToken); rec.Code != http.StatusOK {
			t.Fatalf("request %d: %d %s", i, rec.Code, rec.Body)
		}
	}
	rec := g.do(http.MethodGet, balanceA, testToken)
	if rec.Code != http.StatusTooManyRequests || rec.Header().Get("Retry-After") == "" || rec.Header().Get("Retry-After") == "0" {
		t.Fatalf("fourth request: %d, Retry-After %q; want 429 with a wait", rec.Code, rec.Header().Get("Retry-After"))
	}
	// Refused tokens do not spend the bucket; they are 401 even while it is empty.
	if code := g.do(http.MethodGet, balanceA, "").Code; code != http.StatusUnauthorized {
		t.Fatalf("without a token while limited: %d", code)
	}
	const route = "/v1/merchants/{id}/balance"
	for code, want := range map[string]float64{"200": 3, "429": 1, "401": 1} {
		if got := g.requests(route, code); got != want {
			t.Errorf("billing_admin_requests_total{route=%q,code=%q} = %v, want %v", route, code, got, want)
		}
	}
	mfs, err := g.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if strings.Contains(l.GetValue(), "m-a") {
					t.Errorf("%s has a merchant id in label %s=%s", mf.GetName(), l.GetName(), l.GetValue())
				}
			}
		}
	}
}
