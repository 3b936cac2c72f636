package workload

import (
	"fmt"
	"strconv"

	"github.com/quotaflow/billing/internal/event"
)

// Topic says which topic a message is for.
type Topic int

// The topics of a stream.
const (
	Payments Topic = iota // payment.succeeded
	Refunds               // payment.refunded
)

// RefundKind says what a refund message tries.
type RefundKind int

// Refund kinds; a refund sent again is a Duplicate message of the Refunds
// topic, of the kind of its original.
const (
	NoRefund RefundKind = iota // a payment message
	Partial                    // part of what its payment has left
	Whole                      // all its payment has left
	Over                       // more than its payment has left: the part beyond is a conflict
	Early                      // sent before its payment, at least EarlyLead messages ahead
)

var refundKindNames = [...]string{"payment", "partial", "whole", "over", "early"}

func (k RefundKind) String() string { return refundKindNames[k] }

// EarlyLead is how many messages an Early refund goes ahead of its payment:
// at least one hand-over of ProduceOnSchedule, so the refund is written
// before its payment is.
const EarlyLead = chunk

// RefundMix weighs the refund kinds (and re-sent refunds, Duplicate); the
// zero value is DefaultRefundMix.
type RefundMix struct {
	Partial, Whole, Over, Early, Duplicate float64
}

// DefaultRefundMix is the mix of Config.RefundMix left zero.
var DefaultRefundMix = RefundMix{Partial: 0.4, Whole: 0.2, Over: 0.1, Early: 0.2, Duplicate: 0.1}

func (x RefundMix) sum() float64 { return x.Partial + x.Whole + x.Over + x.Early + x.Duplicate }

func (x RefundMix) validate() error {
	if x == (RefundMix{}) {
		return nil // the default
	}
	if x.Partial < 0 || x.Whole < 0 || x.Over < 0 || x.Early < 0 || x.Duplicate < 0 || x.sum() <= 0 {
		return fmt.Errorf("refund mix %+v: weights must be non-negative, not all 0", x)
	}
	return nil
}

// refundWindow is how many recent refunds a re-sent one is drawn from.
const refundWindow = 256

// heldPayment is the payment of an Early refund, due later in the stream.
type heldPayment struct {
	due  int
	e    event.PaymentSucceeded
	left int64
}

// nextHeld emits the payment of an early refund once it is due.
func (g *Generator) nextHeld() (Message, bool) {
	if len(g.held) == 0 || g.held[0].due > g.seq {
		return Message{}, false
	}
	h := g.held[0]
	g.held = g.held[1:]
	h.e.OccurredAt = g.at()
	m := Message{Seq: g.seq, Key: []byte(h.e.MerchantID), Value: h.e.Encode(), Kind: Valid, Event: h.e, DuplicateOf: -1}
	g.remember(m, h.left)
	return m, true
}

// Drain returns the payments of early refunds not yet emitted, as the next
// messages of the stream: a finite run that wants every refund's payment
// sent ends with them.
func (g *Generator) Drain() []Message {
	var out []Message
	for len(g.held) > 0 {
		g.held[0].due = g.seq
		m, _ := g.nextHeld()
		out = append(out, m)
		g.seq++
	}
	return out
}

// refund makes the next refund message.
func (g *Generator) refund() Message {
	kind := g.refundKind()
	if kind == NoRefund { // re-send an earlier refund
		if len(g.refunds) > 0 {
			orig := g.refunds[g.rng.IntN(len(g.refunds))]
			return Message{Seq: g.seq, Topic: Refunds, Key: orig.Key, Value: orig.Value, Kind: Duplicate,
				Refund: orig.Refund, RefundKind: orig.RefundKind, DuplicateOf: orig.Seq}
		}
		kind = Early
	}
	if kind != Early && len(g.history) == 0 {
		kind = Early
	}
	var pay event.PaymentSucceeded
	var left, amount int64
	switch kind {
	case Early:
		pay = g.newEvent()
		amount = 1 + g.rng.Int64N(pay.Amount)
		g.held = append(g.held, heldPayment{due: g.seq + EarlyLead, e: pay, left: pay.Amount - amount})
		left = pay.Amount
	default:
		i := g.rng.IntN(len(g.history))
		for try := 0; try < 4 && g.left[i] == 0 && kind != Over; try++ {
			i = g.rng.IntN(len(g.history))
		}
		if g.left[i] == 0 {
			kind = Over // nothing left to give back: all of it is beyond
		}
		pay, left = g.history[i].Event, g.left[i]
		switch kind {
		case Partial:
			amount = left
			if left > 1 {
				amount = 1 + g.rng.Int64N(left-1)
			}
		case Whole:
			amount = left
		case Over:
			amount = left + 1 + g.rng.Int64N(g.cfg.MaxAmount)
		}
		g.left[i] = max(0, left-amount)
	}
	n := strconv.Itoa(g.refundsMade)
	g.refundsMade++
	r := event.RefundCommand{
		RefundID: "ref-" + g.cfg.IDPrefix + n, EventID: pay.EventID, MerchantID: pay.MerchantID, Amount: amount,
		Reason:     [...]string{event.RefundReasonRefund, event.RefundReasonChargeback, event.RefundReasonCorrection}[g.rng.IntN(3)],
		OccurredAt: g.at(),
	}
	m := Message{Seq: g.seq, Topic: Refunds, Key: []byte(r.MerchantID), Value: r.Encode(), Kind: Valid, Refund: r, RefundKind: kind,
		DuplicateOf: -1, Taken: min(amount, left), Beyond: max(0, amount-left)}
	if len(g.refunds) < refundWindow {
		g.refunds = append(g.refunds, m)
	} else {
		g.refunds[g.rnext] = m
		g.rnext = (g.rnext + 1) % refundWindow
	}
	return m
}

// refundKind draws a kind by the mix; NoRefund stands for a re-sent refund.
func (g *Generator) refundKind() RefundKind {
	x := g.cfg.RefundMix
	u := g.rng.Float64() * x.sum()
	for _, c := range []struct {
		w float64
		k RefundKind
	}{{x.Partial, Partial}, {x.Whole, Whole}, {x.Over, Over}, {x.Early, Early}} {
		if u < c.w {
			return c.k
		}
		u -= c.w
	}
	return NoRefund
}
