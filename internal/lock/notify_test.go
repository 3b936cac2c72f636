package lock

import (
	"context"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/zap"

	"github.com/quotaflow/billing/internal/testenv"
)

func signalled(w *waiter) bool {
	select {
	case <-w.released:
		return true
	default:
		return false
	}
}

// A release wakes the longest waiter only; one that leaves without the lock
// passes its wake-up on, one that leaves with it does not.
func TestNotifierWakesOneAndPassesOn(t *testing.T) {
	r := testenv.NewRedis(t)
	n := newNotifier(r.Client, zap.NewNop(), defaultKeepAlive)
	defer n.close()
	ctx := context.Background()
	ch := r.Keys.LockChannel(r.Keys.Lock("m-1"))

	var ws []*waiter
	for range 3 {
		w, err := n.add(ctx, ch)
		if err != nil {
			t.Fatal(err)
		}
		ws = append(ws, w)
	}
	select {
	case <-ws[0].ready:
	case <-time.After(5 * time.Second):
		t.Fatal("subscription never confirmed")
	}
	// A real release is published on the channel and reaches the first waiter.
	if err := r.Client.Publish(ctx, ch, "1").Err(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-ws[0].released:
	case <-time.After(5 * time.Second):
		t.Fatal("first waiter not woken by PUBLISH")
	}
	if signalled(ws[1]) || signalled(ws[2]) {
		t.Fatal("a release woke more than one waiter")
	}

	n.dispatch(ch)
	n.remove(ws[0], false) // woken, gave up: the wake-up goes on to ws[1]
	if !signalled(ws[1]) || signalled(ws[2]) {
		t.Fatal("wake-up not passed on to the next waiter")
	}
	n.dispatch(ch)
	n.remove(ws[1], true) // woken and obtained: nothing to pass on
	if signalled(ws[2]) {
		t.Fatal("a waiter that obtained the lock passed a wake-up on")
	}
	n.remove(ws[2], false)
	n.mu.Lock()
	left := len(n.chans)
	n.mu.Unlock()
	if left != 0 {
		t.Fatalf("%d channels still subscribed after the last waiter left", left)
	}
}

// After the connection dropped, the first waiter of each channel is woken
// once the channel is subscribed again: a release published in between was lost.
func TestNotifierWakesAfterResubscribe(t *testing.T) {
	r := testenv.NewRedis(t)
	n := newNotifier(r.Client, zap.NewNop(), defaultKeepAlive)
	defer n.close()
	ch := r.Keys.LockChannel(r.Keys.Lock("m-1"))
	w, err := n.add(context.Background(), ch)
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-w.ready:
	case <-time.After(5 * time.Second):
		t.Fatal("subscription never confirmed")
	}
	n.reset()
	if signalled(w) {
		t.Fatal("woken before the channel was subscribed again")
	}
	n.confirm(ch) // go-redis's resubscription is confirmed
	if !signalled(w) {
		t.Fatal("not woken after the resubscription")
	}
	n.confirm(ch)
	if signalled(w) {
		t.Fatal("woken twice for one reconnection")
	}
	n.remove(w, true)
}

// blackhole is a TCP proxy to Redis that can swallow all traffic of the
// connections open so far, like a peer that vanished without a FIN or RST.
type blackhole struct {
	ln     net.Listener
	target string
	frozen atomic.Int64 // connections with an id below this are frozen
	nextID atomic.Int64
	wg     sync.WaitGroup
	mu     sync.Mutex
	conns  []net.Conn
}

func newBlackhole(t *testing.T, target string) *blackhole {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	b := &blackhole{ln: ln, target: target}
	b.wg.Go(b.accept)
	t.Cleanup(func() {
		ln.Close()
		b.mu.Lock()
		for _, c := range b.conns {
			c.Close()
		}
		b.mu.Unlock()
		b.wg.Wait()
	})
	return b
}

func (b *blackhole) accept() {
	for {
		in, err := b.ln.Accept()
		if err != nil {
			return
		}
		out, err := net.Dial("tcp", b.target)
		if err != nil {
			in.Close()
			continue
		}
		b.mu.Lock()
		b.conns = append(b.conns, in, out)
		b.mu.Unlock()
		id := b.nextID.Add(1)
		b.wg.Go(func() { b.pipe(id, out, in) })
		b.wg.Go(func() { b.pipe(id, in, out) })
	}
}

func (b *blackhole) pipe(id int64, dst, src net.Conn) {
	defer dst.Close()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if err != nil {
			return
		}
		if id > b.frozen.Load() { // frozen connections drop their traffic
			if _, err := dst.Write(buf[:n]); err != nil {
				return
			}
		}
	}
}

// freeze silences every connection opened so far; new ones still work.
func (b *blackhole) freeze() { b.frozen.Store(b.nextID.Load()) }

// A subscription whose connection goes silent is replaced after a ping goes
// unanswered, and releases reach the waiters again.
func TestNotifierReplacesSilentSubscription(t *testing.T) {
	r := testenv.NewRedis(t)
	proxy := newBlackhole(t, r.Addr)
	rdb := redis.NewClient(&redis.Options{Addr: proxy.ln.Addr().String()})
	t.Cleanup(func() { rdb.Close() })
	n := newNotifier(rdb, zap.NewNop(), 100*time.Millisecond)
	defer n.close()
	ctx := context.Background()
	ch := r.Keys.LockChannel(r.Keys.Lock("m-1"))
	w, err := n.add(ctx, ch)
	if err != nil {
		t.Fatal(err)
	}
	defer n.remove(w, true)
	select {
	case <-w.ready:
	case <-time.After(5 * time.Second):
		t.Fatal("subscription never confirmed")
	}
	n.mu.Lock()
	old := n.ps
	n.mu.Unlock()

	proxy.freeze()
	deadline := time.Now().Add(10 * time.Second)
	for {
		n.mu.Lock()
		replaced := n.ps != old
		n.mu.Unlock()
		if replaced {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("silent subscription not replaced")
		}
		time.Sleep(20 * time.Millisecond)
	}
	// The waiter is woken once the channel is subscribed again...
	select {
	case <-w.released:
	case <-time.After(5 * time.Second):
		t.Fatal("waiter not woken after the subscription was replaced")
	}
	// ...and later releases reach it on the new connection.
	if err := r.Client.Publish(ctx, ch, "1").Err(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-w.released:
	case <-time.After(5 * time.Second):
		t.Fatal("release not delivered on the new subscription")
	}
}
