package workload

import (
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
)

// SkewKind is the shape of the merchant distribution.
type SkewKind int

// Shapes.
const (
	// Uniform: every merchant equally likely.
	Uniform SkewKind = iota
	// Hot: merchant m-000000 takes Param of all events, the rest share the
	// remainder evenly (the "one hot merchant" load).
	Hot
	// Zipf: merchant of rank k (m-00000k) has weight (k+1)^-Param, Param > 1.
	Zipf
)

// Skew is a merchant distribution.
type Skew struct {
	Kind  SkewKind
	Param float64
}

// ParseSkew reads "uniform", "hot:0.2" or "zipf:1.1".
func ParseSkew(s string) (Skew, error) {
	name, param, hasParam := strings.Cut(strings.TrimSpace(s), ":")
	var sk Skew
	switch name {
	case "uniform", "":
		if hasParam {
			return Skew{}, fmt.Errorf("workload: skew %q: uniform takes no parameter", s)
		}
		return Skew{Kind: Uniform}, nil
	case "hot":
		sk.Kind = Hot
	case "zipf":
		sk.Kind = Zipf
	default:
		return Skew{}, fmt.Errorf("workload: skew %q: want uniform, hot:SHARE or zipf:S", s)
	}
	p, err := strconv.ParseFloat(param, 64)
	if err != nil {
		return Skew{}, fmt.Errorf("workload: skew %q: parameter: %w", s, err)
	}
	sk.Param = p
	if err := sk.validate(); err != nil {
		return Skew{}, fmt.Errorf("workload: %w", err)
	}
	return sk, nil
}

// HotSkew is Hot with share, or Uniform when share is 0.
func HotSkew(share float64) Skew {
	if share == 0 {
		return Skew{Kind: Uniform}
	}
	return Skew{Kind: Hot, Param: share}
}

func (s Skew) String() string {
	switch s.Kind {
	case Hot:
		return "hot:" + strconv.FormatFloat(s.Param, 'g', -1, 64)
	case Zipf:
		return "zipf:" + strconv.FormatFloat(s.Param, 'g', -1, 64)
	}
	return "uniform"
}

func (s Skew) validate() error {
	switch {
	case s.Kind == Hot && (s.Param < 0 || s.Param > 1):
		return fmt.Errorf("skew %v: hot share must be in [0,1]", s)
	case s.Kind == Zipf && (!(s.Param > 1) || s.Param > 100):
		return fmt.Errorf("skew %v: zipf exponent must be in (1,100]", s)
	case s.Kind != Uniform && s.Kind != Hot && s.Kind != Zipf:
		return fmt.Errorf("skew kind %d unknown", s.Kind)
	}
	return nil
}

// picker draws merchant indexes.
type picker func() int

func newPicker(s Skew, n int, r *rand.Rand) picker {
	switch s.Kind {
	case Hot:
		if n == 1 {
			return func() int { return 0 }
		}
		return func() int {
			if r.Float64() < s.Param {
				return 0
			}
			return 1 + r.IntN(n-1)
		}
	case Zipf:
		z := rand.NewZipf(r, s.Param, 1, uint64(n-1))
		return func() int { return int(z.Uint64()) }
	}
	return func() int { return r.IntN(n) }
}
