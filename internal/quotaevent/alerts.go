package quotaevent

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// Alerts are a merchant's low-balance thresholds: Units (absolute) and
// Percent (of the balance right after the merchant's last credit or expiry:
// what it holds for the period, see Change); 0 turns either off. A threshold
// that comes to less than 1 unit is off: low always means above depletion.
type Alerts struct {
	Units   int64
	Percent int
}

// MaxPercent is the largest percentage threshold (100 would always be low).
const MaxPercent = 99

// IsZero reports no threshold at all.
func (a Alerts) IsZero() bool { return a.Units == 0 && a.Percent == 0 }

// Thresholds are the thresholds in units for a base (see Alerts), highest
// first, equal ones once.
func (a Alerts) Thresholds(base int64) []int64 {
	var out []int64
	for _, t := range a.list() {
		if v := t.at(base); v > 0 && (len(out) == 0 || out[0] != v) {
			out = append(out, v)
		}
	}
	if len(out) == 2 && out[1] > out[0] {
		out[0], out[1] = out[1], out[0]
	}
	return out
}

func (a Alerts) String() string {
	var parts []string
	if a.Units > 0 {
		parts = append(parts, strconv.FormatInt(a.Units, 10))
	}
	if a.Percent > 0 {
		parts = append(parts, strconv.Itoa(a.Percent)+"%")
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, ",")
}

// threshold is one configured threshold: units, or a percentage.
type threshold struct {
	units   int64
	percent int
}

func (a Alerts) list() []threshold {
	var out []threshold
	if a.Units > 0 {
		out = append(out, threshold{units: a.Units})
	}
	if a.Percent > 0 {
		out = append(out, threshold{percent: a.Percent})
	}
	return out
}

// at is the threshold in units for a base (rounded down).
func (t threshold) at(base int64) int64 {
	if t.percent == 0 {
		return t.units
	}
	return max(base, 0)/100*int64(t.percent) + max(base, 0)%100*int64(t.percent)/100
}

// ParseAlerts reads thresholds as "1000", "10%" or both, comma-separated
// ("1000,10%"), or "none"; at most one of each kind.
func ParseAlerts(s string) (Alerts, error) {
	var a Alerts
	if s = strings.TrimSpace(s); s == "none" || s == "" {
		return a, nil
	}
	for _, part := range strings.Split(s, ",") {
		if err := a.add(strings.TrimSpace(part)); err != nil {
			return Alerts{}, err
		}
	}
	return a, nil
}

// add reads one threshold, "1000" or "10%", into a.
func (a *Alerts) add(s string) error {
	if p, ok := strings.CutSuffix(s, "%"); ok {
		n, err := strconv.Atoi(p)
		switch {
		case err != nil || n < 1 || n > MaxPercent:
			return fmt.Errorf("threshold %q: a percentage must be 1..%d%%", s, MaxPercent)
		case a.Percent != 0:
			return errors.New("at most one percentage threshold")
		}
		a.Percent = n
		return nil
	}
	n, err := strconv.ParseInt(s, 10, 64)
	switch {
	case err != nil || n < 1:
		return fmt.Errorf("threshold %q: units must be a positive integer, or a percentage like 10%%", s)
	case a.Units != 0:
		return errors.New("at most one threshold in units")
	}
	a.Units = n
	return nil
}
