package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/quotaflow/billing/internal/cli"
	"github.com/quotaflow/billing/internal/dial"
	"github.com/quotaflow/billing/internal/workload"
)

// dialRedis connects to --redis (a comma list; more than one address is a
// cluster), with the rest of the environment's Redis settings.
func dialRedis(d deps, list string) (redis.UniversalClient, []string, error) {
	cfg := d.cfg.Redis
	cfg.Addrs = strings.Split(list, ",")
	cfg.Cluster = cfg.Cluster || len(cfg.Addrs) > 1
	rdb, err := dial.Redis(cfg)
	return rdb, cfg.Addrs, err
}

// writeJSON writes v as indented JSON to path (--json-file).
func writeJSON(path string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err == nil {
		err = os.WriteFile(path, append(b, '\n'), 0o644)
	}
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return nil
}

// printJSON writes v as indented JSON to w (--output json).
func printJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// skewFlags are --hot and --skew, which say the same thing two ways.
type skewFlags struct {
	hot  float64
	skew string
}

func (s *skewFlags) register(fs *cli.FlagSet, defHot float64) {
	fs.Float64Var(&s.hot, "hot", defHot, "share of events going to one hot merchant (m-000000), 0..1; 0 = uniform")
	fs.StringVar(&s.skew, "skew", "", "merchant distribution: uniform, hot:SHARE or zipf:S (S > 1); overrides --hot")
}

func (s *skewFlags) value() (workload.Skew, error) {
	if s.skew != "" {
		return workload.ParseSkew(s.skew)
	}
	return workload.ParseSkew(workload.HotSkew(s.hot).String()) // validated
}

// rateFlag reads "500", "500/s" or "0" (as fast as possible).
type rateFlag float64

func (r *rateFlag) String() string { return strconv.FormatFloat(float64(*r), 'g', -1, 64) + "/s" }

func (r *rateFlag) Set(s string) error {
	v, err := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(s), "/s"), 64)
	if err != nil || v < 0 {
		return fmt.Errorf("want N or N/s with N >= 0, got %q", s)
	}
	*r = rateFlag(v)
	return nil
}
