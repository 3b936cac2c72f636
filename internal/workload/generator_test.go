package workload

import (
	"bytes"
	"errors"
	"math"
	"testing"

	"github.com/quotaflow/billing/internal/event"
)

func generate(t *testing.T, cfg Config, n int) []Message {
	t.Helper()
	msgs, err := Generate(cfg, n)
	if err != nil {
		t.Fatal(err)
	}
	return msgs
}

func TestDeterministicBySeed(t *testing.T) {
	cfg := Config{Seed: 7, Merchants: 50, Skew: Skew{Kind: Zipf, Param: 1.2}, Duplicates: 0.05, Malformed: 0.05}
	a := generate(t, cfg, 2000)
	b := generate(t, cfg, 2000)
	for i := range a {
		if !bytes.Equal(a[i].Key, b[i].Key) || !bytes.Equal(a[i].Value, b[i].Value) || a[i].Kind != b[i].Kind {
			t.Fatalf("message %d differs between two runs of seed 7: %s vs %s", i, a[i].Value, b[i].Value)
		}
	}
	cfg.Seed = 8
	c := generate(t, cfg, 2000)
	same := 0
	for i := range a {
		if bytes.Equal(a[i].Value, c[i].Value) {
			same++
		}
	}
	if same > 100 {
		t.Fatalf("seeds 7 and 8 agree on %d of 2000 messages", same)
	}
}

func TestRates(t *testing.T) {
	const n = 20_000
	tests := []struct {
		name                  string
		duplicates, malformed float64
	}{
		{"clean", 0, 0},
		{"one percent duplicates", 0.01, 0},
		{"tenth of a percent malformed", 0, 0.001},
		{"both", 0.05, 0.02},
		{"all malformed", 0, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := Summarize(generate(t, Config{Seed: 1, Duplicates: tt.duplicates, Malformed: tt.malformed}, n))
			checkShare(t, "duplicates", s.Duplicates, n, tt.duplicates)
			checkShare(t, "malformed", s.Malformed, n, tt.malformed)
			if s.Valid+s.Duplicates+s.Malformed != n {
				t.Fatalf("kinds add up to %d, want %d", s.Valid+s.Duplicates+s.Malformed, n)
			}
		})
	}
}

// checkShare asserts count/n is within 5 standard deviations of p (binomial).
func checkShare(t *testing.T, what string, count, n int, p float64) {
	t.Helper()
	tol := 5*math.Sqrt(p*(1-p)/float64(n)) + 1/float64(n)
	if got := float64(count) / float64(n); math.Abs(got-p) > tol {
		t.Errorf("%s: share %.5f, want %.5f +- %.5f", what, got, p, tol)
	}
}

func TestSkewShape(t *testing.T) {
	const n, merchants = 30_000, 30
	t.Run("uniform", func(t *testing.T) {
		s := perMerchant(generate(t, Config{Seed: 3, Merchants: merchants}, n))
		if len(s) != merchants {
			t.Fatalf("%d merchants seen, want %d", len(s), merchants)
		}
		for m, count := range s {
			checkShare(t, m, count, n, 1.0/merchants)
		}
	})
	t.Run("hot 0.2", func(t *testing.T) {
		s := perMerchant(generate(t, Config{Seed: 3, Merchants: merchants, Skew: Skew{Kind: Hot, Param: 0.2}}, n))
		checkShare(t, "hot merchant", s[MerchantID(0)], n, 0.2)
		for i := 1; i < merchants; i++ {
			checkShare(t, MerchantID(i), s[MerchantID(i)], n, 0.8/(merchants-1))
		}
	})
	t.Run("zipf 1.1", func(t *testing.T) {
		const exp = 1.1
		s := perMerchant(generate(t, Config{Seed: 3, Merchants: merchants, Skew: Skew{Kind: Zipf, Param: exp}}, n))
		var norm float64
		for k := range merchants {
			norm += math.Pow(float64(k+1), -exp)
		}
		for _, k := range []int{0, 1, 2, 9, 29} {
			checkShare(t, MerchantID(k), s[MerchantID(k)], n, math.Pow(float64(k+1), -exp)/norm)
		}
		if s[MerchantID(0)] <= s[MerchantID(1)] {
			t.Error("rank 0 is not the most frequent merchant")
		}
	})
	t.Run("one merchant", func(t *testing.T) {
		s := perMerchant(generate(t, Config{Seed: 3, Merchants: 1, Skew: Skew{Kind: Hot, Param: 0.3}}, 100))
		if s[MerchantID(0)] != 100 {
			t.Fatalf("single merchant got %d of 100", s[MerchantID(0)])
		}
	})
}

func TestAmountsAndSources(t *testing.T) {
	const n = 15_000
	msgs := generate(t, Config{Seed: 5, MinAmount: 3, MaxAmount: 7}, n)
	amounts := map[int64]int{}
	sources := map[event.Source]int{}
	for _, m := range msgs {
		amounts[m.Event.Amount]++
		sources[m.Event.Source]++
	}
	for a := int64(3); a <= 7; a++ {
		checkShare(t, "amount", amounts[a], n, 0.2)
	}
	if len(amounts) != 5 {
		t.Errorf("amounts outside 3..7: %v", amounts)
	}
	for _, src := range []event.Source{event.SourcePC, event.SourceMiniApp, event.SourceOpenAPI} {
		checkShare(t, string(src), sources[src], n, 1.0/3)
	}
	fixed := generate(t, Config{Seed: 5, MinAmount: 4, MaxAmount: 4}, 100)
	for _, m := range fixed {
		if m.Event.Amount != 4 {
			t.Fatalf("amount %d with min = max = 4", m.Event.Amount)
		}
	}
}

// The truth a message carries matches what a consumer would make of it.
func TestMessagesAreWhatTheySay(t *testing.T) {
	msgs := generate(t, Config{Seed: 11, Merchants: 20, Duplicates: 0.1, Malformed: 0.2, IDPrefix: "run1-"}, 8_000)
	seen := map[string]int{} // event_id -> seq of its valid message
	flaws := map[string]int{}
	for _, m := range msgs {
		e, err := event.Decode(m.Key, m.Value)
		switch m.Kind {
		case Valid:
			if err != nil {
				t.Fatalf("valid message %d does not decode: %v: %s", m.Seq, err, m.Value)
			}
			if e != m.Event || string(m.Key) != e.MerchantID {
				t.Fatalf("message %d: decoded %+v, key %q; truth %+v", m.Seq, e, m.Key, m.Event)
			}
			if _, dup := seen[e.EventID]; dup {
				t.Fatalf("valid message %d reuses event_id %s", m.Seq, e.EventID)
			}
			seen[e.EventID] = m.Seq
		case Duplicate:
			if err != nil {
				t.Fatalf("duplicate %d does not decode: %v", m.Seq, err)
			}
			orig, ok := seen[e.EventID]
			if !ok || orig != m.DuplicateOf || !bytes.Equal(msgs[orig].Value, m.Value) || !bytes.Equal(msgs[orig].Key, m.Key) {
				t.Fatalf("duplicate %d (of %d) is not a copy of an earlier valid message", m.Seq, m.DuplicateOf)
			}
		case Malformed:
			if !errors.Is(err, event.ErrInvalid) {
				t.Fatalf("malformed message %d (%s) decodes: %v, %s", m.Seq, m.Flaw, err, m.Value)
			}
			if _, clash := seen[m.Event.EventID]; clash {
				t.Fatalf("malformed %d shares event_id %s with a valid message", m.Seq, m.Event.EventID)
			}
			flaws[m.Flaw]++
		}
	}
	for _, f := range Flaws() {
		if flaws[f] == 0 {
			t.Errorf("flaw %s never generated", f)
		}
	}
}

// A duplicate drawn before any valid message exists must not turn into a
// malformed one when no malformed messages were asked for.
func TestNoMalformedWhenNoneAsked(t *testing.T) {
	for seed := uint64(0); seed < 200; seed++ {
		msgs, err := Generate(Config{Seed: seed, Merchants: 5, Duplicates: 0.5}, 20)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range msgs {
			if m.Kind == Malformed {
				t.Fatalf("seed %d: message %d is malformed with Malformed=0", seed, m.Seq)
			}
		}
	}
}
