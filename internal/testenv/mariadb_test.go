package testenv_test

import (
	"testing"

	"github.com/quotaflow/billing/internal/testenv"
)

// A private mariadbd keeps committed rows across a SIGKILL and a restart on
// the same port, and a migrated database of its own enforces the schema.
func TestMariaDBSurvivesKill(t *testing.T) {
	srv := testenv.StartMariaDB(t)
	db := srv.NewMySQL(t)
	if err := db.DB.Exec("INSERT INTO merchant_balance (merchant_id, credited) VALUES ('m-1', 5)").Error; err != nil {
		t.Fatal(err)
	}
	srv.Kill()
	if err := db.SQL.Ping(); err == nil {
		t.Fatal("ping succeeded with the server killed")
	}
	srv.Start()
	var credited int64
	if err := db.DB.Raw("SELECT credited FROM merchant_balance WHERE merchant_id = 'm-1'").Scan(&credited).Error; err != nil || credited != 5 {
		t.Fatalf("after restart: credited %d, %v; want 5", credited, err)
	}
	if err := db.DB.Exec("UPDATE merchant_balance SET debited = -1 WHERE merchant_id = 'm-1'").Error; err == nil {
		t.Fatal("server accepted a negative debited total")
	}
}
