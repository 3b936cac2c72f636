package statement_test

import (
	"bytes"
	"context"
	"database/sql"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/quotaflow/billing/internal/ledger"
	"github.com/quotaflow/billing/internal/statement"
)

var (
	scaleRows      = flag.Int("statement.rows", 0, "ledger rows of BenchmarkExportScale (0: skip it), e.g. 10000000")
	scaleMerchants = flag.Int("statement.merchants", 100000, "merchants of BenchmarkExportScale")
)

// BenchmarkExportScale fills a scratch database with -statement.rows ledger
// rows over -statement.merchants merchants (INSERT ... SELECT from
// MariaDB's sequence tables: ids interleaved across merchants as Snowflake
// ids are, so ledger order is not primary-key order), exports them all, and
// reports the rate, the process's peak RSS during the export (VmHWM, reset
// before it) and, measured in the same run, the rate of the mariadb client
// dumping the same rows in the same order to a file, once before the export
// and once after (the faster counts).
func BenchmarkExportScale(b *testing.B) {
	if *scaleRows == 0 {
		b.Skip("set -statement.rows (and -statement.merchants)")
	}
	e := newEnv(b)
	per := *scaleRows / *scaleMerchants
	rows := int64(per * *scaleMerchants)
	start := time.Now()
	fillLedger(b, e, *scaleMerchants, per)
	b.Logf("filled %d rows over %d merchants in %v", rows, *scaleMerchants, time.Since(start).Round(time.Second))
	o := statement.Options{Period: ledger.Period{From: base, To: base.AddDate(0, 1, 0)}, Out: filepath.Join(e.dir, "all.jsonl")}

	before := dumpRate(b, e, rows)
	db := interpolating(b, e)
	b.ResetTimer()
	var took, cpu time.Duration
	var hwm int64
	for b.Loop() {
		resetPeakRSS(b)
		start, cpu0 := time.Now(), cpuTime(b)
		sum, err := e.export(context.Background(), db, o)
		took, cpu = took+time.Since(start), cpu+cpuTime(b)-cpu0
		if err != nil {
			b.Fatal(err)
		}
		if sum.Trailer.Rows != rows {
			b.Fatalf("exported %d rows, want %d", sum.Trailer.Rows, rows)
		}
		hwm = max(hwm, peakRSS(b))
	}
	b.StopTimer()
	dump := max(before, dumpRate(b, e, rows)) // the better of a dump before and one after: caches favour neither side
	rate := float64(rows) * float64(b.N) / took.Seconds()
	b.ReportMetric(rate, "rows/s")
	b.ReportMetric(float64(hwm)/1024, "peak-RSS-MiB")
	b.ReportMetric(dump, "dump-rows/s")
	b.ReportMetric(rate/dump, "export/dump")
	b.ReportMetric(float64(cpu.Microseconds())/float64(rows*int64(b.N)), "CPU-µs/row")
}

// fillLedger writes per rows for each of n merchants, each a statement that
// ties out: seq 1 a credit of 10^9, then debits of 3, every tenth row a
// rejection; rows recorded over November 2026 in seq order.
func fillLedger(b *testing.B, e *env, n, per int) {
	const batch = 2000 // merchants per INSERT
	exec := func(q string, args ...any) {
		b.Helper()
		if _, err := e.db.SQL.Exec(q, args...); err != nil {
			b.Fatalf("%s: %v", q, err)
		}
	}
	exec(`INSERT INTO merchant_balance (merchant_id, credited, debited, seq)
		SELECT CONCAT('m-', LPAD(seq, 6, '0')), 1000000000, 3 * ((? - 1) - FLOOR(? / 10)), ? FROM seq_1_to_`+strconv.Itoa(n), per, per, per)
	spacing := 28 * 86400 / per // seconds between a merchant's rows
	for lo := 1; lo <= n; lo += batch {
		hi := min(lo+batch-1, n)
		exec(fmt.Sprintf(`INSERT INTO quota_ledger (id, event_id, merchant_id, kind, amount, balance_after, reason, payment_id, source,
				occurred_at, created_at, overage, grant_id, seq)
			SELECT s.seq * %[1]d + m.seq, CONCAT('e-', s.seq * %[1]d + m.seq), CONCAT('m-', LPAD(m.seq, 6, '0')),
				CASE WHEN s.seq = 1 THEN 'credit' WHEN s.seq %% 10 = 0 THEN 'rejected' ELSE 'debit' END,
				CASE WHEN s.seq = 1 THEN 1000000000 WHEN s.seq %% 10 = 0 THEN 2000000000 ELSE 3 END,
				1000000000 - 3 * ((s.seq - 1) - FLOOR(s.seq / 10)),
				CASE WHEN s.seq = 1 THEN 'grant' WHEN s.seq %% 10 = 0 THEN 'insufficient' ELSE 'payment' END,
				IF(s.seq = 1, '', CONCAT('pay-', s.seq * %[1]d + m.seq)), IF(s.seq = 1, '', 'pc'),
				TIMESTAMPADD(SECOND, s.seq * %[2]d + m.seq %% %[2]d, ?), TIMESTAMPADD(SECOND, s.seq * %[2]d + m.seq %% %[2]d, ?),
				0, IF(s.seq = 1, CONCAT('g-', m.seq), NULL), s.seq
			FROM seq_1_to_%[3]d s JOIN seq_%[4]d_to_%[5]d m`, n+1, spacing, per, lo, hi), base, base)
	}
	exec("ANALYZE TABLE quota_ledger, merchant_balance")
}

// interpolating is a pool on the test's database that sends values in the
// SQL text, as the programs' pools do (dial.MySQL): MariaDB plans such
// statements differently from prepared ones.
func interpolating(b *testing.B, e *env) *sql.DB {
	cfg, err := mysql.ParseDSN(e.db.DSN)
	if err != nil {
		b.Fatal(err)
	}
	cfg.InterpolateParams = true
	db, err := sql.Open("mysql", cfg.FormatDSN())
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { db.Close() })
	return db
}

// dumpRate runs the mariadb client on the export's query of all rows, in
// ledger order, into a file, and returns its rows per second.
func dumpRate(b *testing.B, e *env, rows int64) float64 {
	cfg, err := mysql.ParseDSN(e.db.DSN)
	if err != nil {
		b.Fatal(err)
	}
	host, port, _ := strings.Cut(cfg.Addr, ":")
	out, err := os.Create(filepath.Join(e.dir, "dump.tsv"))
	if err != nil {
		b.Fatal(err)
	}
	defer out.Close()
	q := "SELECT id, event_id, merchant_id, kind, amount, balance_after, reason, payment_id, source, occurred_at, created_at, overage, grant_id, seq " +
		"FROM quota_ledger FORCE INDEX (quota_ledger_merchant_seq) WHERE seq IS NOT NULL ORDER BY merchant_id, seq"
	cmd := exec.Command("mariadb", "-h", host, "-P", port, "-u", cfg.User, "--quick", "-N", "-B", cfg.DBName, "-e", q)
	var stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = out, &stderr
	start := time.Now()
	if err := cmd.Run(); err != nil {
		b.Fatalf("mariadb: %v: %s", err, stderr.String())
	}
	took := time.Since(start)
	b.Logf("mariadb dumped %d rows in %v", rows, took.Round(time.Millisecond))
	return float64(rows) / took.Seconds()
}

// cpuTime is the CPU the process has used (user and system).
func cpuTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// resetPeakRSS resets the process's VmHWM (Linux: 5 > clear_refs).
func resetPeakRSS(b *testing.B) {
	if err := os.WriteFile("/proc/self/clear_refs", []byte("5"), 0); err != nil {
		b.Fatal(err)
	}
}

// peakRSS is the process's VmHWM in KiB.
func peakRSS(b *testing.B) int64 {
	data, err := os.ReadFile("/proc/self/status")
	if err != nil {
		b.Fatal(err)
	}
	for _, line := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			n, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			if err != nil {
				b.Fatal(err)
			}
			return n
		}
	}
	b.Fatal("no VmHWM in /proc/self/status")
	return 0
}
