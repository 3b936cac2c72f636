package adminapi_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/legacy"
	_ "github.com/go-sql-driver/mysql"
	"github.com/redis/go-redis/v9"
	"github.com/segmentio/kafka-go"
	"go.uber.org/zap/zaptest"

	"github.com/quotaflow/billing/internal/adminapi"
	"github.com/quotaflow/billing/internal/deduct"
	"github.com/quotaflow/billing/internal/dlq"
	"github.com/quotaflow/billing/internal/event"
	"github.com/quotaflow/billing/internal/keyspace"
	"github.com/quotaflow/billing/internal/ledger"
	"github.com/quotaflow/billing/internal/ledger/ledgerdb"
	"github.com/quotaflow/billing/internal/lock"
	"github.com/quotaflow/billing/internal/quota"
)

const openAPIPath = "../../api/openapi.yaml"

func loadOpenAPI(t *testing.T) (*openapi3.T, routers.Router) {
	t.Helper()
	loader := openapi3.NewLoader()
	doc, err := loader.LoadFromFile(openAPIPath)
	if err != nil {
		t.Fatal(err)
	}
	if err := doc.Validate(loader.Context); err != nil {
		t.Fatalf("%s is not valid OpenAPI: %v", openAPIPath, err)
	}
	doc.Servers = nil // match requests by path alone
	router, err := legacy.NewRouter(doc)
	if err != nil {
		t.Fatal(err)
	}
	return doc, router
}

// The handlers hold to api/openapi.yaml: every route is documented and every
// documented path is routed; every documented status of every operation is
// produced by some request, and every response produced validates against the
// document (status, headers, body schema). 405, documented in prose, has the
// Error schema.
func TestOpenAPI(t *testing.T) {
	doc, router := loadOpenAPI(t)

	var documented []string
	for path := range doc.Paths.Map() {
		documented = append(documented, path)
	}
	routed := adminapi.RoutePaths()
	slices.Sort(documented)
	slices.Sort(routed)
	if !slices.Equal(documented, routed) {
		t.Fatalf("documented paths %v, routed %v", documented, routed)
	}

	g := newRig(t, adminapi.Options{})
	g.grant("m-a", 100)
	g.pay("m-a", 3, 10)
	g.pay("m-a", 1, 1000) // rejected
	if err := g.redis.Client.HSet(context.Background(), g.redis.Keys.Quota("m-a"), quota.PendingField("evt-x"), quota.FormatPending(2, time.Now())).Err(); err != nil {
		t.Fatal(err)
	}
	g.grant("m-nokey", 5)
	if err := g.redis.Client.Del(context.Background(), g.redis.Keys.Quota("m-nokey")).Err(); err != nil {
		t.Fatal(err)
	}
	g.grant("m-sharded", 400) // shards in the balance, a floor policy in its mysql part
	if _, err := g.d.Reshard(context.Background(), "m-sharded", 3); err != nil {
		t.Fatal(err)
	}
	if err := g.d.SetPolicy(context.Background(), "m-sharded", ledger.Policy{Kind: ledger.PolicyFloor, Floor: 50}); err != nil {
		t.Fatal(err)
	}
	// An expired grant and a live one: grants of both states, expire and debit rows naming them.
	exp := time.Now().Add(time.Second)
	prio := 1
	if _, err := g.d.GrantBatch(context.Background(), []event.GrantCommand{{GrantID: "g-exp", MerchantID: "m-exp", Amount: 50, Priority: &prio, ExpiresAt: &exp, RolloverMax: 5}}); err != nil {
		t.Fatal(err)
	}
	g.grant("m-exp", 20)
	g.pay("m-exp", 1, 4)
	for time.Sleep(time.Until(exp)); ; time.Sleep(50 * time.Millisecond) {
		n, err := g.d.ExpireDue(context.Background(), 10)
		if err != nil {
			t.Fatal(err)
		}
		if n > 0 {
			break
		}
	}
	g.pay("m-exp", 1, 3)
	limited := newRig(t, adminapi.Options{Rate: 0.001, Burst: 1})
	broken := brokenAPI(t, limited.tokenPath)

	covered := map[string]bool{} // "METHOD path status"
	check := func(api http.Handler, method, target, token string) {
		t.Helper()
		req := httptest.NewRequest(method, target, nil)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		rec := httptest.NewRecorder()
		api.ServeHTTP(rec, req)
		body := rec.Body.Bytes()
		route, params, err := router.FindRoute(req)
		if method != http.MethodGet {
			if rec.Code != http.StatusMethodNotAllowed && rec.Code != http.StatusUnauthorized {
				t.Errorf("%s %s = %d, want 405 or 401", method, target, rec.Code)
			}
			var v any
			if err := json.Unmarshal(body, &v); err != nil {
				t.Fatalf("%s %s: %v", method, target, err)
			}
			if err := doc.Components.Schemas["Error"].Value.VisitJSON(v); err != nil {
				t.Errorf("%s %s = %d %s: not an Error: %v", method, target, rec.Code, body, err)
			}
			return
		}
		if err != nil {
			t.Fatalf("GET %s (%d) has no documented route: %v", target, rec.Code, err)
		}
		in := &openapi3filter.ResponseValidationInput{
			RequestValidationInput: &openapi3filter.RequestValidationInput{Request: req, PathParams: params, Route: route},
			Status:                 rec.Code, Header: rec.Header(),
			Options: &openapi3filter.Options{IncludeResponseStatus: true},
		}
		in.SetBodyBytes(body)
		if err := openapi3filter.ValidateResponse(context.Background(), in); err != nil {
			t.Errorf("GET %s = %d %s: %v", target, rec.Code, body, err)
		}
		covered[fmt.Sprintf("%s %s %d", method, route.Path, rec.Code)] = true
	}

	// An event with a ledger row and balance events, and one only in the DLQ.
	g.apply(event.PaymentSucceeded{EventID: "evt-known", PaymentID: "p-known", MerchantID: "m-exp", Amount: 1, Source: event.SourcePC, OccurredAt: time.Now()})
	g.deadLetter(dlq.FromFailure(kafka.Message{Topic: "payments", Partition: 1, Offset: 7, Key: []byte("m-a"),
		Value: []byte(`{"event_id":"evt-dlq","merchant_id":"m-a","amount":"x"}`)}, "billing-worker", dlq.ClassInvalid, errors.New("amount"), 1, time.Now(), time.Now()))
	check(g.api, http.MethodGet, "/v1/events/evt-known", testToken)
	check(g.api, http.MethodGet, "/v1/events/evt-dlq", testToken)
	for _, path := range []string{"/v1/merchants/%s/balance", "/v1/merchants/%s/ledger", "/v1/events/%s"} {
		for _, m := range []string{"m-a", "m-nokey", "m-sharded", "m-exp"} {
			check(g.api, http.MethodGet, fmt.Sprintf(path, m), testToken)
		}
		check(g.api, http.MethodGet, fmt.Sprintf(path, "m-nobody"), testToken)
		check(g.api, http.MethodGet, fmt.Sprintf(path, "m%7Bbad%7D"), testToken)
		check(g.api, http.MethodGet, fmt.Sprintf(path, "m-a"), "")
		check(g.api, http.MethodGet, fmt.Sprintf(path, "m-a"), "wrong-token-0123456789")
		check(limited.api, http.MethodGet, fmt.Sprintf(path, "m-a"), testToken) // spends the one token
		check(limited.api, http.MethodGet, fmt.Sprintf(path, "m-a"), testToken) // 429
		check(broken, http.MethodGet, fmt.Sprintf(path, "m-a"), testToken)
		for _, method := range []string{http.MethodPost, http.MethodPut, http.MethodDelete} {
			check(g.api, method, fmt.Sprintf(path, "m-a"), testToken)
			check(g.api, method, fmt.Sprintf(path, "m-a"), "")
		}
	}
	for _, q := range []string{"?limit=2", "?limit=2&after=1", "?after=x", "?limit=5000"} {
		check(g.api, http.MethodGet, "/v1/merchants/m-a/ledger"+q, testToken)
	}

	for path, item := range doc.Paths.Map() {
		for method, op := range item.Operations() {
			for status := range op.Responses.Map() {
				if key := fmt.Sprintf("%s %s %s", method, path, status); !covered[key] {
					t.Errorf("%s is documented but no request produced it", key)
				}
			}
		}
	}
	for key := range covered {
		parts := strings.Fields(key)
		if doc.Paths.Value(parts[1]).GetOperation(parts[0]).Responses.Value(parts[2]) == nil {
			t.Errorf("%s is produced but not documented", key)
		}
	}
}

// brokenAPI reads through a Redis and a MySQL that refuse connections (ports
// nothing listens on): every read is an outage.
func brokenAPI(t *testing.T, tokenPath string) *adminapi.API {
	t.Helper()
	deadAddr := func() string {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer ln.Close()
		return ln.Addr().String()
	}
	rdb := redis.NewClient(&redis.Options{Addr: deadAddr(), MaxRetries: -1, DialTimeout: time.Second})
	t.Cleanup(func() { _ = rdb.Close() })
	db, err := sql.Open("mysql", "root@tcp("+deadAddr()+")/billing?parseTime=true&timeout=1s")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	store, err := ledgerdb.New(db, nil, nil, ledgerdb.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = store.Close() })
	keys, err := keyspace.New("broken")
	if err != nil {
		t.Fatal(err)
	}
	locks, err := lock.New(rdb, lock.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = locks.Close() })
	d, err := deduct.New(rdb, keys, deduct.MerchantLocks(locks, keys, time.Second), store, nil, nil, deduct.Options{})
	if err != nil {
		t.Fatal(err)
	}
	dc, err := dlq.NewClient(dlq.Broker{Addrs: []string{deadAddr()}})
	if err != nil {
		t.Fatal(err)
	}
	api, err := adminapi.New(d, store, adminapi.NewEvents(db, dc, "dlq"), adminapi.Options{TokenFile: tokenPath, Rate: 1000, Burst: 1000}, zaptest.NewLogger(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	return api
}
