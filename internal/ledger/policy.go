package ledger

import "strconv"

// PolicyKind is a merchant's overdraft policy.
type PolicyKind string

// The overdraft policies.
const (
	PolicyReject  PolicyKind = "reject"  // the balance never goes below 0 (the default)
	PolicyFloor   PolicyKind = "floor"   // down to -Floor
	PolicyOverage PolicyKind = "overage" // never rejects; the part below 0 is overage
)

// Policy is a merchant's overdraft policy.
type Policy struct {
	Kind  PolicyKind
	Floor int64 // PolicyFloor only
}

func (p Policy) String() string {
	if p.Kind == PolicyFloor {
		return "floor " + strconv.FormatInt(p.Floor, 10)
	}
	if p.Kind == "" {
		return string(PolicyReject)
	}
	return string(p.Kind)
}

// Lowest is the lowest balance the policy allows; false when unbounded (overage).
func (p Policy) Lowest() (int64, bool) {
	switch p.Kind {
	case PolicyOverage:
		return 0, false
	case PolicyFloor:
		return -p.Floor, true
	}
	return 0, true
}

// Covers reports whether a balance may pay amount: available - amount stays
// at or above the policy's lowest balance (always, under overage).
func (p Policy) Covers(available, amount int64) bool {
	lowest, bounded := p.Lowest()
	return !bounded || available-amount >= lowest
}

// Overage is the part of a debit of amount, from balance before, that falls
// below zero under the overage policy; 0 under the others.
func (p Policy) Overage(before, amount int64) int64 {
	if p.Kind != PolicyOverage {
		return 0
	}
	return min(amount, max(amount-max(before, 0), 0))
}

// RedisFloor is the policy as the quota hash's floor field holds it:
// "inf" for overage, else the floor in units.
func (p Policy) RedisFloor() string {
	lowest, bounded := p.Lowest()
	if !bounded {
		return "inf"
	}
	return strconv.FormatInt(-lowest, 10)
}

// Policy is the merchant's overdraft policy.
func (b Balance) Policy() Policy {
	return Policy{Kind: b.PolicyKind, Floor: b.OverdraftFloor}
}
