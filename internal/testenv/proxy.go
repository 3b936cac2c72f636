package testenv

import (
	"errors"
	"net"
	"sync"
	"testing"
)

// Proxy is a TCP proxy to a real server that can go silent without closing a
// connection, as a network partition or a frozen proxy does: what a client
// sees then is a server that accepts and never answers.
type Proxy struct {
	t      testing.TB
	target string
	ln     net.Listener
	wg     sync.WaitGroup

	mu      sync.Mutex
	cond    *sync.Cond // signalled when paused, closed or writing change
	paused  bool
	closed  bool
	writing int // writes in flight, which Pause waits for
	conns   map[net.Conn]struct{}
}

// NewProxy listens on a free port of 127.0.0.1 and forwards every connection
// to target. It is closed when the test ends.
func NewProxy(t testing.TB, target string) *Proxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("testenv: proxy: %v", err)
	}
	p := &Proxy{t: t, target: target, ln: ln, conns: map[net.Conn]struct{}{}}
	p.cond = sync.NewCond(&p.mu)
	p.wg.Add(1)
	go p.accept()
	t.Cleanup(p.Close)
	return p
}

// Addr is the proxy's host:port.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// Pause stops forwarding bytes in both directions, keeping every connection
// open and accepting new ones. When it returns no byte is forwarded until
// Resume: bytes that arrive meanwhile are held, not dropped.
func (p *Proxy) Pause() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.paused = true
	for p.writing > 0 && !p.closed {
		p.cond.Wait()
	}
}

// Resume forwards again, the held bytes first.
func (p *Proxy) Resume() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.paused = false
	p.cond.Broadcast()
}

// Close closes the listener and every connection and waits for the proxy's
// goroutines to exit. Calling it again is a no-op.
func (p *Proxy) Close() {
	p.mu.Lock()
	p.closed = true
	p.cond.Broadcast()
	for c := range p.conns {
		c.Close()
	}
	p.mu.Unlock()
	p.ln.Close()
	p.wg.Wait()
}

func (p *Proxy) accept() {
	defer p.wg.Done()
	for {
		down, err := p.ln.Accept()
		if err != nil {
			if !errors.Is(err, net.ErrClosed) {
				p.t.Errorf("testenv: proxy accept: %v", err)
			}
			return
		}
		up, err := net.Dial("tcp", p.target)
		if err != nil {
			p.t.Errorf("testenv: proxy dial %s: %v", p.target, err)
			down.Close()
			continue
		}
		if !p.track(down, up) {
			return
		}
		p.wg.Add(2)
		go p.pipe(up, down)
		go p.pipe(down, up)
	}
}

// track registers the connections for Close, or closes them if the proxy is
// closed already.
func (p *Proxy) track(conns ...net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		for _, c := range conns {
			c.Close()
		}
		return false
	}
	for _, c := range conns {
		p.conns[c] = struct{}{}
	}
	return true
}

// pipe copies from src to dst, holding bytes while paused. When either side
// ends it closes both, which ends the pipe of the other direction too.
func (p *Proxy) pipe(dst, src net.Conn) {
	defer p.wg.Done()
	defer func() {
		p.mu.Lock()
		delete(p.conns, src)
		delete(p.conns, dst)
		p.mu.Unlock()
		src.Close()
		dst.Close()
	}()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			if !p.beginWrite() {
				return
			}
			_, werr := dst.Write(buf[:n])
			p.endWrite()
			if werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// beginWrite waits while the proxy is paused; false means it is closed.
func (p *Proxy) beginWrite() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	for p.paused && !p.closed {
		p.cond.Wait()
	}
	if p.closed {
		return false
	}
	p.writing++
	return true
}

func (p *Proxy) endWrite() {
	p.mu.Lock()
	p.writing--
	p.cond.Broadcast()
	p.mu.Unlock()
}
