package quota

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/quotaflow/billing/internal/testenv"
)

func TestParse(t *testing.T) {
	at := time.UnixMilli(1_764_400_000_123).UTC()
	q, err := Parse(map[string]string{FieldRemain: "-3", FieldVer: "7", PendingField("b"): FormatPending(2, at),
		PendingField("a"): "1000000000000:1700000000001", "other": "x"})
	if err != nil {
		t.Fatal(err)
	}
	want := []Pending{{EventID: "a", Amount: 1_000_000_000_000, At: time.UnixMilli(1700000000001).UTC()}, {EventID: "b", Amount: 2, At: at}}
	if !q.Exists || q.Remain != -3 || q.Ver != "7" || fmt.Sprint(q.Pending) != fmt.Sprint(want) {
		t.Fatalf("parsed %+v", q)
	}
	if q, err := Parse(nil); err != nil || q.Exists {
		t.Fatalf("empty: %+v %v", q, err)
	}
	if q, err := Parse(map[string]string{FieldVer: "1", "p:e": "x"}); err != nil || q.Exists || q.Leftover != 2 {
		t.Fatalf("hash without remain: %+v %v", q, err)
	}
	for _, bad := range []map[string]string{
		{FieldRemain: "1.5"},
		{FieldRemain: "1", "p:e": "3"}, // no time: not what the deduction script writes
		{FieldRemain: "1", "p:e": ""},
		{FieldRemain: "1", "p:e": "0:1700000000000"},
		{FieldRemain: "1", "p:e": "-1:1700000000000"},
		{FieldRemain: "1", "p:e": "x:1700000000000"},
		{FieldRemain: "1", "p:e": "3:"},
		{FieldRemain: "1", "p:e": "3:0"},
		{FieldRemain: "1", "p:e": "3:soon"},
		{FieldRemain: "1", "p:": "3:1700000000000"},
	} {
		if _, err := Parse(bad); err == nil {
			t.Errorf("%v parsed", bad)
		}
	}
}

// A script the server has never seen (NOSCRIPT on EVALSHA, as after a
// restart or failover) still runs, in a pipeline.
func TestRunFallsBackToEval(t *testing.T) {
	r := testenv.NewRedis(t)
	ctx := context.Background()
	s := redis.NewScript(fmt.Sprintf("-- %s\nreturn {'ok', ARGV[1]}", testenv.UniqueName(t, "script")))
	if ok, err := s.Exists(ctx, r.Client).Result(); err != nil || ok[0] {
		t.Fatalf("script unexpectedly cached: %v %v", ok, err)
	}
	calls := []*Call{{Script: s, Keys: []string{"k"}, Args: []any{"a"}}, {Script: s, Keys: []string{"k"}, Args: []any{"b"}}}
	Run(ctx, r.Client, calls...)
	for i, c := range calls {
		status, values, err := c.Reply()
		if err != nil || status != "ok" || values[0] != string(rune('a'+i)) {
			t.Errorf("call %d: %q %v %v", i, status, values, err)
		}
	}
	if ok, err := s.Exists(ctx, r.Client).Result(); err != nil || !ok[0] {
		t.Errorf("script not cached after the fallback: %v %v", ok, err)
	}
}

// Hydrate writes a missing hash (dropping leftovers) only for the lock's
// holder, and never overwrites a remain.
func TestHydrate(t *testing.T) {
	r := testenv.NewRedis(t)
	ctx := context.Background()
	key, lock := r.Keys.Quota("m"), r.Keys.Lock("m")
	now := time.Now()
	if err := r.Client.HSet(ctx, key, PendingField("old"), FormatPending(3, now)).Err(); err != nil {
		t.Fatal(err)
	}
	if err := r.Client.Set(ctx, lock, "ours", time.Minute).Err(); err != nil {
		t.Fatal(err)
	}
	hydrate := func(token string, remain int64) (bool, error) {
		c := Hydrate(key, lock, token, remain, "0", now)
		Run(ctx, r.Client, c)
		return c.Wrote()
	}
	if _, err := hydrate("theirs", 5); !errors.Is(err, ErrNotHeld) {
		t.Fatalf("another token: %v, want ErrNotHeld", err)
	}
	if wrote, err := hydrate("ours", 5); err != nil || !wrote {
		t.Fatalf("missing hash: wrote %v, %v", wrote, err)
	}
	if wrote, err := hydrate("ours", 9); err != nil || wrote {
		t.Fatalf("present hash: wrote %v, %v", wrote, err)
	}
	h, err := Read(ctx, r.Client, []string{key, r.Keys.Quota("none")})
	if err != nil {
		t.Fatal(err)
	}
	q, err := Parse(h[0])
	if err != nil || !q.Exists || q.Remain != 5 || q.Ver != fmt.Sprint(now.UnixMicro()) || len(q.Pending) != 0 || len(h[1]) != 0 {
		t.Fatalf("after hydration: %+v %v; missing key read as %v", q, err, h[1])
	}
}

// A rewrite by a caller whose shard lock is gone changes nothing; the
// holder's replaces the hash with its remain, ver, floor and pending.
func TestRewriteIsFenced(t *testing.T) {
	r := testenv.NewRedis(t)
	ctx := context.Background()
	key, lock := r.Keys.Quota("m#1"), r.Keys.Lock("m#1")
	now := time.Now()
	if err := r.Client.HSet(ctx, key, "remain", 7, "ver", 1, PendingField("old"), FormatPending(3, now)).Err(); err != nil {
		t.Fatal(err)
	}
	if err := r.Client.Set(ctx, lock, "ours", time.Minute).Err(); err != nil {
		t.Fatal(err)
	}
	rewrite := func(token string) error {
		c := Rewrite(key, lock, token, 40, 2, "5", 2, []Pending{{EventID: "new", Amount: 2, At: now}})
		Run(ctx, r.Client, c)
		_, err := c.Wrote()
		return err
	}
	if err := rewrite("theirs"); !errors.Is(err, ErrNotHeld) {
		t.Fatalf("another token: %v, want ErrNotHeld", err)
	}
	if got := r.Client.HGetAll(ctx, key).Val(); got["remain"] != "7" || got[PendingField("old")] == "" {
		t.Fatalf("a refused rewrite changed the hash: %v", got)
	}
	if err := rewrite("ours"); err != nil {
		t.Fatal(err)
	}
	got := r.Client.HGetAll(ctx, key).Val()
	if got["remain"] != "40" || got["ver"] != "2" || got["floor"] != "5" || got[PendingField("old")] != "" || got[PendingField("new")] == "" {
		t.Fatalf("after the holder's rewrite: %v", got)
	}
}
