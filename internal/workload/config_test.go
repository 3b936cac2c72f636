package workload

import (
	"strings"
	"testing"
)

func TestParseSkew(t *testing.T) {
	tests := []struct {
		in      string
		want    Skew
		wantErr string
	}{
		{in: "uniform", want: Skew{Kind: Uniform}},
		{in: "", want: Skew{Kind: Uniform}},
		{in: "hot:0.2", want: Skew{Kind: Hot, Param: 0.2}},
		{in: "hot:1", want: Skew{Kind: Hot, Param: 1}},
		{in: "zipf:1.1", want: Skew{Kind: Zipf, Param: 1.1}},
		{in: "zipf:1", wantErr: "exponent"},
		{in: "hot:1.5", wantErr: "hot share"},
		{in: "hot", wantErr: "parameter"},
		{in: "uniform:2", wantErr: "no parameter"},
		{in: "pareto:2", wantErr: "want uniform"},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := ParseSkew(tt.in)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("ParseSkew(%q) = %v, %v; want error containing %q", tt.in, got, err, tt.wantErr)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("ParseSkew(%q) = %v, %v; want %v", tt.in, got, err, tt.want)
			}
			if back, err := ParseSkew(got.String()); err != nil || back != got {
				t.Fatalf("round trip of %v = %v, %v", got, back, err)
			}
		})
	}
}

func TestConfigValidate(t *testing.T) {
	tests := []struct {
		name string
		cfg  Config
		want []string // substrings of the error; none: valid
	}{
		{name: "defaults", cfg: Config{}},
		{name: "everything wrong at once",
			cfg:  Config{Merchants: -1, MinAmount: 5, MaxAmount: 2, Duplicates: 0.7, Malformed: 0.6, IDPrefix: "evt{"},
			want: []string{"merchants -1", "amounts 5..2", "sum at most 1", "id prefix"}},
		{name: "bad skew", cfg: Config{Skew: Skew{Kind: Zipf, Param: 0.5}}, want: []string{"zipf exponent"}},
		{name: "negative share", cfg: Config{Duplicates: -0.1}, want: []string{"duplicates -0.1"}},
		{name: "long prefix", cfg: Config{IDPrefix: strings.Repeat("e", 41)}, want: []string{"at most 40"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := New(tt.cfg)
			if len(tt.want) == 0 {
				if err != nil {
					t.Fatalf("New: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatal("New accepted an invalid config")
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not mention %q", err, w)
				}
			}
		})
	}
}

func TestMerchantID(t *testing.T) {
	if got := MerchantID(42); got != "m-000042" {
		t.Fatalf("MerchantID(42) = %q", got)
	}
	ids := MerchantIDs(3)
	if len(ids) != 3 || ids[0] != "m-000000" || ids[2] != "m-000002" {
		t.Fatalf("MerchantIDs(3) = %v", ids)
	}
}
