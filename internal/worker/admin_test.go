package worker

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"

	"github.com/quotaflow/billing/internal/scenario"
	"github.com/quotaflow/billing/internal/workload"
)

// A worker with ADMIN_ADDR serves the read API on that listener only, behind
// its token: the balance it shows is what the consumed events left, the ops
// port counts its requests and serves none of its routes.
func TestWorkerServesReadAPI(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	g := newRig(t, 1)
	const token = "worker-test-token-0123456789"
	tokenFile := filepath.Join(t.TempDir(), "admin-token")
	if err := os.WriteFile(tokenFile, []byte(token+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	g.env["ADMIN_ADDR"], g.env["ADMIN_TOKEN_FILE"] = "127.0.0.1:0", tokenFile
	w := g.start(4, Options{})
	traffic, err := scenario.BuildTraffic(workload.Config{Seed: 4, Merchants: 1, IDPrefix: "adm-"}, 6, 0)
	if err != nil {
		t.Fatal(err)
	}
	merchant := traffic.Merchants()[0]
	grantAll(t, w.Worker, traffic.Merchants(), 1_000_000)
	g.produce(ctx, traffic.Messages)
	g.drain(ctx)

	get := func(addr net.Addr, path, bearer string) (int, string) {
		t.Helper()
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr.String()+path, nil)
		if err != nil {
			t.Fatal(err)
		}
		if bearer != "" {
			req.Header.Set("Authorization", "Bearer "+bearer)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	t.Cleanup(http.DefaultClient.CloseIdleConnections)

	balance := "/v1/merchants/" + merchant + "/balance"
	if code, _ := get(w.AdminAddr, balance, ""); code != http.StatusUnauthorized {
		t.Fatalf("without a token: %d", code)
	}
	code, body := get(w.AdminAddr, balance, token)
	if code != http.StatusOK {
		t.Fatalf("GET %s = %d %s", balance, code, body)
	}
	var b struct {
		MySQL struct{ Credited, Debited int64 } `json:"mysql"`
	}
	if err := json.Unmarshal([]byte(body), &b); err != nil {
		t.Fatal(err)
	}
	var debited int64
	if err := g.db.DB.Raw("SELECT debited FROM merchant_balance WHERE merchant_id = ?", merchant).Scan(&debited).Error; err != nil {
		t.Fatal(err)
	}
	if b.MySQL.Credited != 1_000_000 || b.MySQL.Debited != debited || debited == 0 {
		t.Fatalf("balance %+v, MySQL debited %d", b.MySQL, debited)
	}
	if code, _ := get(w.AdminAddr, "/metrics", token); code != http.StatusNotFound {
		t.Errorf("/metrics on ADMIN_ADDR = %d, want 404", code)
	}
	if code, _ := get(w.HTTPAddr, balance, token); code != http.StatusNotFound {
		t.Errorf("%s on HTTP_ADDR = %d, want 404", balance, code)
	}
	_, metrics := get(w.HTTPAddr, "/metrics", "")
	for _, want := range []string{
		`billing_admin_requests_total{code="200",route="/v1/merchants/{id}/balance"} 1`,
		`billing_admin_requests_total{code="401",route="/v1/merchants/{id}/balance"} 1`,
		`billing_admin_requests_total{code="404",route="other"} 1`,
	} {
		if !strings.Contains(metrics, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
}

// An ADMIN_ADDR that cannot be bound fails the start, naming the variable.
func TestAdminAddrInUse(t *testing.T) {
	g := newRig(t, 1)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	tokenFile := filepath.Join(t.TempDir(), "admin-token")
	if err := os.WriteFile(tokenFile, []byte("worker-test-token-0123456789"), 0o600); err != nil {
		t.Fatal(err)
	}
	g.env["ADMIN_ADDR"], g.env["ADMIN_TOKEN_FILE"] = ln.Addr().String(), tokenFile
	w, err := New(context.Background(), g.config(5), zaptest.NewLogger(t), Options{})
	if err == nil {
		w.close()
		t.Fatal("New started with ADMIN_ADDR in use")
	}
	if !strings.Contains(err.Error(), "ADMIN_ADDR") {
		t.Fatalf("error %q does not name ADMIN_ADDR", err)
	}
}
