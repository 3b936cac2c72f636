package deduct

// Outcome is what became of one event. Business outcomes are values, not errors.
type Outcome string

// The outcomes.
const (
	Applied         Outcome = "applied"          // deducted and recorded as a debit
	Duplicate       Outcome = "duplicate"        // already recorded, same merchant and amount: no effect
	Insufficient    Outcome = "insufficient"     // recorded as a rejected row; no balance moved
	UnknownMerchant Outcome = "unknown_merchant" // no merchant_balance row: a rejected row, no Redis key
	Conflict        Outcome = "conflict"         // same event_id with other content; Err is permanent
	Refused         Outcome = "refused"          // the database refuses a value; Err is permanent
	Invalid         Outcome = "invalid"          // breaks the event contract; Err is permanent
	Waiting         Outcome = "pending"          // a refund whose payment is not recorded yet: it waits for it
	Void            Outcome = "void"             // a refund of a rejected payment: recorded, nothing moves
)

// Result is the outcome of one event of a batch.
type Result struct {
	Outcome Outcome
	// BalanceAfter is the merchant's MySQL balance (credited - debited) after
	// the event, as recorded on its ledger row; 0 for an unknown merchant and
	// for the permanent failures.
	BalanceAfter int64
	// Refunded is what a refund gave back (Applied, or Conflict for the part
	// within the debit).
	Refunded int64
	// Err is the event's permanent error (failure.Permanent with class
	// conflict, refused or invalid) for Conflict, Refused and Invalid; nil otherwise.
	Err error
}
