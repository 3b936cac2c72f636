package main

import (
	"bytes"
	"context"
	"errors"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

func env(kv map[string]string) func(string) string {
	return func(k string) string { return kv[k] }
}

func TestDispatch(t *testing.T) {
	quiet := env(map[string]string{"LOG_LEVEL": "error"})
	tests := []struct {
		name string
		args []string
		want error
	}{
		{"no command", nil, errUsage},
		{"unknown command", []string{"simulate"}, errUsage},
		{"demo with a bad flag", []string{"demo", "--events", "lots"}, errUsage},
		{"produce without brokers", []string{"produce"}, errUsage},
		{"produce with a stray argument", []string{"produce", "--brokers", "127.0.0.1:1", "extra"}, errUsage},
		{"bench with a bad flag", []string{"bench", "--callers", "many"}, errUsage},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out, errOut bytes.Buffer
			err := run(context.Background(), tt.args, &out, &errOut, quiet)
			if !errors.Is(err, tt.want) {
				t.Fatalf("run(%q) = %v, want %v (stderr %q)", tt.args, err, tt.want, errOut.String())
			}
		})
	}
	var out bytes.Buffer
	if err := run(context.Background(), []string{"help"}, &out, &out, quiet); err != nil || !bytes.Contains(out.Bytes(), []byte("billing-sim produce")) {
		t.Fatalf("help: %v, %q", err, out.String())
	}
}

func TestRateFlag(t *testing.T) {
	tests := []struct {
		in      string
		want    float64
		wantErr bool
	}{
		{"500", 500, false}, {"500/s", 500, false}, {"0", 0, false}, {"2.5/s", 2.5, false},
		{"-1", 0, true}, {"fast", 0, true}, {"10/m", 0, true},
	}
	for _, tt := range tests {
		var r rateFlag
		err := r.Set(tt.in)
		if (err != nil) != tt.wantErr || (!tt.wantErr && float64(r) != tt.want) {
			t.Errorf("Set(%q) = %v, %v; want %v (error %v)", tt.in, float64(r), err, tt.want, tt.wantErr)
		}
	}
}

func TestSkewFlags(t *testing.T) {
	tests := []struct {
		s       skewFlags
		want    string
		wantErr bool
	}{
		{skewFlags{hot: 0.2}, "hot:0.2", false},
		{skewFlags{}, "uniform", false},
		{skewFlags{hot: 0.2, skew: "zipf:1.1"}, "zipf:1.1", false},
		{skewFlags{hot: 2}, "", true},
		{skewFlags{skew: "zipf:0.9"}, "", true},
	}
	for _, tt := range tests {
		got, err := tt.s.value()
		if (err != nil) != tt.wantErr || (!tt.wantErr && got.String() != tt.want) {
			t.Errorf("%+v -> %v, %v; want %s (error %v)", tt.s, got, err, tt.want, tt.wantErr)
		}
	}
}
