package lock

import (
	"context"
	"errors"
	"net"
	"slices"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/zap"
)

const (
	// defaultKeepAlive is how long the subscription may stay silent before it
	// is pinged; as long again without an answer, and it is replaced.
	defaultKeepAlive = 15 * time.Second
	// sendTimeout bounds a (re)SUBSCRIBE or UNSUBSCRIBE made for no waiter in
	// particular.
	sendTimeout = time.Second
)

// notifier shares one Redis subscription among all waiters of a Client: it
// SUBSCRIBEs to a lock's release channel while at least one waiter waits for
// that lock, and one goroutine reads the subscription and wakes the first
// waiter of the channel a message names. The goroutine starts with the first
// waiter and is stopped and awaited by close.
//
// Plain PUBLISH/SUBSCRIBE is used: in a Redis Cluster a PUBLISH reaches every
// node, so the subscription may live on any node. go-redis reconnects the
// subscription and resubscribes its channels after an error; a connection
// that goes silent (half-open) and does not answer a ping is replaced.
// Notifications published meanwhile are lost, so the first waiter of each
// channel is woken to try again once it is subscribed again (and waiters poll
// meanwhile).
type notifier struct {
	rdb       redis.UniversalClient
	log       *zap.Logger
	keepAlive time.Duration

	// sendMu makes each decision to (un)subscribe and the command that carries
	// it one step, so the commands reach Redis in the order of the decisions.
	sendMu sync.Mutex

	mu       sync.Mutex
	ps       *redis.PubSub // nil until the first waiter
	isClosed bool
	stop     chan struct{} // closed by close
	chans    map[string]*channel
	pending  map[string]int // SUBSCRIBE commands sent and not yet confirmed, by channel
	wg       sync.WaitGroup
}

// channel is a subscribed release channel and its waiters.
type channel struct {
	waiters []*waiter     // in arrival order
	ready   chan struct{} // closed once the subscription is confirmed
	isReady bool
	stale   bool // the connection dropped: releases may have been missed
}

func (c *channel) markReady() {
	if !c.isReady {
		c.isReady = true
		close(c.ready)
	}
}

// waiter is one Wait call's registration.
type waiter struct {
	channel  string
	ready    <-chan struct{} // closed once a release on channel will be seen
	released chan struct{}   // signalled (buffer 1) when the lock may be free
}

func newNotifier(rdb redis.UniversalClient, log *zap.Logger, keepAlive time.Duration) *notifier {
	return &notifier{
		rdb:       rdb,
		log:       log,
		keepAlive: keepAlive,
		stop:      make(chan struct{}),
		chans:     make(map[string]*channel),
		pending:   make(map[string]int),
	}
}

// add registers a waiter for releases on ch, subscribing if it is the first.
func (n *notifier) add(ctx context.Context, ch string) (*waiter, error) {
	n.sendMu.Lock()
	defer n.sendMu.Unlock()

	n.mu.Lock()
	if n.isClosed {
		n.mu.Unlock()
		return nil, ErrClosed
	}
	if n.ps == nil {
		n.ps = n.rdb.Subscribe(context.WithoutCancel(ctx))
		n.wg.Add(1)
		go n.run(n.ps)
	}
	c, existed := n.chans[ch]
	if !existed {
		c = &channel{ready: make(chan struct{})}
		n.chans[ch] = c
		n.pending[ch]++
	}
	w := &waiter{channel: ch, ready: c.ready, released: make(chan struct{}, 1)}
	c.waiters = append(c.waiters, w)
	ps := n.ps
	n.mu.Unlock()

	if existed {
		return w, nil
	}
	if err := ps.Subscribe(ctx, ch); err != nil {
		// go-redis keeps the channel and subscribes it again when it reconnects;
		// until then the waiter polls.
		n.log.Debug("lock: subscribe failed", zap.String("channel", ch), zap.Error(err))
		n.mu.Lock()
		n.confirmLocked(ch)
		n.mu.Unlock()
	}
	return w, nil
}

// remove unregisters w, unsubscribing when it was the channel's last waiter.
// A waiter that leaves without the lock may have taken a wake-up meant for
// the channel, so it passes one on to the next waiter.
func (n *notifier) remove(w *waiter, obtained bool) {
	n.sendMu.Lock()
	defer n.sendMu.Unlock()

	n.mu.Lock()
	c := n.chans[w.channel]
	c.waiters = slices.DeleteFunc(c.waiters, func(o *waiter) bool { return o == w })
	if len(c.waiters) > 0 || n.isClosed {
		if !obtained {
			c.wake()
		}
		n.mu.Unlock()
		return
	}
	delete(n.chans, w.channel)
	ps := n.ps
	n.mu.Unlock()

	ctx, cancel := context.WithTimeout(context.Background(), sendTimeout)
	defer cancel()
	if err := ps.Unsubscribe(ctx, w.channel); err != nil {
		n.log.Debug("lock: unsubscribe failed", zap.String("channel", w.channel), zap.Error(err))
	}
}

// run reads the subscription until close.
func (n *notifier) run(ps *redis.PubSub) {
	defer n.wg.Done()
	ctx := context.Background()
	retry := backoff{min: 10 * time.Millisecond, max: time.Second}
	timer := time.NewTimer(0)
	defer timer.Stop()
	pinged := false
	for {
		msg, err := ps.ReceiveTimeout(ctx, n.keepAlive)
		if err != nil {
			if n.closed() {
				return
			}
			if isTimeout(err) && !pinged {
				_ = ps.Ping(ctx) // any answer proves the connection alive
				pinged = true
				continue
			}
			pinged = false
			if isTimeout(err) {
				// No answer to the ping: the connection is half-open, and a
				// write error may not come for minutes.
				n.log.Warn("lock: release subscription silent, replacing it")
				if ps = n.replace(ps); ps == nil {
					return
				}
				continue
			}
			// The connection was dropped: go-redis has subscribed again on a new
			// one, or will on the next receive.
			n.reset()
			n.log.Warn("lock: release subscription failed", zap.Error(err))
			timer.Reset(retry.delay())
			select {
			case <-n.stop:
				return
			case <-timer.C:
			}
			continue
		}
		retry.reset()
		pinged = false
		switch m := msg.(type) {
		case *redis.Subscription:
			if m.Kind == "subscribe" {
				n.confirm(m.Channel)
			}
		case *redis.Message:
			n.dispatch(m.Channel)
		}
	}
}

func (n *notifier) confirm(ch string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.confirmLocked(ch)
}

// confirmLocked counts one SUBSCRIBE of ch as answered. Confirmations arrive
// in the order the commands were sent, so when none is pending the latest
// SUBSCRIBE, made after any UNSUBSCRIBE, is in effect.
func (n *notifier) confirmLocked(ch string) {
	if n.pending[ch] > 1 {
		n.pending[ch]--
		return
	}
	delete(n.pending, ch)
	c := n.chans[ch]
	if c == nil {
		return
	}
	c.markReady()
	if c.stale {
		// Subscribed again after a dropped connection: a release published in
		// between was lost, so have the waiters try again now.
		c.stale = false
		c.wake()
	}
}

// replace closes old and subscribes every channel on a new connection. It
// returns nil when the notifier is closed.
func (n *notifier) replace(old *redis.PubSub) *redis.PubSub {
	n.sendMu.Lock()
	defer n.sendMu.Unlock()

	n.mu.Lock()
	if n.isClosed {
		n.mu.Unlock()
		return nil
	}
	ps := n.rdb.Subscribe(context.Background())
	n.ps = ps
	clear(n.pending)
	chans := make([]string, 0, len(n.chans))
	for ch, c := range n.chans {
		c.stale = true
		n.pending[ch] = 1 // one confirmation per channel of the SUBSCRIBE below
		chans = append(chans, ch)
	}
	n.mu.Unlock()

	_ = old.Close()
	if len(chans) == 0 {
		return ps
	}
	ctx, cancel := context.WithTimeout(context.Background(), sendTimeout)
	defer cancel()
	if err := ps.Subscribe(ctx, chans...); err != nil {
		// Kept by go-redis and subscribed on the next connection.
		n.log.Debug("lock: resubscribe failed", zap.Error(err))
	}
	return ps
}

// reset forgets pending confirmations after the connection was dropped, and
// marks every channel stale until go-redis has subscribed it again.
func (n *notifier) reset() {
	n.mu.Lock()
	defer n.mu.Unlock()
	clear(n.pending)
	for _, c := range n.chans {
		c.stale = true
	}
}

// dispatch wakes a waiter of ch.
func (n *notifier) dispatch(ch string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if c := n.chans[ch]; c != nil {
		c.wake()
	}
}

// wake signals the longest-waiting waiter of the channel; the others keep
// waiting. A waiter that tries and loses stays first, so each Client serves
// its waiters of a lock roughly in order, and a release costs each Client one
// attempt instead of one per waiter (no thundering herd). Across Clients the
// fastest attempt wins.
func (c *channel) wake() {
	if len(c.waiters) == 0 {
		return
	}
	select {
	case c.waiters[0].released <- struct{}{}:
	default: // already signalled
	}
}

func (n *notifier) closed() bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.isClosed
}

// close stops the goroutine and waits for it. Waiting callers see stop closed.
func (n *notifier) close() {
	n.mu.Lock()
	if n.isClosed {
		n.mu.Unlock()
		return
	}
	n.isClosed = true
	close(n.stop)
	ps := n.ps
	n.mu.Unlock()
	if ps != nil {
		_ = ps.Close()
	}
	n.wg.Wait()
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}
