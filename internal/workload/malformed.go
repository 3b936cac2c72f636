package workload

import (
	"encoding/json"
	"strconv"
	"time"

	"github.com/quotaflow/billing/internal/event"
)

// Flaws a Malformed message may carry, each refused by event.Decode.
const (
	FlawTruncatedJSON  = "truncated-json"
	FlawNotJSON        = "not-json"
	FlawTrailingData   = "trailing-data"
	FlawAmountZero     = "bad-amount-zero"
	FlawAmountNegative = "bad-amount-negative"
	FlawAmountString   = "bad-amount-string"
	FlawAmountFraction = "bad-amount-fraction"
	FlawAmountTooLarge = "bad-amount-too-large"
	FlawBadSource      = "bad-source"
	FlawMissingEventID = "missing-event-id"
	FlawBadMerchantID  = "bad-merchant-id"
	FlawBadTime        = "bad-occurred-at"
	FlawKeyMismatch    = "key-mismatch"
)

// Flaws lists every flaw, in the order the generator draws them from.
func Flaws() []string {
	return []string{
		FlawTruncatedJSON, FlawNotJSON, FlawTrailingData,
		FlawAmountZero, FlawAmountNegative, FlawAmountString, FlawAmountFraction, FlawAmountTooLarge,
		FlawBadSource, FlawMissingEventID, FlawBadMerchantID, FlawBadTime, FlawKeyMismatch,
	}
}

// corrupt breaks e in one of the ways of Flaws, chosen at random. The key
// stays the merchant id (so the message lands where the merchant's would),
// except for FlawKeyMismatch.
func (g *Generator) corrupt(e event.PaymentSucceeded) (key, value []byte, flaw string) {
	flaws := Flaws()
	flaw = flaws[g.rng.IntN(len(flaws))]
	key = []byte(e.MerchantID)
	good := e.Encode()
	fields := map[string]any{
		"event_id":    e.EventID,
		"payment_id":  e.PaymentID,
		"merchant_id": e.MerchantID,
		"amount":      e.Amount,
		"source":      string(e.Source),
		"occurred_at": e.OccurredAt.Format(time.RFC3339Nano),
	}
	switch flaw {
	case FlawTruncatedJSON:
		return key, good[:len(good)/2], flaw
	case FlawNotJSON:
		return key, []byte("payment " + e.EventID + " succeeded"), flaw
	case FlawTrailingData:
		return key, append(append(good, ' '), good...), flaw
	case FlawAmountZero:
		fields["amount"] = 0
	case FlawAmountNegative:
		fields["amount"] = -e.Amount
	case FlawAmountString:
		fields["amount"] = json.RawMessage(`"` + jsonInt(e.Amount) + `"`)
	case FlawAmountFraction:
		fields["amount"] = json.RawMessage(jsonInt(e.Amount) + ".5")
	case FlawAmountTooLarge:
		fields["amount"] = int64(event.MaxAmount) + 1
	case FlawBadSource:
		fields["source"] = "web"
	case FlawMissingEventID:
		delete(fields, "event_id")
	case FlawBadMerchantID:
		fields["merchant_id"] = "{" + e.MerchantID + "}"
	case FlawBadTime:
		fields["occurred_at"] = "yesterday"
	case FlawKeyMismatch:
		key = []byte(e.MerchantID + "-other")
	}
	value, _ = json.Marshal(fields) // strings, integers and valid raw JSON: cannot fail
	return key, value, flaw
}

func jsonInt(n int64) string { return strconv.FormatInt(n, 10) }
