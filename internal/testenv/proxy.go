package testenv

import (
	"bytes"
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
	gate   sync.RWMutex // held by Pause; every forwarded write holds it for reading
	mu     sync.Mutex
	paused bool
	closed bool
	at     []byte        // PauseAt's pattern, nil when not armed
	atHit  chan struct{} // closed when a client sent it
	conns  map[net.Conn]struct{}
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
	p.at, p.atHit = nil, nil // a PauseAt not hit yet is called off
	if !p.paused {
		p.gate.Lock() // waits for the writes in flight
		p.paused = true
	}
}

// PauseAt makes the proxy Pause as soon as a client sends bytes containing
// pattern (within one read), before they are forwarded: the client then waits
// on that very request. The channel is closed when it paused so; a Pause
// first calls it off.
func (p *Proxy) PauseAt(pattern []byte) <-chan struct{} {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.at, p.atHit = pattern, make(chan struct{})
	return p.atHit
}

// hit pauses if a client's bytes b hold PauseAt's pattern.
func (p *Proxy) hit(b []byte) {
	p.mu.Lock()
	if p.at == nil || !bytes.Contains(b, p.at) {
		p.mu.Unlock()
		return
	}
	hit := p.atHit
	p.at, p.atHit = nil, nil
	p.mu.Unlock()
	p.Pause()
	close(hit)
}

// Resume forwards again, the held bytes first.
func (p *Proxy) Resume() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.paused {
		p.gate.Unlock()
		p.paused = false
	}
}

// Close closes the listener and every connection and waits for the proxy's
// goroutines to exit. Calling it again is a no-op.
func (p *Proxy) Close() {
	p.mu.Lock()
	p.closed = true
	for c := range p.conns {
		c.Close()
	}
	p.mu.Unlock()
	p.Resume() // held writes fail on their closed connections
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
		p.mu.Lock()
		if p.closed {
			p.mu.Unlock()
			down.Close()
			up.Close()
			return
		}
		p.conns[down], p.conns[up] = struct{}{}, struct{}{}
		p.wg.Add(2)
		p.mu.Unlock()
		go p.pipe(up, down, true)
		go p.pipe(down, up, false)
	}
}

// pipe copies from src to dst, holding bytes while paused (and pausing on
// PauseAt's pattern when src is a client). When either side
// ends it closes both, which ends the pipe of the other direction too.
func (p *Proxy) pipe(dst, src net.Conn, fromClient bool) {
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
			if fromClient {
				p.hit(buf[:n])
			}
			p.gate.RLock()
			_, werr := dst.Write(buf[:n])
			p.gate.RUnlock()
			if werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}
